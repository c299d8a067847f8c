"""`kernodeck bundle OUT/`: a hand-over folder another launch can use, with nothing secret in it.

Layout::

    OUT/
      REBUILD.md                          the exact commands, in order; credential variable NAMES
      repro.toml                          the manifest (scrubbed)
      requirements-rebuild-<platform>.txt every platform's lock (scrubbed), pylock.<platform>.toml too
      references.json                     data, weights and checkpoint: fingerprint, source, access names
      observed/installed-after.txt        the author's observed inventory (pip freeze --all)
      observed/verify-report.json         the last verify report, and .md and .html for people
      <config files the manifest names>   verbatim, at their paths
      <check references>                  the control results the checks compare with
      <code>                              the sources beside the manifest (unless --no-code)
      <data, weights, checkpoint>         only with --include-data
      BUNDLE.sha256                       sha256 of every other file (`sha256sum -c BUNDLE.sha256`)

Generated and text files are scrubbed (credentials, the author's host paths). Files whose content
is fingerprinted or executed (configuration, code, data, references) are copied verbatim, so a
secret or a host path in one of them stops the bundle instead of being silently rewritten.
The folder is assembled beside OUT and renamed into place: a failed bundle leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import string
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from kernodeck.errors import KernodeckError, UsageError
from kernodeck.gitstate import git_state, later_commits_touch_only_kernodeck_files
from kernodeck.handover import selfwheel
from kernodeck.handover import sums as bundlesums
from kernodeck.handover.rebuild import (
    INVENTORY_FILE,
    credential_names,
    installs_project,
    project_argv,
    stage_commands,
)
from kernodeck.handover.scrub import Scrubber
from kernodeck.index.sources import locker_pip_settings
from kernodeck.lockfile.names import PYLOCK_PREFIX, REQUIREMENTS_PREFIX, manifest_file, requirements_filename
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.schema import Manifest
from kernodeck.report import Report, Status
from kernodeck.support import envvars
from kernodeck.support.fsio import atomic_write_bytes

BUNDLE_SUMS = bundlesums.NAME
OBSERVED_DIR = "observed"
REPORT_JSON = "verify-report.json"
REPORT_MD = "verify-report.md"
REPORT_HTML = "verify-report.html"
REFERENCES = "references.json"
REBUILD_MD = "REBUILD.md"

#: Where `bundle` looks for the last verify report when --report is not given (beside repro.toml).
REPORT_CANDIDATES = (
    "verify-report.json",
    "report.json",
    ".kernodeck/verify-report.json",
    ".kernodeck/last-verify.json",
)

_SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    "node_modules",
    ".kernodeck",
    ".ipynb_checkpoints",
    "out",
    "outputs",
}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".swp", ".tmp", "~")
#: Files that hold credentials by convention: never part of the code, whatever they contain.
CREDENTIAL_FILES = {
    ".netrc",
    "_netrc",
    ".pypirc",
    ".git-credentials",
    ".env",
    ".envrc",
    ".npmrc",
    "pip.conf",
    "pip.ini",
    "uv.toml",
}
_MAX_CODE_FILE = 10 * 1024 * 1024


class BundleError(KernodeckError):
    """The bundle would reveal a secret or a host path, or an input it needs is missing."""


@dataclass
class BundleResult:
    out: Path
    files: list[str] = field(default_factory=list)
    scrubbed: list[str] = field(default_factory=list)  # generated/text files that had something replaced
    warnings: list[str] = field(default_factory=list)
    report_included: bool = False

    def render(self) -> str:
        lines = [f"wrote {self.out} ({len(self.files)} files; check with `sha256sum -c {BUNDLE_SUMS}`)"]
        if self.scrubbed:
            lines.append("scrubbed (credentials or host paths replaced): " + ", ".join(self.scrubbed))
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)


@dataclass
class _Plan:
    """What goes into the bundle: relative path -> bytes, and which entries are verbatim copies."""

    files: dict[str, bytes] = field(default_factory=dict)
    verbatim: dict[str, str] = field(default_factory=dict)  # rel -> why it is there


#: Where the author's machine names package locations of its own (mirrors, local wheel folders).
MIRROR_VARIABLES = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    envvars.MIRRORS.name,
)


def mirror_urls(environ: Mapping[str, str], declared: list[str], configured: Iterable[str] = ()) -> list[str]:
    """The author's package locations that the manifest does not declare: the URLs in the
    variables above (`NAME=URL` entries of KERNODECK_MIRRORS too) and in pip's configuration
    (`configured`). The bundle replaces them."""
    keep = {u.rstrip("/") for u in declared}
    out: list[str] = []
    values = [environ.get(var, "") for var in MIRROR_VARIABLES] + list(configured)
    for value in values:
        for item in value.replace(",", " ").split():
            url = item.split("=", 1)[1] if "=" in item and "://" not in item.split("=", 1)[0] else item
            if "://" in url and url.rstrip("/") not in keep:
                out.append(url)
    return sorted(set(out))


def _rel(path: str) -> str:
    """A safe relative POSIX path inside the bundle, or raise."""
    p = PurePosixPath(path.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise BundleError(
            f"{path!r} is not a relative path inside the project; the bundle cannot place it",
            hint="paths in repro.toml are relative to its folder",
        )
    return str(p)


# --- collecting ---------------------------------------------------------------------------------


def _git_files(folder: Path) -> list[str] | None:
    """Files under `folder` that git tracks or would track (not ignored), relative to it; None
    outside a git checkout."""
    try:
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
            cwd=folder,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    names = [n for n in proc.stdout.decode("utf-8", "replace").split("\0") if n]
    return sorted(n for n in names if (folder / n).is_file())


def _walk_files(folder: Path) -> list[str]:
    out: list[str] = []
    for root, dirs, files in os.walk(folder):
        r = Path(root)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _SKIP_DIRS
            and not d.startswith(".venv")
            and not (r / d / "pyvenv.cfg").exists()
            and not (r / d / BUNDLE_SUMS).exists()
        )
        for f in sorted(files):
            out.append((r / f).relative_to(folder).as_posix())
    return out


def _leaves(folder: Path, rel: str) -> bool:
    """Whether `rel` is (or passes through) a symlink whose target is outside `folder`."""
    path = folder / rel
    try:
        return folder.resolve() not in path.resolve().parents
    except OSError:
        return True


def code_files(folder: Path, exclude: set[str]) -> tuple[list[str], list[str]]:
    """(files to include as code, warnings) from the manifest's folder."""
    names = _git_files(folder)
    if names is None:
        names = _walk_files(folder)
    keep: list[str] = []
    warnings: list[str] = []
    leaving = [n for n in names if _leaves(folder, n)]
    if leaving:
        raise BundleError(
            f"{len(leaving)} file{'s' if len(leaving) != 1 else ''} of the code "
            f"{'are symlinks' if len(leaving) != 1 else 'is a symlink'} to a place outside the project;"
            " nothing was written",
            context=[f"{n} -> {os.readlink(folder / n)}" for n in leaving],
            hint="copy what the link points to into the project, or remove the link (or pass --no-code)",
        )
    for name in names:
        parts = PurePosixPath(name).parts
        if any(p in _SKIP_DIRS or p.startswith(".venv") for p in parts[:-1]):
            continue
        if name in exclude or name.endswith(_SKIP_SUFFIXES):
            continue
        base = parts[-1]
        if base.startswith((REQUIREMENTS_PREFIX, PYLOCK_PREFIX)) or base in (INVENTORY_FILE, BUNDLE_SUMS):
            continue
        if any(
            (folder / PurePosixPath(*parts[:i]) / marker).exists()
            for i in range(1, len(parts))
            for marker in ("pyvenv.cfg", BUNDLE_SUMS)
        ):
            continue
        if base in ("repro.toml",) and len(parts) == 1:
            continue
        if base in CREDENTIAL_FILES or (
            base.startswith(".env.") and base not in (".env.example", ".env.sample", ".env.template")
        ):
            warnings.append(
                f"{name} was left out of the code: such files hold credentials or the author's installer"
                " settings; REBUILD.md names the variables to set instead"
            )
            continue
        size = (folder / name).stat().st_size
        if size > _MAX_CODE_FILE:
            warnings.append(
                f"{name} ({size // (1 << 20)} MiB) was left out of the code; large files belong in [[data]]"
            )
            continue
        keep.append(name)
    return keep, warnings


