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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from kernodeck.errors import KernodeckError, UsageError
from kernodeck.gitstate import git_state, later_commits_touch_only_kernodeck_files
from kernodeck.handover import checkfiles, secretscan, selfwheel
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
from kernodeck.lockfile.names import (
    PYLOCK_PREFIX,
    REQUIREMENTS_PREFIX,
    is_edit_lock,
    manifest_file,
    pylock_filename,
    requirements_filename,
)
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
REFERENCES = bundlesums.REFERENCES
REBUILD_MD = bundlesums.REBUILD_MD

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
    #: The key file that signed BUNDLE.sha256 (its name), when --sign was given.
    signed_with: str | None = None

    def render(self) -> str:
        lines = [f"wrote {self.out} ({len(self.files)} files; check with `sha256sum -c {BUNDLE_SUMS}`)"]
        if self.signed_with:
            lines.append(f"signed {BUNDLE_SUMS} with {self.signed_with} ({bundlesums.SIGNATURE})")
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
        if _not_code(folder, name, exclude):
            continue
        why = _left_out(folder, name)
        if why is not None:
            warnings.append(why)
            continue
        keep.append(name)
    return keep, warnings


def _not_code(folder: Path, name: str, exclude: set[str]) -> bool:
    """Whether `name` is no code of the project: a venv, a cache, Kernodeck's own files (manifest,
    locks, inventory, sums, the edit lock), what another part of the bundle carries, another bundle."""
    parts = PurePosixPath(name).parts
    base = parts[-1]
    if any(p in _SKIP_DIRS or p.startswith(".venv") for p in parts[:-1]):
        return True
    if name in exclude or name.endswith(_SKIP_SUFFIXES) or (base == "repro.toml" and len(parts) == 1):
        return True
    if base.startswith((REQUIREMENTS_PREFIX, PYLOCK_PREFIX)) or base in (INVENTORY_FILE, BUNDLE_SUMS):
        return True
    if is_edit_lock(base):  # capture's edit lock: Kernodeck's own, never code
        return True
    return any(
        (folder / PurePosixPath(*parts[:i]) / marker).exists()
        for i in range(1, len(parts))
        for marker in ("pyvenv.cfg", BUNDLE_SUMS)
    )


def _left_out(folder: Path, name: str) -> str | None:
    """Why a code file is left out of the bundle (a warning): credentials, or too large."""
    base = PurePosixPath(name).name
    if base in CREDENTIAL_FILES or (
        base.startswith(".env.") and base not in (".env.example", ".env.sample", ".env.template")
    ):
        return (
            f"{name} was left out of the code: such files hold credentials or the author's installer"
            " settings; REBUILD.md names the variables to set instead"
        )
    size = (folder / name).stat().st_size
    if size > _MAX_CODE_FILE:
        return f"{name} ({size // (1 << 20)} MiB) was left out of the code; large files belong in [[data]]"
    return None


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
TOOL_PYTHON = ".kernodeck/bin/python"


