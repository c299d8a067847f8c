"""The files a `[[check]]` runs, and whether the receiver of a bundle will have them.

A check's command runs in the manifest's folder. When it names a script of the project
(`python scripts/eval.py`, `bash run.sh`, `python -m app.evaluate`) the receiver needs that file:
either in the bundle's code, or in the revision the bundle pins (what the receiver checks out,
always with `--no-code`). `warnings` names every such file that is untracked, outside the pinned
revision, outside the project, or missing, so the author learns it before the receiver's check
fails with "can't open file".

Only arguments that name a script are looked at (a script suffix, `./x`, or a `-m` module found in
the project): data and config arguments have their own declarations and checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from kernodeck.gitstate import run_git
from kernodeck.manifest.schema import Manifest

#: Suffixes of files a command runs.
SCRIPT_SUFFIXES = (".py", ".sh", ".bash", ".zsh", ".R", ".jl", ".pl", ".rb", ".js", ".ipynb")


def scripts_of(argv: Sequence[str], folder: Path) -> list[str]:
    """The project files `argv` runs, as written (relative to `folder`, or absolute)."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if "{" in value or (value.startswith("-") and value == arg):
            continue  # a placeholder ({out}, {python}) or an option
        if i > 0 and argv[i - 1] == "-m":
            found += _module_file(value, folder)
        elif value.endswith(SCRIPT_SUFFIXES) or value.startswith("./"):
            found.append(value)
    return list(dict.fromkeys(found))


def _module_file(module: str, folder: Path) -> list[str]:
    """The project file `python -m module` runs; none for an installed module."""
    base = PurePosixPath(*module.split("."))
    for candidate in (f"{base}.py", f"{base}/__main__.py"):
        if (folder / candidate).is_file():
            return [candidate]
    return []


def _inside(folder: Path, path: str) -> str | None:
    """`path` relative to `folder` (POSIX), or None when it lies outside."""
    resolved = (folder / path).resolve()
    try:
        return resolved.relative_to(folder.resolve()).as_posix()
    except ValueError:
        return None


def _git_list(folder: Path, args: Iterable[str], paths: list[str]) -> set[str] | None:
    """The `paths` a git listing command reports (relative to `folder`); None without git."""
    proc = run_git(folder, *args, "--", *paths)
    if proc is None or proc.returncode != 0:
        return None
    return {line for line in proc.stdout.splitlines() if line}


def warnings(m: Manifest, folder: Path, *, carried: set[str] | None) -> list[str]:
    """What `bundle` warns about the files the checks run. `carried` is the set of files the
    bundle holds (None with `--no-code`: the receiver has only the pinned revision)."""
    runs: dict[str, list[str]] = {}
    out: list[str] = []
    for check in m.check:
        for script in scripts_of(check.run, folder):
            rel = _inside(folder, script)
            if rel is None:
                out.append(
                    f"check {check.name!r} runs {script}, outside the project: neither the bundle nor"
                    " the pinned revision can hold it"
                )
            else:
                runs.setdefault(rel, []).append(check.name)
    if not runs:
        return out
    paths = sorted(runs)
    revision = m.code.revision if m.code is not None else None
    in_revision = _git_list(folder, ["ls-tree", "-r", "--name-only", revision or "HEAD"], paths)
    tracked = _git_list(folder, ["ls-files"], paths)
    where = f"revision {revision[:12]}" if revision else "HEAD"
    for rel in paths:
        names = ", ".join(repr(n) for n in runs[rel])
        if not (folder / rel).is_file():
            out.append(
                f"check {names} runs {rel}, which does not exist in the project: the check fails wherever it runs"
            )
        elif in_revision is not None and rel not in in_revision:
            state = "is untracked" if tracked is not None and rel not in tracked else f"is not in {where}"
            out.append(f"check {names} runs {rel}, which {state}{_consequence(rel, where, carried)}")
    return out


def _consequence(rel: str, where: str, carried: set[str] | None) -> str:
    if carried is not None and rel in carried:
        return f": the bundle carries a copy, but a checkout of {where} lacks it (commit it, then `kernodeck capture`)"
    return (
        " and the bundle does not carry it: the receiver's check fails with \"can't open file\""
        " (commit it, then `kernodeck capture`)"
    )
