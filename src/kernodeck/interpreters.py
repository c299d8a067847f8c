"""Which interpreter a command looks at: the one owner of that choice.

Every command that checks or describes an environment (verify, check, doctor, capture,
`kernodeck.require`, rebuild's verify step) asks `choose` and gets an `Interpreter`: the path and
why it was chosen, in this order:

1. `--python PATH` (or the `python=` argument of the API) when given;
2. an activated virtual environment (`VIRTUAL_ENV`: its bin/python, Scripts\\python.exe on Windows);
3. an activated conda environment (`CONDA_PREFIX`: its bin/python, python.exe on Windows);
4. when the command names a project folder (the manifest's; the current folder for doctor): a
   virtual environment `.venv` in that folder or the nearest parent that has one, as uv finds it
   (a folder with `pyvenv.cfg` and an interpreter);
5. the interpreter running Kernodeck, unless the command names a project folder and Kernodeck
   runs from a tool environment of its own (`uv tool install`, pipx, uvx: `tool_environment`): that
   environment is never the project's, so the command stops with a UsageError that says where it
   looked and how to name the project's interpreter (doctor describes it instead, saying what it
   is: `uvx kernodeck doctor` on a fresh machine shows the driver and the devices).

So a Kernodeck installed in a venv of its own (pipx, `uv tool`) checks the project venv the user
activated, or the project's `.venv` when none is, never itself. `kernodeck.require()` names no
project folder: a script checks the interpreter it runs in. An activated environment whose interpreter is gone is passed over (it says
so in the reason of the next choice). A `--python` that is not there or not executable is a
UsageError (exit 2).

This module imports only the standard library (and kernodeck.errors): the probe launcher uses it
before anything else is imported.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kernodeck.errors import UsageError


class Source(str, Enum):
    """Where the choice came from (also the `source` field of the JSON report)."""

    OPTION = "option"
    VIRTUAL_ENV = "virtual-env"
    CONDA_PREFIX = "conda-prefix"
    PROJECT_VENV = "project-venv"
    RUNNING = "running"
    GIVEN = "given"


REASONS = {
    Source.OPTION: "--python",
    Source.VIRTUAL_ENV: "activated venv (VIRTUAL_ENV)",
    Source.CONDA_PREFIX: "activated conda environment (CONDA_PREFIX)",
    Source.PROJECT_VENV: "the project's .venv, not activated",
    Source.RUNNING: "the interpreter running Kernodeck",
}


@dataclass(frozen=True)
class Interpreter:
    """The interpreter a command looks at, and why."""

    path: str
    source: Source
    reason: str

    def describe(self) -> str:
        """`/x/.venv/bin/python (activated venv (VIRTUAL_ENV))`."""
        return f"{self.path} ({self.reason})"

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "source": self.source.value, "reason": self.reason}


def _is_windows() -> bool:
    return os.name == "nt"


def env_python(prefix: str | os.PathLike[str], *, conda: bool = False) -> Path:
    """The interpreter of an environment folder: bin/python (Scripts\\python.exe for a venv on
    Windows, python.exe at the top of a conda environment on Windows)."""
    root = Path(prefix)
    if _is_windows():
        return root / "python.exe" if conda else root / "Scripts" / "python.exe"
    return root / "bin" / "python"


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def resolve(python: str | os.PathLike[str], *, option: str = "--python") -> str:
    """A given interpreter as an absolute path: a name is looked up on PATH, an environment folder
    means its interpreter. UsageError when it is not there or cannot run."""
    p = os.fspath(python)
    if not p.strip():
        raise UsageError(f"{option} is empty", hint=f"pass {option} with a path, e.g. .venv/bin/python")
    if os.sep not in p and not (os.altsep and os.altsep in p) and not os.path.exists(p):
        found = shutil.which(p)
        if found is None:
            raise UsageError(
                f"{option} {p}: no interpreter of that name on PATH",
                hint=f"pass {option} with a path, e.g. .venv/bin/python",
            )
        p = found
    path = Path(p)
    if path.is_dir():
        for cand in (env_python(path), env_python(path, conda=True), path / "bin" / "python"):
            if cand.exists():
                path = cand
                break
    if not path.exists():
        raise UsageError(
            f"{option} {p}: no interpreter at that path",
            hint=f"pass {option} with the environment's interpreter, e.g. .venv/bin/python",
        )
    if path.is_dir() or not os.access(path, os.X_OK):
        raise UsageError(
            f"{option} {p}: not an executable interpreter",
            hint=f"pass {option} with the environment's interpreter, e.g. .venv/bin/python",
        )
    # Keep the venv's own path: resolving the symlink would leave the environment.
    return str(path.absolute())


def given(python: str | os.PathLike[str], reason: str, *, option: str = "--python") -> Interpreter:
    """An interpreter chosen by the caller for a reason of its own (rebuild: the rebuilt venv)."""
    return Interpreter(resolve(python, option=option), Source.GIVEN, reason)


def is_running(interp: Interpreter) -> bool:
    """Whether `interp` is the interpreter running Kernodeck now, chosen without `--python`: the
    running one, or an activated environment whose interpreter this process is (the same binary
    and the same environment prefix: a venv's python is often a link to its base's)."""
    if interp.source is Source.RUNNING:
        return True
    if interp.source not in (Source.VIRTUAL_ENV, Source.CONDA_PREFIX, Source.PROJECT_VENV):
        return False
    try:
        if not os.path.samefile(interp.path, sys.executable):
            return False
        prefix = os.path.realpath(sys.prefix)
    except OSError:
        return False
    exe = Path(interp.path).absolute()
    return any(os.path.realpath(p) == prefix for p in (exe.parent, exe.parent.parent))


def project_venv(folder: str | os.PathLike[str]) -> Path | None:
    """The interpreter of the `.venv` in `folder` or its nearest parent that has one (a folder
    with `pyvenv.cfg` and a usable interpreter, as uv discovers it); None when there is none."""
    start = Path(os.path.abspath(folder))  # `..` folded: parents must be the real ones
    for d in (start, *start.parents):
        venv = d / ".venv"
        if (venv / "pyvenv.cfg").is_file():
            exe = env_python(venv)
            if _usable(exe):
                return exe
    return None


#: The file each tool installer leaves at the root of a tool's own environment.
_TOOL_MARKERS = (("uv-receipt.toml", "uv tool"), ("pipx_metadata.json", "pipx"))


def tool_environment(prefix: str | os.PathLike[str] | None = None) -> str | None:
    """The installer ("uv tool", "pipx", "uvx") when `prefix` (default: the environment running
    Kernodeck) is the environment it made for a tool; None otherwise. `uvx` (`uv tool run`)
    leaves no marker: its environments live in uv's cache (`.../archive-v0/<id>`), made by uv."""
    root = Path(sys.prefix if prefix is None else prefix)
    for marker, installer in _TOOL_MARKERS:
        if (root / marker).is_file():
            return installer
    parent = root.parent.name
    if parent.startswith("archive-v") and parent[len("archive-v") :].isdigit():
        try:
            cfg = (root / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        if any(line.split("=", 1)[0].strip() == "uv" for line in cfg.splitlines() if "=" in line):
            return "uvx"
    return None


def _venvs_in(folder: Path) -> list[Path]:
    """The interpreters of the virtual environments directly in `folder` other than `.venv`
    (`.venv-rebuild`, `venv`, `env`: names uv does not look for), by name."""
    found: list[Path] = []
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return found
    for child in children:
        if child.name != ".venv" and (child / "pyvenv.cfg").is_file() and _usable(env_python(child)):
            found.append(env_python(child))
    return found


def _activated(env: Mapping[str, str], passed_over: list[str]) -> Interpreter | None:
    """The activated venv's interpreter, else the activated conda environment's; None when neither
    is (an activated one without an interpreter is added to `passed_over`)."""
    for var, source, conda in (
        ("VIRTUAL_ENV", Source.VIRTUAL_ENV, False),
        ("CONDA_PREFIX", Source.CONDA_PREFIX, True),
    ):
        prefix = env.get(var)
        if not prefix:
            continue
        exe = env_python(prefix, conda=conda)
        if _usable(exe):
            reason = REASONS[source]
            if passed_over:
                reason += f"; {', '.join(passed_over)}"
            return Interpreter(str(exe.absolute()), source, reason)
        passed_over.append(f"{var}={prefix} has no interpreter")
    return None


def _no_project_environment(tool: str, here: Path, passed_over: list[str], option: str) -> UsageError:
    """The error when the running interpreter is a tool's own and the project has no environment."""
    looked = "no activated venv (VIRTUAL_ENV) or conda environment (CONDA_PREFIX)"
    if passed_over:
        looked += f" ({', '.join(passed_over)})"
    hint = f"activate the project's environment, create it as .venv, or pass {option} PATH (the project's interpreter)"
    others = _venvs_in(here)
    if others:
        try:
            shown = os.path.relpath(others[0])
        except ValueError:  # another drive (Windows)
            shown = str(others[0])
        hint = f"pass {option} {shown}, the venv in {here}; or " + hint
    return UsageError(
        f"no project environment to look at: {looked}, and no .venv in {here} or a folder above it; "
        f"Kernodeck runs from its own {tool} environment ({sys.prefix}), which is not the project's",
        hint=hint,
    )


def choose(
    python: str | os.PathLike[str] | Interpreter | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    option: str = "--python",
    project: str | os.PathLike[str] | None = None,
    own_tool: bool = False,
) -> Interpreter:
    """The interpreter to look at: `python` if given, else the activated venv, else the activated
    conda environment, else (with `project`, a folder) the project's `.venv`, else the running
    interpreter. UsageError for a bad `python`, and (with `project`) when the running interpreter
    is a tool environment's (see the module docstring), unless `own_tool` (doctor, which describes
    a machine as much as an environment): then that interpreter, with a reason that says so."""
    if isinstance(python, Interpreter):
        return python
    if python is not None:
        return Interpreter(resolve(python, option=option), Source.OPTION, REASONS[Source.OPTION])
    passed_over: list[str] = []
    activated = _activated(os.environ if environ is None else environ, passed_over)
    if activated is not None:
        return activated
    found = project_venv(project) if project is not None else None
    if found is not None:
        reason = f"{REASONS[Source.PROJECT_VENV]}: {found.parent.parent}"
        if passed_over:
            reason += f"; {', '.join(passed_over)}"
        return Interpreter(str(found), Source.PROJECT_VENV, reason)
    tool = tool_environment() if project is not None else None
    if tool is not None and own_tool:  # doctor: describe it, saying what it is
        reason = (
            f"{REASONS[Source.RUNNING]}: its own {tool} environment, not a project's; {option} PATH names one"
        )
        return Interpreter(sys.executable, Source.RUNNING, reason)
    if tool is not None and project is not None:
        raise _no_project_environment(tool, Path(os.path.abspath(project)), passed_over, option)
    reason = REASONS[Source.RUNNING]
    if passed_over:
        reason += f"; {', '.join(passed_over)}"
    return Interpreter(sys.executable, Source.RUNNING, reason)


def extra_requirements(extra: str) -> list[str]:
    """The requirements Kernodeck's extra `extra` adds (its installed metadata's Requires-Dist)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    try:
        declared = requires("kernodeck") or []
    except PackageNotFoundError:
        return []
    out: list[str] = []
    for text in declared:
        req = Requirement(text)
        if (
            req.marker is not None
            and req.marker.evaluate({"extra": extra})
            and not req.marker.evaluate({"extra": ""})
        ):
            req.marker = None
            out.append(str(req))
    return out


def add_extra_hint(extra: str, *, prefix: str | os.PathLike[str] | None = None) -> str:
    """The command that adds Kernodeck's extra `extra` to the environment Kernodeck runs from, for the
    way it was installed (pipx, `uv tool`, uvx, or pip in a venv): `pip install` does not reach a tool's
    environment. The extra's own requirements are named, so the command never reinstalls Kernodeck
    itself from an index (it may have come from a folder or a bundle)."""
    reqs = extra_requirements(extra) or [f"kernodeck[{extra}]"]
    quoted = " ".join(f"'{r}'" for r in reqs)
    tool = tool_environment(prefix)
    if tool == "pipx":
        how = f"pipx inject kernodeck {quoted}"
    elif tool in ("uv tool", "uvx"):
        withs = " ".join(f"--with '{r}'" for r in reqs)
        source = (
            _uv_tool_source(Path(sys.prefix if prefix is None else prefix)) if tool == "uv tool" else None
        )
        how = (
            f"uv tool install {withs} {source or 'kernodeck'}"
            if tool == "uv tool"
            else f"uvx {withs} kernodeck ..."
        )
    else:
        python = sys.executable if prefix is None else str(env_python(Path(prefix)))
        how = f"{python} -m pip install {quoted}"
    return f"add Kernodeck's [{extra}] extra: {how}"


def _uv_tool_source(root: Path) -> str | None:
    """Where `uv tool install` took Kernodeck from (a folder, a file, a URL), as its receipt records
    it; None for the index (then `kernodeck` names it)."""
    from kernodeck.support.tomltext import tomllib

    try:
        receipt = tomllib.loads((root / "uv-receipt.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    for req in receipt.get("tool", {}).get("requirements", []):
        if isinstance(req, dict) and req.get("name") == "kernodeck":
            for key in ("directory", "path", "url", "git"):
                if isinstance(req.get(key), str):
                    return str(req[key])
    return None