def _data_paths(m: Manifest) -> list[tuple[str, str]]:
    """(relative path, what) of every local data-like file the manifest names."""
    out = [(d.path, f"data {d.name}") for d in m.data]
    out += [(w.path, f"weights {w.name}") for w in m.weights if w.path and not w.package and not w.hub]
    if m.resume is not None:
        out.append((m.resume.checkpoint.path, "resume checkpoint"))
    return out


def _reference_paths(m: Manifest) -> list[tuple[str, str]]:
    """The control results the checks compare against."""
    out: list[tuple[str, str]] = []
    for c in m.check:
        for o in c.output:
            if o.reference:
                out.append((o.reference, f"reference output of check {c.name}"))
    if m.resume is not None and m.resume.trajectory is not None:
        out.append((m.resume.trajectory.reference, "reference trajectory of the resume check"))
    return out


def references(m: Manifest, included: set[str]) -> list[dict[str, Any]]:
    """Data, weights and checkpoint references: fingerprint, source, access variable names."""
    refs: list[dict[str, Any]] = []
    for d in m.data:
        refs.append(
            {
                "kind": "data",
                "name": d.name,
                "path": d.path,
                "sha256": d.sha256,
                "size": d.size,
                "source": d.source,
                "access": list(d.access),
                "included": d.path in included,
            }
        )
    for w in m.weights:
        entry: dict[str, Any] = {
            "kind": "weights",
            "name": w.name,
            "access": list(w.access),
            "source": w.source,
        }
        if w.hub:
            entry.update(
                {"hub": w.hub, "revision": w.revision, "files": dict(sorted((w.files or {}).items()))}
            )
            entry["included"] = False
        elif w.package:
            entry.update(
                {"package": w.package, "path": w.path, "sha256": w.sha256, "included": "with the package"}
            )
        else:
            entry.update({"path": w.path, "sha256": w.sha256, "size": w.size, "included": w.path in included})
        refs.append(entry)
    if m.resume is not None:
        cp = m.resume.checkpoint
        refs.append(
            {
                "kind": "checkpoint",
                "name": "resume",
                "path": cp.path,
                "sha256": cp.sha256,
                "included": cp.path in included,
            }
        )
    return refs