def tool_install_commands() -> list[str]:
    """The commands that install the bundled Kernodeck into `.kernodeck` (nothing from outside
    the folder but its dependencies, at the versions that wrote the bundle)."""
    return [
        "python3 -m venv .kernodeck",
        "PIP_CONFIG_FILE=/dev/null .kernodeck/bin/python -m pip install --isolated --require-hashes --no-deps"
        f" -r {TOOL_REQUIREMENTS}",
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
                lines.append(  # Kernodeck's venv has NumPy (the `checks` extra); the project may not
                    f"{TOOL_PYTHON} -c \"import numpy as np; a = np.load('{where}'); "
                    'print(a.shape, a.dtype, bool(np.isfinite(a).all()))"'
                )
            elif o.path.endswith(".json"):
                lines.append(f"{MD_PYTHON} -m json.tool {where}")
            else:
                lines.append(f"ls -l {where}")
    lines.append("```")
    return lines


def _md_check_sums(signed: bool) -> str:
    """The commands of step 0 that check the folder (and its signature, when signed)."""
    from kernodeck.handover.signing import NAMESPACE

    lines = [f"sha256sum -c {BUNDLE_SUMS}"]
    if signed:
        lines.append(
            f"ssh-keygen -Y verify -f ~/.ssh/allowed_signers -I SIGNER -n {NAMESPACE}"
            f" -s {bundlesums.SIGNATURE} < {BUNDLE_SUMS}   # signed: who wrote it (see docs/trust.md)"
        )
    return "\n".join(lines)


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
    signed: bool = False,
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
    from kernodeck.determinism import env_prefix

    # started as the manifest's [determinism] env says (verify checks those variables)
    diagnose = [f"{env_prefix(m.determinism)}{TOOL} verify . --python {MD_PYTHON} --json verify-report.json"]
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
        check_sums=_md_check_sums(signed),
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


@dataclass(frozen=True)
class BundleOptions:
    """What the caller asked of a bundle (the command line's options)."""

    include_data: bool = False
    include_code: bool = True
    report: str | Path | None = None
    allow_dirty: bool = False
    #: The platforms to bundle (empty: every declared platform).
    platforms: tuple[str, ...] = ()
    allow_stale: bool = False
    #: The SSH key that signs BUNDLE.sha256 (None: unsigned).
    sign: Path | None = None


@dataclass
class _Bundling:
    """What the stages of one bundle share: the inputs, the scrubber, the files planned so far and
    the result. Stages write only here; a refusal raises before anything is written."""

    out: Path
    manifest_path: Path
    manifest: Manifest
    options: BundleOptions
    env: dict[str, str]
    home: str | Path | None
    result: BundleResult
    plan: _Plan = field(default_factory=_Plan)
    scrub: Scrubber = field(default_factory=Scrubber)
    locked: list[str] = field(default_factory=list)
    creds: list[str] = field(default_factory=list)
    code_entry: dict[str, Any] | None = None
    report_path: Path | None = None
    loaded: Report | None = None
    refs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.manifest_path.parent

    def add_text(self, rel: str, text: str, label: str | None = None) -> None:
        clean = self.scrub.text(text)
        if clean != text:
            self.result.scrubbed.append(label or rel)
        self.plan.files[_rel(rel)] = clean.encode("utf-8")

    def add_verbatim(self, rel: str, why: str) -> None:
        rel = _rel(rel)
        src = self.folder / rel
        if not src.is_file():
            raise BundleError(
                f"{why}: {rel} not found next to {self.manifest_path.name}",
                hint="create it or fix its path in repro.toml",
            )
        if _leaves(self.folder, rel):
            raise BundleError(
                f"{why}: {rel} is a symlink to a place outside the project; nothing was written",
                hint="copy what the link points to into the project and name that path in repro.toml",
            )
        self.plan.files[rel] = src.read_bytes()
        self.plan.verbatim[rel] = why


def _stage_target(b: _Bundling) -> None:
    """OUT is a new folder, an empty one or an earlier bundle, and not the project's own."""
    out, folder = b.out, b.folder
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"{out} exists and is not a folder")
        if any(out.iterdir()) and not (out / BUNDLE_SUMS).is_file():
            raise UsageError(
                f"{out} exists, is not empty and is not a bundle",
                hint="choose a new folder; an existing bundle (with BUNDLE.sha256) is replaced",
            )
    if out.resolve() == folder.resolve() or out.resolve() in folder.resolve().parents:
        raise UsageError(f"{out} holds the manifest's folder; choose a new folder for the bundle")


def _stage_code_reference(b: _Bundling) -> None:
    """The revision the code is at (a dirty tree refused unless allowed), and a warning when it is
    not the pinned one."""
    m = b.manifest
    b.code_entry = entry = code_reference(
        m, b.folder, include_code=b.options.include_code, allow_dirty=b.options.allow_dirty
    )
    if entry is None or not entry["revision"] or "pinned" in entry:
        return
    pinned = m.code.revision if m.code is not None else None
    if pinned and entry["revision"] != pinned:
        b.result.warnings.append(
            f"the code is at {entry['revision'][:12]}, but repro.toml pins {pinned[:12]} and "
            "the commits between change more than Kernodeck's own files: a rebuild from this "
            "bundle fails its code/revision check; check out the pinned revision, or record "
            "this one with `kernodeck capture`, commit, and bundle again"
        )