def code_reference(
    m: Manifest, folder: Path, *, include_code: bool, allow_dirty: bool
) -> dict[str, Any] | None:
    """The `code` entry of references.json: the revision the bundled code is at, whether it had
    local changes, and, when HEAD is the pinned revision plus commits that change only Kernodeck's
    own files (capture, then committing repro.toml and the lock files), the pinned revision it
    stands for. Refuses a dirty tree unless `allow_dirty`."""
    if m.code is None:
        return None
    state = git_state(folder)
    if isinstance(state, str):
        return {"kind": "code", "revision": None, "dirty": False, "included": include_code}
    allow_dirty = allow_dirty or m.code.allow_dirty
    if state.dirty and not allow_dirty:
        raise BundleError(
            f"the code has uncommitted changes ({len(state.changed)}): {', '.join(state.changed[:5])}"
            + (" ..." if len(state.changed) > 5 else ""),
            hint="commit them (then `kernodeck capture`) and bundle again, or pass --allow-dirty"
            " (the bundle then says it holds uncommitted code)",
        )
    entry: dict[str, Any] = {
        "kind": "code",
        "revision": state.revision,
        "dirty": state.dirty,
        "included": include_code,
    }
    if state.dirty:
        entry["allow-dirty"] = True
        entry["changed"] = list(state.changed)
    if state.revision != m.code.revision:
        later = later_commits_touch_only_kernodeck_files(folder, m.code.revision, state.revision)
        if later is not None:
            entry["pinned"] = m.code.revision
            entry["kernodeck-files-changed-since"] = sorted(set(later))
    return entry


def find_report(folder: Path, report: str | Path | None) -> Path | None:
    if report is not None:
        p = Path(report)
        if not p.is_file():
            raise UsageError(f"no report at {p}", hint="write one with `kernodeck verify --json FILE`")
        return p
    for cand in REPORT_CANDIDATES:
        if (folder / cand).is_file():
            return folder / cand
    return None


# --- rendering ----------------------------------------------------------------------------------


def _md_cell(v: Any) -> str:
    if v is None:
        return ""
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 160 else text[:157] + "..."