def _stage_locks(b: _Bundling) -> None:
    """The platforms to bundle (every declared one unless --platform narrows them), each with a
    lock file the shared rule accepts (`kernodeck.lock.freshness`); refused otherwise."""
    from kernodeck.lock.freshness import LockNotUsable, lock_verdict, pylock_verdict

    declared = [p.name for p in b.manifest.platform]
    unknown = [p for p in b.options.platforms if p not in declared]
    if unknown:
        raise UsageError(
            f"--platform {', '.join(unknown)}: not declared in {b.manifest_path.name}",
            hint=f"declared platforms: {', '.join(declared)}",
        )
    chosen = sorted(b.options.platforms or declared)
    verdicts = [lock_verdict(b.manifest_path, name, b.manifest) for name in chosen]
    verdicts += [v for v in (pylock_verdict(b.manifest_path, name) for name in chosen) if v is not None]
    refused = [v for v in verdicts if not v.ok and not (b.options.allow_stale and v.only_stale)]
    if refused:
        narrow = (
            ""
            if b.options.platforms
            else "pass --platform to bundle only the platforms whose lock is current"
        )
        raise LockNotUsable(refused, narrowing=narrow)
    for v in verdicts:
        if not v.ok:
            b.result.warnings.append(
                f"{v.describe()} (bundled anyway: --allow-stale; `{v.fix}` locks it again)"
            )
    b.locked = chosen


def _stage_scrubber(b: _Bundling) -> None:
    """What must not leave the machine: credentials, the author's paths and mirrors."""
    m, folder = b.manifest, b.folder
    reqs_text = "".join((folder / requirements_filename(p)).read_text(encoding="utf-8") for p in b.locked)
    b.creds = credential_names(m, reqs_text)
    b.scrub = Scrubber.for_project(
        folder,
        environ=b.env,
        credential_names=b.creds,
        extra_paths=[(b.out.absolute(), "<bundle>")],
        home=b.home,
        mirrors=mirror_urls(
            b.env,
            [i.url for i in m.packages.index if i.url],
            [setting.value for setting in locker_pip_settings() if "***" not in setting.value],
        ),
    )


def _stage_manifest_and_locks(b: _Bundling) -> None:
    """The manifest, every bundled platform's lock and pylock file, and the files the lock inputs
    read (`[packages] from`): what rebuild checks the lock against."""
    folder = b.folder
    b.add_text("repro.toml", b.manifest_path.read_text(encoding="utf-8"))
    if "repro.toml" in b.result.scrubbed:
        b.result.warnings.append(
            "repro.toml had credentials or host paths replaced; its lock inputs in the requirement files"
            " may no longer match (a rebuild from the bundle then refuses the lock)"
        )
    for name in b.locked:
        fn = requirements_filename(name)
        b.add_text(fn, (folder / fn).read_text(encoding="utf-8"))
        if fn in b.result.scrubbed:
            b.result.warnings.append(
                f"{fn} names a host path or a credential; the rebuild from the bundle may not reach it"
            )
        pylock = folder / pylock_filename(name)
        if pylock.is_file():
            b.add_text(pylock.name, pylock.read_text(encoding="utf-8"))
    for rel in _lock_input_files(b.manifest, b.manifest_path):
        b.add_verbatim(rel, "lock input ([packages] from)")


def _lock_input_files(m: Manifest, manifest_path: Path) -> list[str]:
    """The files `[packages] from` reads (relative to the manifest's folder)."""
    from kernodeck.manifest.sources import input_files

    return input_files(m, manifest_path)


def _stage_observed(b: _Bundling) -> None:
    """The author's observed inventory."""
    inv = b.folder / INVENTORY_FILE
    if inv.is_file():
        b.add_text(f"{OBSERVED_DIR}/{INVENTORY_FILE}", inv.read_text(encoding="utf-8"))
    else:
        b.result.warnings.append(
            f"no {INVENTORY_FILE} beside the manifest (run `kernodeck rebuild` to observe one)"
        )


def _stage_report(b: _Bundling) -> None:
    """The last verify report, scrubbed, as JSON, Markdown and HTML."""
    b.report_path = report_path = find_report(b.folder, b.options.report)
    if report_path is None:
        b.result.warnings.append(
            "no verify report included (pass --report FILE from `kernodeck verify --json FILE`)"
        )
        return
    try:
        loaded = Report.from_json(report_path.read_text(encoding="utf-8"))
    except (ValueError, TypeError) as e:
        raise UsageError(f"{report_path} is not a kernodeck report: {str(e).splitlines()[0]}") from None
    clean = Report.model_validate(b.scrub.data(loaded.model_dump(mode="json", by_alias=True)))
    if clean != loaded:
        b.result.scrubbed.append(f"{OBSERVED_DIR}/{REPORT_JSON}")
    files = b.plan.files
    files[f"{OBSERVED_DIR}/{REPORT_JSON}"] = clean.to_json().encode("utf-8")
    files[f"{OBSERVED_DIR}/{REPORT_MD}"] = b.scrub.text(report_markdown(clean)).encode("utf-8")
    from kernodeck.render.html import html_report

    page = html_report(clean, charts_optional=True)  # the charts need the `report` extra
    files[f"{OBSERVED_DIR}/{REPORT_HTML}"] = b.scrub.text(page).encode("utf-8")
    b.result.report_included = True
    b.loaded = clean
    if any(s.status is Status.FAILED and s.required for s in clean.steps):
        b.result.warnings.append("the included verify report has failures: " + clean.summary())


def _stage_config_and_data(b: _Bundling) -> None:
    """Configuration files, control results, and (--include-data) data, weights, checkpoint."""
    m = b.manifest
    if m.code is not None:
        for cfg in m.code.config:
            b.add_verbatim(cfg.path, "config file")
    for rel, why in _reference_paths(m):
        b.add_verbatim(rel, why)
    if b.options.include_data:
        for rel, why in _data_paths(m):
            b.add_verbatim(rel, why)


def _stage_code(b: _Bundling) -> None:
    """The sources beside the manifest (unless --no-code)."""
    if not b.options.include_code:
        return
    reports = {*REPORT_CANDIDATES, "rebuild-report.json", "check-report.json"}
    if b.report_path is not None and b.report_path.resolve().parent == b.folder.resolve():
        reports.add(b.report_path.name)
    data_set = {_rel(p) for p, _ in _data_paths(b.manifest)}
    names, warns = code_files(b.folder, exclude=data_set | set(b.plan.files) | reports)
    b.result.warnings.extend(warns)
    for name in names:
        b.add_verbatim(name, "code")


def _stage_check_files(b: _Bundling) -> None:
    """A warning for each file a `[[check]]` runs that the receiver will not have as it is here."""
    carried = set(b.plan.files) if b.options.include_code else None
    b.result.warnings.extend(checkfiles.warnings(b.manifest, b.folder, carried=carried))


def _stage_references(b: _Bundling) -> None:
    """references.json, Kernodeck's own wheel and the pins of its dependencies."""
    b.refs = references(b.manifest, set(b.plan.files))
    if b.code_entry is not None:
        b.code_entry["files"] = len([r for r, why in b.plan.verbatim.items() if why == "code"])
        b.refs.insert(0, b.code_entry)
    lock_texts = [(b.folder / requirements_filename(p)).read_text(encoding="utf-8") for p in b.locked]
    tool = selfwheel.tool_files(b.manifest, TOOL_DIR, lock_texts=["".join(lock_texts)])
    b.plan.files.update(tool.files)
    b.add_text(TOOL_REQUIREMENTS, tool.requirements)
    b.result.warnings.extend(tool.warnings)
    b.add_text(REFERENCES, json.dumps(b.refs, indent=2, sort_keys=True) + "\n")