def report_markdown(report: Report) -> str:
    """A verify report for people: one table row per step, then the summary."""
    lines = [
        f"# {report.kind.capitalize()} report",
        "",
        f"- reference: {report.reference_id or '?'}",
        f"- platform: {report.platform or '?'}",
        f"- result: {report.summary()}",
        "",
        "| layer | step | status | expected | observed | first error / hint |",
        "|---|---|---|---|---|---|",
    ]
    for s in report.steps:
        err = " ".join(x for x in (s.error or "", f"hint: {s.hint}" if s.hint else "") if x)
        lines.append(
            f"| {s.layer} | {_md_cell(s.name)} | {s.status.value} | {_md_cell(s.expected)} | "
            f"{_md_cell(s.observed)} | {_md_cell(err)} |"
        )
    return "\n".join(lines) + "\n"


def _sh(path: str) -> str:
    """A path for a shell command line, quoted only if it needs it."""
    import shlex

    return shlex.quote(path)


#: Where the bundle keeps Kernodeck itself (its wheel and the pins of its dependencies).
TOOL_DIR = "_kernodeck"
TOOL_REQUIREMENTS = f"{TOOL_DIR}/requirements.txt"
#: Kernodeck as REBUILD.md calls it, once installed from the bundle.
TOOL = ".kernodeck/bin/kernodeck"


def tool_install_commands() -> list[str]:
    """The commands that install the bundled Kernodeck into `.kernodeck` (nothing from outside
    the folder but its dependencies, at the versions that wrote the bundle)."""
    return [
        "python3 -m venv .kernodeck",
        f"PIP_CONFIG_FILE=/dev/null .kernodeck/bin/python -m pip install --isolated -r {TOOL_REQUIREMENTS}",
        f"PIP_CONFIG_FILE=/dev/null .kernodeck/bin/python -m pip install --isolated --no-deps {TOOL_DIR}/{selfwheel.wheel_filename()}",
    ]


def rebuild_command(platform: str | None) -> str:
    """The rebuild command REBUILD.md gives (for one platform, or letting rebuild pick)."""
    plat = f" --platform {platform}" if platform else ""
    return f"{TOOL} rebuild . --dest .venv-rebuild{plat} --json rebuild-report.json"


#: The folder and interpreter REBUILD.md's commands use (rebuild's default --dest).
MD_DEST = ".venv-rebuild"
MD_PYTHON = f"{MD_DEST}/bin/python"


def rebuild_stage_commands(m: Manifest) -> list[tuple[str, list[str]]]:
    """The commands of rebuild's stages as REBUILD.md prints them: built by the same functions the
    stages run (`rebuild.stage_commands`), for the folder and names a reader uses."""
    py = m.python.version
    return stage_commands(
        f"python{'.'.join(py.split('.')[:2])}",
        MD_DEST,
        MD_PYTHON,
        requirements_filename("<platform>"),
        installer="pip",
        allow_sdist=m.packages.allow_sdist,
    )


#: What REBUILD.md writes around a stage's command: the environment rebuild gives the installer,
#: and where the inventory goes.
_MD_PREFIX = {"install": "PIP_CONFIG_FILE=/dev/null "}
_MD_SUFFIX = {"inventory": f" > {INVENTORY_FILE}   # an observation, not a lock"}


#: Where REBUILD.md writes the manifest's build constraints for pip to read.
MD_BUILD_CONSTRAINTS = "build-constraints.txt"


def _md_stage_commands(m: Manifest) -> str:
    prefix = dict(_MD_PREFIX)
    lines = []
    if m.packages.build_constraints and m.packages.allow_sdist:
        # the pip of a fresh venv (older than 25.3) reads them from PIP_CONSTRAINT in the build
        # environments it starts; the install itself runs --isolated and ignores the variable
        quoted = " ".join(_sh(c) for c in m.packages.build_constraints)
        lines.append(
            f"printf '%s\\n' {quoted} > {MD_BUILD_CONSTRAINTS}   # [packages] build-constraints, for sdist builds"
        )
        prefix["install"] += f"PIP_CONSTRAINT={MD_BUILD_CONSTRAINTS} "
    for name, argv in rebuild_stage_commands(m):
        lines.append(prefix.get(name, "") + " ".join(_sh(a) for a in argv) + _MD_SUFFIX.get(name, ""))
    return "\n".join(lines)


def _md_credentials(creds: list[str]) -> list[str]:
    if not creds:
        return ["- No credentials are needed."]
    return [
        "- Set these environment variables (ask the project for their values; they are not in this folder):",
        *(f"  - `{name}`" for name in creds),
    ]