def _stage_rebuild_md(b: _Bundling) -> None:
    """REBUILD.md: the commands in order, for exactly the bundled platforms."""
    include_code = b.options.include_code
    b.add_text(
        REBUILD_MD,
        rebuild_markdown(
            b.manifest,
            platforms=b.locked,
            refs=b.refs,
            creds=b.creds,
            report=b.loaded,
            with_code=include_code,
            with_project=include_code and installs_project(b.manifest, b.manifest_path),
            signed=b.options.sign is not None,
        ),
    )


def _stage_leaks(b: _Bundling) -> None:
    """Nothing leaves the machine that reveals a secret or a host path."""
    scan = secretscan.scan_files(b.scrub, b.plan.files, b.plan.verbatim, secretscan.Allowlist.read(b.folder))
    b.result.warnings.extend(secretscan.accepted_note(scan))
    if scan.refused:
        raise BundleError(
            "the bundle would reveal secrets or paths of this machine; nothing was written",
            context=secretscan.problems(scan, b.plan.verbatim),
            hint="move secrets into environment variables named in repro.toml, and use paths relative to the "
            f"project; a finding that is no secret: add `{secretscan.ALLOW_MARKER}` to its line, or its "
            f"`to accept:` text to {secretscan.ALLOWLIST_FILE}",
        )


def _stage_sums(b: _Bundling) -> None:
    """BUNDLE.sha256 over every planned file, and its signature with --sign."""
    sums = bundlesums.render(b.plan.files).encode("utf-8")
    b.plan.files[BUNDLE_SUMS] = sums
    if b.options.sign is not None:
        from kernodeck.handover import signing

        b.plan.files[bundlesums.SIGNATURE] = signing.sign(sums, b.options.sign)
        b.result.signed_with = b.options.sign.name


def _stage_write(b: _Bundling) -> None:
    _write_folder(b.out, b.plan.files)
    b.result.files = sorted(b.plan.files)


#: The bundle's procedure, in order: each stage adds files to the plan or refuses (raises) before
#: anything is written; only the last one writes.
BUNDLE_STAGES: tuple[tuple[str, Callable[[_Bundling], None]], ...] = (
    ("target", _stage_target),
    ("code-reference", _stage_code_reference),
    ("locks", _stage_locks),
    ("scrubber", _stage_scrubber),
    ("manifest-and-locks", _stage_manifest_and_locks),
    ("observed", _stage_observed),
    ("report", _stage_report),
    ("config-and-data", _stage_config_and_data),
    ("code", _stage_code),
    ("check-files", _stage_check_files),
    ("references", _stage_references),
    ("rebuild-md", _stage_rebuild_md),
    ("leaks", _stage_leaks),
    ("sums", _stage_sums),
    ("write", _stage_write),
)


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
    platforms: Iterable[str] = (),
    allow_stale: bool = False,
    sign: str | Path | None = None,
) -> BundleResult:
    """Assemble, scrub, check and write the bundle folder `out` (`BUNDLE_STAGES`, in order).

    A git checkout with uncommitted code changes is refused unless `allow_dirty` (the bundle then
    records it, and REBUILD.md and verify's code step say so). Every declared platform (or those
    of `platforms`) needs a lock file the shared rule accepts (`kernodeck.lock.freshness`);
    `allow_stale` bundles stale ones with a warning. `sign`: an SSH key that signs BUNDLE.sha256."""
    manifest_path = manifest_file(manifest).absolute()
    options = BundleOptions(
        include_data=include_data,
        include_code=include_code,
        report=report,
        allow_dirty=allow_dirty,
        platforms=tuple(platforms),
        allow_stale=allow_stale,
        sign=Path(sign).expanduser().absolute() if sign is not None else None,
    )
    out_path = Path(out).absolute()
    state = _Bundling(
        out=out_path,
        manifest_path=manifest_path,
        manifest=load_manifest(manifest_path),
        options=options,
        env=dict(os.environ if environ is None else environ),
        home=home,
        result=BundleResult(out=Path(out)),
    )
    for _name, stage in BUNDLE_STAGES:
        stage(state)
    return state.result


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
    """Problems with a bundle folder (`kernodeck.handover.sums.audit`; empty when every file is
    listed in BUNDLE.sha256 and matches)."""
    return bundlesums.audit(Path(out)).problems