def _md_missing(refs: list[dict[str, Any]]) -> list[str]:
    missing = [r for r in refs if r.get("included") is False and r.get("kind") != "code"]
    if not missing:
        return []
    lines = ["", "Data and weights not included in this folder; put them at their paths before step 3:", ""]
    for r in missing:
        where = r.get("path") or r.get("hub")
        src = r.get("source") or (
            f"hub {r['hub']} at revision {r.get('revision')}" if r.get("hub") else "ask the project"
        )
        access = (
            f"; access: {', '.join('`' + a + '`' for a in r.get('access') or [])}" if r.get("access") else ""
        )
        digest = r.get("sha256") or ", ".join(f"{k}: {v}" for k, v in (r.get("files") or {}).items())
        lines.append(f"- {r['kind']} `{r['name']}` -> `{where}` from {src} (sha256 {digest}){access}")
    lines.append(f"\nEvery fingerprint is in `{REFERENCES}`.")
    return lines


def _md_dirty(refs: list[dict[str, Any]]) -> list[str]:
    code_ref = next((r for r in refs if r.get("kind") == "code"), None)
    if code_ref is None or not code_ref.get("dirty"):
        return []
    return [
        "",
        "**This bundle was written with `--allow-dirty`:** its code has uncommitted changes that no",
        "revision records ("
        + ", ".join(f"`{c}`" for c in code_ref.get("changed") or [])
        + "). Verify's code layer reports it as a warning.",
    ]


def _md_no_code(m: Manifest, with_code: bool) -> list[str]:
    if with_code:
        return []
    rev = m.code.revision if m.code else None
    return [
        "",
        "The code is not in this folder: check out"
        + (f" revision `{rev}`" if rev else " the project's code")
        + " and copy this folder's files into it.",
    ]


def _md_project(with_project: bool) -> list[str]:
    """What to do for the project itself when the lock holds its dependencies (`with_project`:
    `rebuild.installs_project`, the code included): rebuild from this folder installs only the
    locked dependencies."""
    if not with_project:
        return []
    argv = project_argv("pip", MD_PYTHON, ["-e", "."])
    return [
        "",
        "The lock holds the project's own dependencies (`[packages] from` reads its pyproject.toml);",
        "rebuild from this folder installs those, not the project itself (this folder's own files",
        "would be taken for the project's packages). To import it from the environment, install it",
        "from the project's checkout at the pinned revision, editable and without dependencies:",
        "",
        "```sh",
        "PIP_CONFIG_FILE=/dev/null " + " ".join(_sh(a) for a in argv) + "   # in the checkout",
        "```",
    ]


def _md_sample(m: Manifest) -> list[str]:
    if not (m.check or m.resume is not None):
        return ["The manifest declares no application check; verify's device computation is the only run."]
    lines = [
        "```sh",
        f"{TOOL} check repro.toml --python {MD_PYTHON} --out out --json check-report.json",
        "```",
        "",
        "which runs, from this folder and with `{out}` replaced by an output folder per check:",
        "",
    ]
    for c in m.check:
        lines.append(f"- `{c.name}`: `{' '.join(c.run)}` (timeout {c.timeout:g} s)")
    if m.resume is not None:
        lines.append(f"- `resume`: `{' '.join(m.resume.run)}`")
    return lines


def _md_criteria(o: Any) -> str:
    crit = []
    if o.shape is not None:
        crit.append(f"shape {o.shape}")
    if o.dtype:
        crit.append(f"dtype {o.dtype}")
    if o.finite:
        crit.append("finite")
    if o.count is not None:
        crit.append(f"count {o.count}")
    if o.key:
        crit.append(f"key {o.key}")
    if o.min is not None or o.max is not None:
        crit.append(
            f"values in [{o.min if o.min is not None else '-inf'}, {o.max if o.max is not None else 'inf'}]"
        )
    if o.ids_from:
        crit.append(f"ids equal {o.ids_from}")
    if o.equals is not None:
        crit.append(f"equals {json.dumps(o.equals)}")
    if o.sha256:
        crit.append(f"sha256 {o.sha256}")
    if o.reference:
        tol = ", ".join(
            f"{k} {v:g}"
            for k, v in (("atol", o.atol), ("rtol", o.rtol), ("cosine-min", o.cosine_min))
            if v is not None
        )
        crit.append(f"compared with `{o.reference}`" + (f" ({tol})" if tol else ""))
    return ", ".join(crit) or "exists"


def _md_outputs(m: Manifest) -> list[str]:
    if not m.check:
        return ["No outputs to read back."]
    lines = [
        "`kernodeck check` reads every output back from its folder and applies the criteria decided",
        "before the run (structure first, then values within tolerance):",
        "",
    ]
    for c in m.check:
        for o in c.output:
            lines.append(f"- `{c.name}` -> `{o.path}`: " + _md_criteria(o))
    lines += ["", "The outputs stay in `out/<check>/`; to look at them yourself:", "", "```sh"]
    for c in m.check:
        for o in c.output:
            where = f"out/{c.name}/{o.path}"
            if o.path.endswith(".npy"):
                lines.append(
                    f"{MD_PYTHON} -c \"import numpy as np; a = np.load('{where}'); "
                    'print(a.shape, a.dtype, bool(np.isfinite(a).all()))"'
                )
            elif o.path.endswith(".json"):
                lines.append(f"{MD_PYTHON} -m json.tool {where}")
            else:
                lines.append(f"ls -l {where}")
    lines.append("```")
    return lines


def _template(name: str) -> string.Template:
    """A text template shipped in the package (`kernodeck/templates/`)."""
    text = resources.files("kernodeck").joinpath("templates").joinpath(name).read_text(encoding="utf-8")
    return string.Template(text)


def rebuild_markdown(
    m: Manifest,
    *,
    platforms: list[str],
    refs: list[dict[str, Any]],
    creds: list[str],
    report: Report | None,
    with_code: bool,
    with_project: bool = False,
) -> str:
    """REBUILD.md: the exact commands in order, and what must be provided (names, never values).
    `with_project`: the lock holds the project's own dependencies and the code is included.
    The text is `templates/REBUILD.md.tmpl`; its commands come from the functions that run them."""
    py = m.python.version
    by_name = {p.name: p for p in m.platform}
    rows = [
        f"| `{name}` | {by_name[name].os} | {by_name[name].arch} | {by_name[name].backend or 'cpu'} "
        f"| `{rebuild_command(name)}` |"
        for name in platforms
    ]
    diagnose = [f"{TOOL} verify . --python {MD_PYTHON} --json verify-report.json"]
    if report is not None:
        diagnose.append(
            f"{TOOL} diff {OBSERVED_DIR}/{REPORT_JSON} verify-report.json   # which layer differs from the author's run"
        )

    def block(lines: list[str]) -> str:
        """A block that follows a line of the template directly ("" when empty)."""
        return "".join("\n" + line for line in lines)

    return _template("REBUILD.md.tmpl").substitute(
        name=m.reference.name,
        id=m.reference.id,
        check_sums=f"sha256sum -c {BUNDLE_SUMS}",
        python=py,
        implementation=m.python.implementation,
        python_exe=f"python{py.split('.')[0]}.{py.split('.')[1]}",
        tool_install="\n".join(tool_install_commands()),
        credentials=block(_md_credentials(creds)),
        missing=block(_md_missing(refs)),
        dirty=block(_md_dirty(refs)),
        no_code=block(_md_no_code(m, with_code)),
        rebuild=rebuild_command(None),
        platform_rows="\n".join(rows),
        stage_commands=_md_stage_commands(m),
        project=block(_md_project(with_project)),
        diagnose="\n".join(diagnose),
        sample="\n".join(_md_sample(m)),
        outputs="\n".join(_md_outputs(m)),
    )


# --- writing ------------------------------------------------------------------------------------


def _iter_out_files(root: Path) -> Iterator[Path]:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            yield p


def write_bundle(
    out: str | Path,
    *,
    manifest: str | Path = "repro.toml",
    include_data: bool = False,
    include_code: bool = True,
    report: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    home: str | Path | None = None,
    allow_dirty: bool = False,
) -> BundleResult:
    """Assemble, scrub, check and write the bundle folder `out`.

    A git checkout with uncommitted code changes is refused unless `allow_dirty` (the bundle then
    records it, and REBUILD.md and verify's code step say so)."""
    manifest_path = manifest_file(manifest)
    m = load_manifest(manifest_path)
    folder = manifest_path.parent
    out_path = Path(out)
    if out_path.exists():
        if not out_path.is_dir():
            raise UsageError(f"{out} exists and is not a folder")
        if any(out_path.iterdir()) and not (out_path / BUNDLE_SUMS).is_file():
            raise UsageError(
                f"{out} exists, is not empty and is not a bundle",
                hint="choose a new folder; an existing bundle (with BUNDLE.sha256) is replaced",
            )
    if out_path.resolve() == folder.resolve() or out_path.resolve() in folder.resolve().parents:
        raise UsageError(f"{out} holds the manifest's folder; choose a new folder for the bundle")

    code_entry = code_reference(m, folder, include_code=include_code, allow_dirty=allow_dirty)
    env = dict(os.environ if environ is None else environ)
    locked = sorted(p.name for p in m.platform if (folder / requirements_filename(p.name)).is_file())
    reqs_text = "".join((folder / requirements_filename(p)).read_text(encoding="utf-8") for p in locked)
    creds = credential_names(m, reqs_text)
    scrub = Scrubber.for_project(
        folder,
        environ=env,
        credential_names=creds,
        extra_paths=[(out_path.absolute(), "<bundle>")],
        home=home,
        mirrors=mirror_urls(
            env,
            [i.url for i in m.packages.index if i.url],
            [setting.value for setting in locker_pip_settings() if "***" not in setting.value],
        ),
    )
    result = BundleResult(out=out_path)
    plan = _Plan()
    if code_entry is not None and code_entry["revision"] and "pinned" not in code_entry:
        pinned = m.code.revision if m.code is not None else None
        if pinned and code_entry["revision"] != pinned:
            result.warnings.append(
                f"the code is at {code_entry['revision'][:12]}, but repro.toml pins {pinned[:12]} and "
                "the commits between change more than Kernodeck's own files: a rebuild from this "
                "bundle fails its code/revision check; check out the pinned revision, or record "
                "this one with `kernodeck capture`, commit, and bundle again"
            )

    def add_text(rel: str, text: str, label: str | None = None) -> None:
        clean = scrub.text(text)
        if clean != text:
            result.scrubbed.append(label or rel)
        plan.files[_rel(rel)] = clean.encode("utf-8")

    def add_verbatim(rel: str, why: str) -> None:
        rel = _rel(rel)
        src = folder / rel
        if not src.is_file():
            raise BundleError(
                f"{why}: {rel} not found next to {manifest_path.name}",
                hint="create it or fix its path in repro.toml",
            )
        if _leaves(folder, rel):
            raise BundleError(
                f"{why}: {rel} is a symlink to a place outside the project; nothing was written",
                hint="copy what the link points to into the project and name that path in repro.toml",
            )
        plan.files[rel] = src.read_bytes()
        plan.verbatim[rel] = why

    if not locked:
        result.warnings.append(
            "no requirements-rebuild-<platform>.txt found: run `kernodeck lock` first, or the bundle cannot be rebuilt"
        )

    # the manifest and the locks
    manifest_text = manifest_path.read_text(encoding="utf-8")
    add_text("repro.toml", manifest_text)
    if "repro.toml" in result.scrubbed:
        result.warnings.append(
            "repro.toml had credentials or host paths replaced; its sha256 in the requirement files no longer matches"
        )
    for name in locked:
        fn = requirements_filename(name)
        text = (folder / fn).read_text(encoding="utf-8")
        add_text(fn, text)
        if fn in result.scrubbed:
            result.warnings.append(
                f"{fn} names a host path or a credential; the rebuild from the bundle may not reach it"
            )
    for p in sorted(folder.glob(f"{PYLOCK_PREFIX}*.toml")):
        add_text(p.name, p.read_text(encoding="utf-8"))

    # the observed inventory and the last report
    inv = folder / INVENTORY_FILE
    if inv.is_file():
        add_text(f"{OBSERVED_DIR}/{INVENTORY_FILE}", inv.read_text(encoding="utf-8"))
    else:
        result.warnings.append(
            f"no {INVENTORY_FILE} beside the manifest (run `kernodeck rebuild` to observe one)"
        )
    report_path = find_report(folder, report)
    loaded: Report | None = None
    if report_path is not None:
        try:
            loaded = Report.from_json(report_path.read_text(encoding="utf-8"))
        except (ValueError, TypeError) as e:
            raise UsageError(f"{report_path} is not a kernodeck report: {str(e).splitlines()[0]}") from None
        clean = Report.model_validate(scrub.data(loaded.model_dump(mode="json", by_alias=True)))
        if clean != loaded:
            result.scrubbed.append(f"{OBSERVED_DIR}/{REPORT_JSON}")
        plan.files[f"{OBSERVED_DIR}/{REPORT_JSON}"] = clean.to_json().encode("utf-8")
        plan.files[f"{OBSERVED_DIR}/{REPORT_MD}"] = scrub.text(report_markdown(clean)).encode("utf-8")
        from kernodeck.render.html import html_report

        page = html_report(clean, charts_optional=True)  # the charts need the `report` extra
        plan.files[f"{OBSERVED_DIR}/{REPORT_HTML}"] = scrub.text(page).encode("utf-8")
        result.report_included = True
        loaded = clean
        if any(s.status is Status.FAILED and s.required for s in clean.steps):
            result.warnings.append("the included verify report has failures: " + clean.summary())
    else:
        result.warnings.append(
            "no verify report included (pass --report FILE from `kernodeck verify --json FILE`)"
        )

    # configuration, control results, data
    if m.code is not None:
        for cfg in m.code.config:
            add_verbatim(cfg.path, "config file")
    for rel, why in _reference_paths(m):
        add_verbatim(rel, why)
    data_like = _data_paths(m)
    if include_data:
        for rel, why in data_like:
            add_verbatim(rel, why)
    data_set = {_rel(p) for p, _ in data_like}

    # code
    if include_code:
        reports = {*REPORT_CANDIDATES, "rebuild-report.json", "check-report.json"}
        if report_path is not None and report_path.resolve().parent == folder.resolve():
            reports.add(report_path.name)
        names, warns = code_files(folder, exclude=data_set | set(plan.files) | reports)
        result.warnings.extend(warns)
        for name in names:
            add_verbatim(name, "code")

    included = {rel for rel in plan.files}
    refs = references(m, included)
    if code_entry is not None:
        code_entry["files"] = len([r for r, why in plan.verbatim.items() if why == "code"])
        refs.insert(0, code_entry)
    plan.files[f"{TOOL_DIR}/{selfwheel.wheel_filename()}"] = selfwheel.wheel_bytes()
    add_text(
        TOOL_REQUIREMENTS,
        f"# Kernodeck {selfwheel.version()}'s own dependencies, as installed where this bundle was written\n"
        + "".join(f"{pin}\n" for pin in selfwheel.dependency_pins()),
    )
    add_text(REFERENCES, json.dumps(refs, indent=2, sort_keys=True) + "\n")
    add_text(
        REBUILD_MD,
        rebuild_markdown(
            m,
            platforms=locked,
            refs=refs,
            creds=creds,
            report=loaded,
            with_code=include_code,
            with_project=include_code and installs_project(m, manifest_path),
        ),
    )

    # nothing leaves the machine that reveals a secret or a host path
    problems = []
    for rel, data in sorted(plan.files.items()):
        found = scrub.leaks(data, generated=rel not in plan.verbatim)
        if found:
            why = plan.verbatim.get(rel, "generated file")
            problems.append(f"{rel} ({why}): {', '.join(found)}")
    if problems:
        raise BundleError(
            "the bundle would reveal secrets or paths of this machine; nothing was written",
            context=problems,
            hint="move secrets into environment variables named in repro.toml, and use paths relative to the project",
        )

    plan.files[BUNDLE_SUMS] = bundlesums.render(plan.files).encode("utf-8")
    _write_folder(out_path, plan.files)
    result.files = sorted(plan.files)
    return result


def _write_folder(out: Path, files: dict[str, bytes]) -> None:
    """Write every file into a sibling temporary folder, then swap it into place."""
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        for rel, data in files.items():
            atomic_write_bytes(tmp / rel, data)
        if out.exists():
            old = out.with_name(f".{out.name}.{os.getpid()}.old")
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def verify_bundle(out: str | Path) -> list[str]:
    """Problems with a bundle's BUNDLE.sha256 (empty when every listed file matches)."""
    if not bundlesums.is_bundle(Path(out)):
        return [f"no {BUNDLE_SUMS}"]
    return bundlesums.check(Path(out))[1]
