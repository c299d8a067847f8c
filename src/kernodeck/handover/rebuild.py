"""`kernodeck rebuild`: recreate the environment in a clean folder and re-run the whole sequence.

The procedure, each stage a Step (layer "rebuild") in one Report, each later stage depending on
the earlier ones (a failure keeps its first error and the stages that depend on it are skipped,
saying why):

1. `bundle`       a bundle's BUNDLE.sha256 lists every file in it and each still matches, and its
                  signature is good when allowed signers are given (only when rebuilding from a
                  bundle: a folder holding BUNDLE.sha256, REBUILD.md or references.json);
   `lock`         the lock file may be used (`kernodeck.lock.freshness`): its lock inputs equal
                  the manifest's now and every package location it names is declared
                  (`--allow-stale`: stale lock inputs are a warning instead);
2. `interpreter`  the chosen Python (found by version on PATH, or given as a path) satisfies
                  `[python]`, checked before anything is created or installed;
3. `venv`         a fresh virtual environment at `--dest`;
4. `pip-version`  `<dest>/bin/python -m pip --version` (the environment's own interpreter, called
                  explicitly: never activation);
5. `install`      the platform's requirements file with `--require-hashes --no-deps` (and
                  `--only-binary :all:` unless the manifest allows sdists), in an isolated pip run
                  (`--isolated`, `PIP_CONFIG_FILE=os.devnull`, an environment reduced to the
                  basics, the machine's network settings and the variables the manifest names:
                  `kernodeck.handover.installer_env`), or `uv pip install` with the same strictness;
   `project`      when `[packages] from` names the project's pyproject.toml, or a requirements
                  file it reads installs the project (`-e .`): the project itself, editable
                  from its folder, without dependencies (as `uv sync` installs it); a project
                  that cannot be installed so is a warning, not a failure;
6. `contract`     `pip check`;
7. `inventory`    `pip freeze --all` written to installed-after.txt, marked as an observation;
8. `verify`       verify against `<dest>/bin/python`, application checks included; its steps
                  are appended.

The procedure is the table `STAGES` (name, the function that runs it, the later stages it skips
when it fails and why); `run_rebuild` runs it in order and adds every stage's steps to the report.
The exit code comes from the steps' typed status (`Report.exit_code`), never from a step's name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kernodeck.errors import KernodeckError, UsageError
from kernodeck.handover import sums as bundlesums
from kernodeck.handover.installer_env import (
    Installer,
    InstallerEnvironment,
    explicit_routes,
    installer_environment,
    mirrored_requirements,
    split_routed,
)
from kernodeck.handover.installer_errors import InstallerCause, backend_error, first_error, installer_cause
from kernodeck.lockfile.names import INVENTORY_NAME, REQUIREMENTS_PREFIX, manifest_file, requirements_filename
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.schema import Manifest, Platform
from kernodeck.platforms import (
    PlatformChoice,
    PlatformFacts,
    choose,
    host_facts,
    norm_arch,
    os_of_sys_platform,
)
from kernodeck.report import Report, Status, Step
from kernodeck.support import envvars
from kernodeck.support.conflicts import conflict_regions
from kernodeck.support.fsio import atomic_write_text, nearest_existing
from kernodeck.support.urls import redact

LAYER = "rebuild"
BUNDLE_SUMS = bundlesums.NAME
INVENTORY_FILE = INVENTORY_NAME
INVENTORY_HEADER = (
    "# Observed inventory: `pip freeze --all` of the rebuilt environment after `kernodeck rebuild`{context}.\n"
    "# This is what was installed, NOT a lock: rebuild from {requirements} instead.\n"
)

Log = Callable[[str], None]

_VERSION_ARG = re.compile(r"^\d+(\.\d+){0,2}$")
_ENV_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STAGE_TIMEOUT = 3600.0


#: Why rebuild's verify step looks at the interpreter it does (the report's first line).
REBUILT_REASON = "the rebuilt environment"


class VerifyFn(Protocol):
    def __call__(
        self,
        path: Path,
        *,
        python: str | None = ...,
        platform: str | None = ...,
        compute: bool = ...,
        skip: tuple[str, ...] = ...,
    ) -> Report: ...


# --- helpers -----------------------------------------------------------------------------------


def venv_python(dest: Path) -> Path:
    """The interpreter of a virtual environment: bin/python, or Scripts\\python.exe on Windows."""
    if os.name == "nt":
        return dest / "Scripts" / "python.exe"
    return dest / "bin" / "python"


@dataclass(frozen=True)
class Interpreter:
    path: str
    version: str  # "3.11.7"
    implementation: str  # "cpython"
    os: str  # "linux" | "macos" | "windows"
    arch: str


_INTERPRETER_SCRIPT = (
    "import json, platform, sys; print(json.dumps({'version': platform.python_version(), "
    "'implementation': sys.implementation.name, 'platform': sys.platform, 'machine': platform.machine()}))"
)


def describe_interpreter(path: str) -> Interpreter | str:
    """What an interpreter is, or why it could not be asked."""
    try:
        proc = subprocess.run(
            [path, "-I", "-c", _INTERPRETER_SCRIPT], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    except subprocess.TimeoutExpired:
        return f"{path}: did not answer within 60 s"
    if proc.returncode != 0:
        return f"{path}: exited {proc.returncode}: {_first_line(proc.stderr)}"
    try:
        raw = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"{path}: unexpected output {proc.stdout.strip()[:80]!r}"
    return Interpreter(
        path=path,
        version=str(raw["version"]),
        implementation=str(raw["implementation"]),
        os=os_of_sys_platform(str(raw["platform"])),
        arch=norm_arch(str(raw["machine"])),
    )


def _same_arch(declared: str, observed: str) -> bool:
    return norm_arch(declared) == norm_arch(observed)


def version_matches(required: str, actual: str) -> bool:
    """`3.11` matches any 3.11.x; `3.11.7` only 3.11.7."""
    want = required.split(".")
    return actual.split(".")[: len(want)] == want


def _path_dirs(environ: Mapping[str, str]) -> list[str]:
    return [d for d in environ.get("PATH", "").split(os.pathsep) if d]


def find_interpreters(version: str, environ: Mapping[str, str]) -> Iterator[str]:
    """Candidate interpreters for a version on PATH, most specific name first:
    python3.11, then python3, then python (every match on PATH, in PATH order)."""
    parts = version.split(".")
    names = []
    if len(parts) >= 2:
        names.append(f"python{parts[0]}.{parts[1]}")
    names += [f"python{parts[0]}", "python"]
    exts = [".exe", ""] if os.name == "nt" else [""]
    seen: set[str] = set()
    for name in names:
        for d in _path_dirs(environ):
            for ext in exts:
                cand = Path(d) / f"{name}{ext}"
                if cand.is_file() and os.access(cand, os.X_OK):
                    key = str(cand)
                    if key not in seen:
                        seen.add(key)
                        yield key


def find_uv(environ: Mapping[str, str]) -> str | None:
    """The uv next to this interpreter (installed with kernodeck), else the one on PATH."""
    name = "uv.exe" if os.name == "nt" else "uv"
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which("uv", path=environ.get("PATH"))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


@dataclass
class _Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr


def _run(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None = None,
    timeout: float = _STAGE_TIMEOUT,
    on_line: Log | None = None,
) -> _Run:
    """Run a command to its end (or `timeout`); with `on_line`, stdout and stderr are read together,
    line by line as the command prints them, and each line is handed to `on_line`."""
    if on_line is not None:
        return _run_streaming(argv, env, cwd, timeout, on_line)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            list(argv),
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as e:
        return _Run(127, "", f"error: {argv[0]}: {e.strerror}", time.monotonic() - t0)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else ""
        err = e.stderr if isinstance(e.stderr, str) else ""
        return _Run(124, out, err + f"\nerror: timed out after {timeout:.0f} s", time.monotonic() - t0)
    return _Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def _run_streaming(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None, timeout: float, on_line: Log
) -> _Run:
    import threading

    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            bufsize=1,
        )
    except FileNotFoundError as e:
        return _Run(127, "", f"error: {argv[0]}: {e.strerror}", time.monotonic() - t0)
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            with contextlib.suppress(Exception):  # a broken display must not break the install
                on_line(line.rstrip("\r\n"))

    reader = threading.Thread(target=pump, name="installer-output", daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join(timeout=5)
        return _Run(124, "".join(lines), f"error: timed out after {timeout:.0f} s", time.monotonic() - t0)
    reader.join(timeout=30)
    return _Run(code, "".join(lines), "", time.monotonic() - t0)


_PROGRESS_URL = re.compile(r"\b(?:https?|file)://\S+")
_PROGRESS_FILE_URL = re.compile(r"\.(whl|tar\.gz|zip|tar\.bz2|metadata)(#\S*)?$")
_PROGRESS_PATH = re.compile(r"(?<![\w:/.])(?:/[^\s/()'\"]+)+/([^\s/()'\"]+)")


def progress_line(installer: str, line: str) -> str | None:
    """One line of installer output as a progress line ("pip: Downloading alpha-1.0-py3-none-any.whl
    (1.2 kB)"): artifact URLs and absolute paths shortened to their file name, credentials never
    shown; None for a blank line."""
    text = line.strip()
    if not text:
        return None

    def short(m: re.Match[str]) -> str:
        url = m.group(0).rstrip("):,")
        rest = m.group(0)[len(url) :]
        if _PROGRESS_FILE_URL.search(url):
            return url.rsplit("/", 1)[-1].split("#", 1)[0] + rest
        return redact(url) + rest

    text = _PROGRESS_PATH.sub(lambda m: m.group(1), _PROGRESS_URL.sub(short, text))
    text = redact(text)
    return f"{installer}: {text if len(text) <= 160 else text[:157] + '...'}"


def _tail(text: str, n: int = 20) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()][-n:]


# --- choosing inputs ---------------------------------------------------------------------------


@dataclass
class RebuildPlan:
    manifest_path: Path
    manifest: Manifest
    platform: Platform
    requirements: Path
    dest: Path
    dest_display: str
    installer: Installer
    python_request: str | None
    bundle_sums: Path | None
    force: bool = False
    credential_names: list[str] = field(default_factory=list)
    #: Why this platform, when --platform was not given ("" when it was).
    platform_reason: str = ""
    #: The manifest as the user named it (reports carry no absolute host path).
    manifest_display: str = ""
    #: Use a lock whose lock inputs differ from the manifest's (reported as a warning).
    allow_stale: bool = False
    #: The allowed signers file a bundle's signature is checked against (None: not checked).
    allowed_signers: Path | None = None
    #: --mirror / KERNODECK_MIRRORS: (URL as the lock writes it, mirror URL) pairs for the install.
    mirrors: list[tuple[str, str]] = field(default_factory=list)


def locate_manifest(source: str | Path) -> Path:
    p = manifest_file(source)
    if not p.is_file():
        raise UsageError(
            f"no manifest at {p}",
            hint="pass a repro.toml, or a bundle folder written by `kernodeck bundle`",
        )
    return p


def choose_platform(
    manifest: Manifest, folder: Path, name: str | None, facts: PlatformFacts | None = None
) -> PlatformChoice:
    """The platform to rebuild, with the reason: the one named, else the only locked one that fits
    this host (`platforms.choose` with the host's facts: os, arch and, among several, the device
    kinds it has, GPU first). `facts`: this host's, found with `platforms.host_facts` when None."""
    locked: list[Platform] = []
    if name is None:
        locked = [p for p in manifest.platform if (folder / requirements_filename(p.name)).is_file()]
        if not locked:
            raise UsageError(
                f"no {REQUIREMENTS_PREFIX}<platform>.txt next to {folder / 'repro.toml'}",
                hint="run `kernodeck lock` first (or rebuild from a bundle, which carries them)",
            )
    return choose(
        locked,
        facts if facts is not None or name is not None else host_facts(),
        name,
        known=manifest.platform,
        among="locked",
    )


def credential_names(manifest: Manifest, requirements_text: str = "") -> list[str]:
    """Variables the manifest names as credentials: `${VAR}` in index URLs (and in the requirements
    file), and the `access` lists of data and weights. Names only; the values stay in the environment."""
    names: list[str] = []
    for ix in manifest.packages.index:
        names += _ENV_PLACEHOLDER.findall(ix.url or "")
    if manifest.packages.pytorch_index:
        names += _ENV_PLACEHOLDER.findall(manifest.packages.pytorch_index)
    names += _ENV_PLACEHOLDER.findall(requirements_text)
    for d in manifest.data:
        names += d.access
    for w in manifest.weights:
        names += w.access
    return sorted(set(names))


def _safe_to_delete(dest: Path, manifest_path: Path) -> str | None:
    """Why --force must not delete `dest`, or None."""
    d = dest.resolve()
    protected = [Path.cwd().resolve(), Path.home().resolve(), manifest_path.parent.resolve()]
    if d == Path(d.anchor):
        return "it is the root of the file system"
    for p in protected:
        if d == p or d in p.parents:
            return f"it holds {p}"
    return None


def plan_rebuild(
    source: str | Path = "repro.toml",
    *,
    dest: str | Path = ".venv-rebuild",
    python: str | None = None,
    platform: str | None = None,
    installer: Installer = "pip",
    force: bool = False,
    environ: Mapping[str, str] | None = None,
    allow_stale: bool = False,
    allowed_signers: str | Path | None = None,
    mirrors: Sequence[str] | None = None,
) -> RebuildPlan:
    """Check the inputs (usage errors, exit 2) before anything runs (`environ`: where uv and
    KERNODECK_ALLOWED_SIGNERS are looked up, default this process's environment; `mirrors`: `NAME=URL`
    items with lock's meaning, default $KERNODECK_MIRRORS). `source` and `dest` are taken relative to
    the current folder, once, here."""
    from kernodeck.handover.signing import allowed_signers_file

    if installer not in ("pip", "uv"):
        raise UsageError(f"unknown installer {installer!r}", hint="use pip or uv")
    if installer == "uv" and find_uv(os.environ if environ is None else environ) is None:
        raise UsageError(
            f"--installer uv: no uv next to {sys.executable} or on PATH",
            hint="install uv (`pip install uv`, or uv's standalone installer) and put it on PATH, "
            "or rebuild with --installer pip",
        )
    shown = locate_manifest(source)
    manifest_path = shown.absolute()
    manifest = load_manifest(manifest_path)
    folder = manifest_path.parent
    signers = allowed_signers_file(allowed_signers, environ)
    choice = choose_platform(manifest, folder, platform)
    plat = choice.platform
    reqs = folder / requirements_filename(plat.name)
    if not reqs.is_file():
        raise UsageError(
            f"no {reqs.name} next to {manifest_path}",
            hint=f"run `kernodeck lock --platform {plat.name}`",
        )
    merged = conflict_regions(reqs.read_text(encoding="utf-8", errors="replace").splitlines())
    if merged:
        raise UsageError(
            f"{reqs}:{merged[0][0]}: git merge conflict marker: the file was merged with conflicts",
            hint="run `kernodeck lock` to lock again (it resolves the conflicting pins afresh), then rebuild",
        )
    dest_path = Path(dest)
    if dest_path.exists():
        if not dest_path.is_dir():
            raise UsageError(f"--dest {dest} exists and is not a folder")
        if any(dest_path.iterdir()):
            if not force:
                raise UsageError(
                    f"--dest {dest} exists and is not empty",
                    hint="pass --force to delete and recreate it, or choose another --dest",
                )
            why = _safe_to_delete(dest_path, manifest_path)
            if why is not None:
                raise UsageError(f"refusing to delete --dest {dest}: {why}", hint="choose another --dest")
    sums = folder / BUNDLE_SUMS
    return RebuildPlan(
        manifest_path=manifest_path,
        manifest=manifest,
        platform=plat,
        requirements=reqs,
        dest=dest_path.absolute(),
        dest_display=str(dest),
        installer=installer,
        python_request=python,
        bundle_sums=sums if bundlesums.is_bundle_shaped(folder) else None,
        force=force,
        credential_names=credential_names(manifest, reqs.read_text(encoding="utf-8", errors="replace")),
        platform_reason="" if choice.named else choice.reason,
        allow_stale=allow_stale,
        allowed_signers=signers,
        manifest_display=str(shown),
        mirrors=_mirror_swaps(manifest, reqs, environ, mirrors),
    )


def _mirror_swaps(
    manifest: Manifest, reqs: Path, environ: Mapping[str, str] | None, mirrors: Sequence[str] | None
) -> list[tuple[str, str]]:
    from kernodeck.handover.installer_env import mirror_swaps
    from kernodeck.lock.mirrors import parse_mirrors

    env = os.environ if environ is None else environ
    parsed = parse_mirrors(manifest, envvars.MIRRORS.words(env) if mirrors is None else mirrors)
    return (
        mirror_swaps(manifest, parsed, reqs.read_text(encoding="utf-8", errors="replace")) if parsed else []
    )


# --- what the stages check and run -------------------------------------------------------------


def check_bundle_sums(sums: Path, allowed_signers: Path | None = None) -> Step:
    """The bundle folder of `sums` is intact (`kernodeck.handover.sums.audit`: the sums file lists
    every file and each matches), and, with `allowed_signers`, its signature is good and by one of
    them (`kernodeck.handover.signing`). Nothing is run before this passes."""
    audit = bundlesums.audit(sums.parent)
    expected = f"every file of the bundle listed in {BUNDLE_SUMS} and matching"
    if not audit.ok:
        return Step.failed(
            LAYER,
            "bundle",
            f"{BUNDLE_SUMS}: {'; '.join(audit.problems[:5])}" + (" ..." if len(audit.problems) > 5 else ""),
            expected=expected,
            observed=audit.problems,
            hint="the bundle was modified after it was written; get an intact copy or write it again;"
            " nothing was created or installed",
            details={"cause": "bundle-modified"},
        )
    signed = _signature_step(sums, allowed_signers, expected)
    if signed is not None:
        return signed
    return Step.passed(LAYER, "bundle", expected=expected, observed=f"{audit.listed} files match")


def _signature_step(sums: Path, allowed_signers: Path | None, expected: str) -> Step | None:
    """A step when the signature decides the bundle check (refused, or passed naming the
    signer); None for an unsigned bundle when no allowed signers are given."""
    from kernodeck.handover import signing

    found = signing.bundle_signer(sums.parent, allowed_signers)
    if found is None:
        if allowed_signers is None:
            return None
        return Step.failed(
            LAYER,
            "bundle",
            f"{BUNDLE_SUMS} is not signed ({bundlesums.SIGNATURE} is missing), and allowed signers are given",
            expected=f"{expected}, signed by a key in {allowed_signers.name}",
            hint="ask the author for a bundle written with `kernodeck bundle --sign KEY`",
            details={"cause": "unsigned"},
        )
    if isinstance(found, signing.Rejected):
        return Step.failed(
            LAYER,
            "bundle",
            f"{bundlesums.SIGNATURE}: {found.reason}",
            expected=f"{expected}, signed"
            + (f" by a key in {allowed_signers.name}" if allowed_signers else ""),
            hint="the bundle was not signed by someone you trust, or was modified after it was signed",
            details={"cause": "bad-signature"},
        )
    return Step.passed(
        LAYER,
        "bundle",
        expected=expected,
        observed=f"every listed file matches; signed by {found.describe()}",
        details={"signer": found.identity, "key": found.key},
    )


def check_lock(plan: RebuildPlan) -> Step:
    """The lock file may be used (`kernodeck.lock.freshness`): a failed step naming the file, what
    differs and the command that fixes it; with `--allow-stale`, stale lock inputs are a warning
    (an undeclared package location never is)."""
    from kernodeck.lock.freshness import STALE, lock_verdict

    expected = (
        f"{plan.requirements.name} locked from {plan.manifest_path.name} as it is now, from declared indexes"
    )
    try:
        verdict = lock_verdict(plan.manifest_path, plan.platform.name, plan.manifest, path=plan.requirements)
    except KernodeckError as e:  # e.g. pip's default index cannot be told
        return Step.failed(
            LAYER, "lock", e.message, expected=expected, hint=e.hint, details={"cause": "unknown"}
        )
    if verdict.ok:
        return Step.passed(LAYER, "lock", expected=expected, observed="its lock inputs equal the manifest's")
    details = {"cause": verdict.kind, "problems": list(verdict.problems)}
    if plan.allow_stale and verdict.only_stale:
        return Step.warning(
            LAYER,
            "lock",
            f"{verdict.describe()} (used anyway: --allow-stale)",
            expected=expected,
            hint=f"run `{verdict.fix}` to lock it again",
            required=False,
            details=details,
        )
    return Step.failed(
        LAYER,
        "lock",
        f"{verdict.describe()}; nothing was created or installed",
        expected=expected,
        hint=f"run `{verdict.fix}`"
        + (
            ""
            if verdict.kind != STALE
            else " (or pass --allow-stale to use it as it is, reported as a warning)"
        ),
        details=details,
    )


def select_interpreter(
    manifest: Manifest, plat: Platform, request: str | None, environ: Mapping[str, str]
) -> tuple[Step, Interpreter | None]:
    """Find the interpreter and check it against [python] (and the platform) before anything else."""
    required = plat.python or manifest.python.version
    impl = manifest.python.implementation
    expected = {"python": required, "implementation": impl, "os": plat.os, "arch": plat.arch}
    tried: list[str] = []
    chosen: Interpreter | None = None
    if (
        request is not None
        and _VERSION_ARG.match(request)
        and not (version_matches(required, request) or version_matches(request, required))
    ):
        return (
            Step.failed(
                LAYER,
                "interpreter",
                f"--python {request} does not satisfy [python] version = {required!r}",
                expected=expected,
                hint=f"pass --python {required} (or a path to such an interpreter), or change [python]"
                " and give the reference a new identity",
            ),
            None,
        )
    if request is None or _VERSION_ARG.match(request):
        want = request or required
        for cand in find_interpreters(want, environ):
            info = describe_interpreter(cand)
            if isinstance(info, str):
                tried.append(info)
                continue
            tried.append(f"{cand} is {info.implementation} {info.version}")
            if version_matches(want, info.version) and info.implementation == impl:
                chosen = info
                break
        if chosen is None:
            return (
                Step.failed(
                    LAYER,
                    "interpreter",
                    f"no {impl} {want} interpreter on PATH"
                    + (f" (tried: {'; '.join(tried)})" if tried else ""),
                    expected=expected,
                    hint=f"install Python {want}, or pass --python /path/to/python{want}",
                ),
                None,
            )
    else:
        info = describe_interpreter(request)
        if isinstance(info, str):
            return (
                Step.failed(
                    LAYER,
                    "interpreter",
                    info,
                    expected=expected,
                    hint="pass a working interpreter with --python",
                ),
                None,
            )
        chosen = info
    observed = {
        "python": chosen.version,
        "implementation": chosen.implementation,
        "os": chosen.os,
        "arch": chosen.arch,
        "path": chosen.path,
    }
    problems = []
    if not version_matches(required, chosen.version):
        problems.append(f"Python {chosen.version} does not satisfy [python] version = {required!r}")
    if chosen.implementation != impl:
        problems.append(f"implementation {chosen.implementation} is not {impl}")
    if chosen.os != plat.os or not _same_arch(plat.arch, chosen.arch):
        problems.append(f"this is {chosen.os} {chosen.arch}, platform {plat.name} is {plat.os} {plat.arch}")
    if problems:
        return (
            Step.failed(
                LAYER,
                "interpreter",
                "; ".join(problems),
                expected=expected,
                observed=observed,
                hint=f"pass --python with a {impl} {required} interpreter, or --platform for this host",
            ),
            None,
        )
    return Step.passed(LAYER, "interpreter", expected=expected, observed=observed), chosen


def install_command(
    plan: RebuildPlan,
    py: Path,
    uv: str | None,
    extra: Sequence[str] = (),
    *,
    build_constraints: str | None = None,
) -> list[str]:
    """The installer command line of a rebuild plan (see `install_argv`); `extra` are the network
    arguments (`InstallerEnvironment.args`), `build_constraints` the file of the manifest's
    build constraints when they go as an option (`build_constraints_route`)."""
    more = [*extra]
    if build_constraints is not None:
        more += [_BUILD_CONSTRAINT_OPTION[plan.installer], build_constraints]
    return install_argv(
        plan.installer,
        str(py),
        str(plan.requirements),
        allow_sdist=plan.manifest.packages.allow_sdist,
        uv=uv,
        extra=more,
    )


#: The option that constrains the build requirements of sdists: uv's, and pip's since 25.3 (an
#: older pip reads them from PIP_CONSTRAINT in the build environment it starts: see
#: `build_constraints_route`).
_BUILD_CONSTRAINT_OPTION = {"pip": "--build-constraint", "uv": "--build-constraints"}
PIP_BUILD_CONSTRAINT = (25, 3)


def build_constraints_route(installer: Installer, pip_version: str | None) -> str:
    """How the manifest's build constraints reach the installer: "option" (uv; pip 25.3 and later),
    or "environment" (an older pip: PIP_CONSTRAINT, which the isolated install itself ignores and
    the pip it starts to install build requirements reads)."""
    if installer == "uv":
        return "option"
    m = re.search(r"pip (\d+)\.(\d+)", pip_version or "")
    if m is not None and (int(m[1]), int(m[2])) >= PIP_BUILD_CONSTRAINT:
        return "option"
    return "environment"


def install_argv(
    installer: Installer,
    python: str,
    requirements: str,
    *,
    allow_sdist: Sequence[str],
    uv: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The one command that installs a lock file into a fresh environment: rebuild runs it, and
    REBUILD.md prints it. Binary-only unless the manifest allows some sdists (`allow_sdist`).
    `extra`: the network arguments of `kernodeck.handover.installer_env` (before `-r`)."""
    only_binary = not allow_sdist
    if installer == "uv":
        argv = [
            uv or "uv",
            "pip",
            "install",
            "--no-config",
            "--python",
            python,
            "--require-hashes",
            "--no-deps",
        ]
        argv += ["--index-strategy", "unsafe-best-match"]  # every artifact is pinned by hash anyway
        if only_binary:
            argv += ["--only-binary", ":all:"]
        return [*argv, *extra, "-r", requirements]
    argv = [python, "-m", "pip", "install", "--isolated", "--no-input", "--disable-pip-version-check"]
    argv += ["--require-hashes", "--no-deps"]
    if only_binary:
        argv += ["--only-binary", ":all:"]
    return [*argv, *extra, "-r", requirements]


def project_argv(
    installer: Installer,
    python: str,
    source: Sequence[str],
    *,
    uv: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command of the `project` stage: the project itself without its dependencies (the lock
    installed them), as `uv sync` installs it. `source`: `-r FILE` (rebuild writes the lock's
    index lines and `-e <folder>` in a file, so `${VAR}` credentials expand as in the lock), or
    `-e .` (REBUILD.md, for a reader in the folder)."""
    if installer == "uv":
        head = [uv or "uv", "pip", "install", "--no-config", "--python", python]
    else:
        head = [python, "-m", "pip", "install", "--isolated", "--no-input", "--disable-pip-version-check"]
    return [*head, "--no-deps", *extra, *source]


def installs_project(manifest: Manifest, manifest_path: Path) -> bool:
    """Whether the lock holds the project's own dependencies: `[packages] from` names the
    pyproject.toml beside the manifest, or a requirements file it reads installs the project
    itself (`-e .`, as `pip install -r` would)."""
    if any(Path(f) == Path("pyproject.toml") for f in manifest.packages.from_):
        return True
    if not manifest.packages.from_:
        return False
    from kernodeck.manifest.sources import read_sources

    try:
        return read_sources(manifest, manifest_path).project_included
    except KernodeckError:  # the lock said why already
        return False


def project_requirements(lock_text: str, folder: Path) -> str:
    """The requirements file of the `project` stage: the lock's index lines (its build
    requirements come from there too), then `-e FOLDER`."""
    from kernodeck.lockfile.read import parse_lockfile

    options = parse_lockfile(lock_text, lenient=True).index_options()
    return "\n".join([*options, f"-e {folder}"]) + "\n"


def project_to_install(plan: RebuildPlan) -> tuple[str, Path] | None:
    """(name, folder) of the project to install: the one whose own dependencies the lock holds
    (`installs_project`), when its pyproject.toml beside the manifest has a [project] name; or a
    Poetry project there (`poetry_project`), which `poetry install` installs with its
    dependencies. None otherwise, and for a bundle."""
    # A bundle is left as it is: its own folders (observed/, _kernodeck/) beside the code make
    # setuptools' discovery of a flat-layout project fail, and an editable install would write
    # into the checked folder.
    folder = plan.manifest_path.parent
    if plan.bundle_sums is not None or not (folder / "pyproject.toml").is_file():
        return None
    try:
        from kernodeck.reqfile import read_pyproject

        data = read_pyproject(folder / "pyproject.toml", "pyproject.toml")
    except KernodeckError:
        return None
    from kernodeck.formats.poetrydeps import poetry_project

    project = data.get("project")
    if not isinstance(
        project, dict
    ):  # `poetry install` installs the project, wherever its deps are read from
        name = poetry_project(data)
    else:
        name = project.get("name") if installs_project(plan.manifest, plan.manifest_path) else None
    return (name, folder) if isinstance(name, str) and name else None


def venv_argv(interpreter: str, dest: str) -> list[str]:
    """The command of the `venv` stage: a fresh virtual environment, the interpreter isolated."""
    return [interpreter, "-I", "-m", "venv", dest]


def pip_argv(python: str, *args: str) -> list[str]:
    """pip of the new environment, called through its interpreter and isolated from pip's
    configuration files and variables."""
    return [python, "-m", "pip", "--isolated", *args]


def pip_version_argv(python: str) -> list[str]:
    """The command of the `pip-version` stage."""
    return pip_argv(python, "--version")


def contract_argv(python: str) -> list[str]:
    """The command of the `contract` stage (`pip check`)."""
    return pip_argv(python, "check")


def inventory_argv(python: str) -> list[str]:
    """The command of the `inventory` stage (`pip freeze --all`; its output is the inventory)."""
    return pip_argv(python, "freeze", "--all")


def stage_commands(
    interpreter: str,
    dest: str,
    python: str,
    requirements: str,
    *,
    installer: Installer,
    allow_sdist: Sequence[str],
    uv: str | None = None,
    extra: Sequence[str] = (),
) -> list[tuple[str, list[str]]]:
    """The command of every stage that runs one, in order, by stage name: what the stages run
    (each calls its own builder above) and what REBUILD.md prints."""
    return [
        ("venv", venv_argv(interpreter, dest)),
        ("pip-version", pip_version_argv(python)),
        (
            "install",
            install_argv(installer, python, requirements, allow_sdist=allow_sdist, uv=uv, extra=extra),
        ),
        ("contract", contract_argv(python)),
        ("inventory", inventory_argv(python)),
    ]


def clean_environment(
    environ: Mapping[str, str], keep: Sequence[str], installer: Installer = "pip"
) -> InstallerEnvironment:
    """The environment of every step in the new venv, and the network arguments of the install:
    owned by `kernodeck.handover.installer_env` (basics, network reach, the manifest's credential
    variables; isolated from the user's pip and uv configuration)."""
    return installer_environment(environ, keep, installer=installer)


def _display(plan: RebuildPlan, path: Path) -> str:
    """A path as the user wrote --dest, so reports carry no absolute host paths."""
    try:
        return str(Path(plan.dest_display) / path.relative_to(plan.dest))
    except ValueError:
        return path.name


def _pretty_argv(plan: RebuildPlan, argv: Sequence[str]) -> list[str]:
    out = []
    for a in argv:
        if a == str(plan.requirements):
            out.append(plan.requirements.name)
        elif a.startswith(str(plan.dest)):
            out.append(_display(plan, Path(a)))
        elif os.path.isabs(a):
            out.append(Path(a).name)
        else:
            out.append(redact(a))
    return out


def parse_freeze(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "==" in line:
            name, _, ver = line.partition("==")
            out[name.strip()] = ver.strip()
        elif " @ " in line:
            name, _, where = line.partition(" @ ")
            out[name.strip()] = "@ " + Path(where.strip()).name
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


# --- the procedure: a table of named stages -------------------------------------------------


@dataclass
class _Rebuild:
    """What the stages of one rebuild share: the plan, the environment of every step, and what the
    earlier stages found (the interpreter, the uv binary, verify's report). Stages write only here
    and in their `StageResult`; `run_rebuild` builds the report from them."""

    plan: RebuildPlan
    environ: dict[str, str]
    ienv: InstallerEnvironment
    compute: bool
    verify: VerifyFn
    inventory_path: Path | None
    progress: Log | None
    interp: Interpreter | None = None
    uv: str | None = None
    #: verify's report of the rebuilt environment, and how long it took (the `verify` stage).
    verified: Report | None = None
    verify_seconds: float = 0.0
    #: `pip --version` of the new environment, shortened (the `pip-version` stage, when it passed).
    pip_version: str | None = None

    @property
    def py(self) -> Path:
        return venv_python(self.plan.dest)


@dataclass
class StageResult:
    """A stage's steps, whether the stage itself failed (its `Stage.skips` are then skipped), and
    why the run was refused as bad input before anything was created (exit 2), when it was."""

    steps: list[Step]
    failed: bool = False
    refused: str | None = None


@dataclass(frozen=True)
class Stage:
    """One row of rebuild's procedure."""

    name: str
    run: Callable[[_Rebuild], StageResult]
    #: The later stages skipped when this one fails, and the reason they are given.
    skips: tuple[str, ...] = ()
    why_skipped: str = ""
    #: Whether the stage runs for this plan (the bundle check: only when rebuilding from a bundle).
    applies: Callable[[RebuildPlan], bool] = lambda plan: True
    #: The line `log` gets as it starts ("{installer}" is the plan's installer).
    label: str = ""
    #: Whether a failure of its steps decides the exit code (`Step.required`).
    required: bool = True


def _timed(fn: Callable[[], Step]) -> Step:
    t0 = time.monotonic()
    step = fn()
    step.seconds = round(time.monotonic() - t0, 3)
    return step


def _stage_bundle(r: _Rebuild) -> StageResult:
    assert r.plan.bundle_sums is not None  # `applies` runs this stage only for a bundle
    sums = r.plan.bundle_sums
    step = _timed(lambda: check_bundle_sums(sums, r.plan.allowed_signers))
    return StageResult([step], failed=step.status is Status.FAILED)


def _stage_lock(r: _Rebuild) -> StageResult:
    step = _timed(lambda: check_lock(r.plan))
    return StageResult([step], failed=step.status is Status.FAILED)


def _stage_interpreter(r: _Rebuild) -> StageResult:
    t0 = time.monotonic()
    step, r.interp = select_interpreter(r.plan.manifest, r.plan.platform, r.plan.python_request, r.environ)
    step.seconds = round(time.monotonic() - t0, 3)
    if r.interp is None:
        return StageResult([step], failed=True, refused=step.error or "no suitable interpreter")
    return StageResult([step])


def _venv_hint(dest: Path, output: str) -> str:
    """What to do when the venv could not be made at `dest`: a folder this user may not write
    (named: the nearest one that exists), else the interpreter's venv module."""
    folder = nearest_existing(dest)
    refused = "Permission denied" in output or "Read-only file system" in output
    if refused or not os.access(folder, os.W_OK | os.X_OK):
        return f"this user may not write in {folder}: pass a --dest folder you may write"
    return "on Debian/Ubuntu install pythonX.Y-venv; or pass another --python"


def _stage_venv(r: _Rebuild) -> StageResult:
    plan, interp, py = r.plan, r.interp, r.py
    assert interp is not None  # the interpreter stage skips this one when it fails
    if plan.dest.exists() and any(plan.dest.iterdir()):
        shutil.rmtree(plan.dest)  # --force was checked by plan_rebuild
    run = _run(venv_argv(interp.path, str(plan.dest)), r.ienv.env)
    expected = f"a fresh virtual environment with {interp.implementation} {interp.version}"
    observed = {"dest": plan.dest_display, "python": _display(plan, py)}
    if run.returncode != 0 or not py.exists():
        step = Step.failed(
            LAYER,
            "venv",
            first_error(run.output) if run.output.strip() else f"venv exited {run.returncode}",
            expected=expected,
            observed=observed,
            hint=_venv_hint(plan.dest, run.output),
            details={"output": _tail(run.output)},
            seconds=round(run.seconds, 3),
        )
        return StageResult([step], failed=True)
    ignore = plan.dest / ".gitignore"
    if not ignore.exists():  # the venv ignores itself, as uv's and Python 3.13's venvs do
        with contextlib.suppress(OSError):
            ignore.write_text("# created by kernodeck rebuild\n*\n", encoding="utf-8")
    return StageResult(
        [Step.passed(LAYER, "venv", expected=expected, observed=observed, seconds=round(run.seconds, 3))]
    )


def _stage_pip_version(r: _Rebuild) -> StageResult:
    env = r.ienv.env
    run = _run(pip_version_argv(str(r.py)), env)
    pip_version = re.sub(r"\s+from\s+.*?(\(python [^)]*\))?$", r" \1", run.stdout.strip()).strip()
    details: dict[str, Any] = {}
    r.uv = find_uv(r.environ) if r.plan.installer == "uv" else None
    if r.uv is not None:
        details["uv"] = _run([r.uv, "--version"], env).stdout.strip()
    if run.returncode != 0:
        step = Step.failed(
            LAYER,
            "pip-version",
            first_error(run.output),
            observed=None,
            hint="the new environment has no working pip; recreate it with --force",
            seconds=round(run.seconds, 3),
        )
        return StageResult([step], failed=True)
    r.pip_version = pip_version
    return StageResult(
        [
            Step.passed(
                LAYER, "pip-version", observed=pip_version, details=details, seconds=round(run.seconds, 3)
            )
        ]
    )


def install_files(plan: RebuildPlan, tmp: Path) -> list[Path]:
    """The requirement files the install reads, in order: the lock itself; or, when it routes pins
    to an explicit index (`installer_env.explicit_routes`) or `--mirror` applies, copies in `tmp`:
    one per explicit index (so pip never asks that index for the rest), then the rest, each with
    the mirrors' URLs. The same pins and hashes as the lock."""
    text = plan.requirements.read_text(encoding="utf-8")
    parts = split_routed(text, explicit_routes(plan.manifest, text))
    if len(parts) == 1 and not plan.mirrors:
        return [plan.requirements]
    files = []
    for i, (_url, part) in enumerate(parts):
        name = plan.requirements.name if i == len(parts) - 1 else f"routed-{i}-{plan.requirements.name}"
        (tmp / name).write_text(mirrored_requirements(part, plan.mirrors), encoding="utf-8")
        files.append(tmp / name)
    return files


def _install_routed(r: _Rebuild, files: Sequence[Path], env: Mapping[str, str]) -> _Run | None:
    """Install the pins routed to explicit indexes (each file from its index alone); the first
    failed run, or None when all passed."""
    for part in files:
        plan = dataclasses.replace(r.plan, requirements=part)
        done = _run(
            install_command(plan, r.py, r.uv, r.ienv.args(plan.installer)),
            env,
            cwd=r.plan.requirements.parent,
        )
        if done.returncode != 0:
            return done
    return None


def _stage_install(r: _Rebuild) -> StageResult:
    with tempfile.TemporaryDirectory(prefix="kernodeck-install-") as tmp:
        return _install(r, Path(tmp))


def _install(r: _Rebuild, tmp: Path) -> StageResult:
    plan, ienv, py, uv = r.plan, r.ienv, r.py, r.uv
    env = dict(ienv.env)
    constraints = None
    if plan.manifest.packages.build_constraints and plan.manifest.packages.allow_sdist:
        constraints = tmp / "build-constraints.txt"
        constraints.write_text("\n".join(plan.manifest.packages.build_constraints) + "\n", encoding="utf-8")
        if build_constraints_route(plan.installer, r.pip_version) == "environment":
            env["PIP_CONSTRAINT"] = str(constraints)
            constraints = None
    *first, last = install_files(plan, tmp)
    done = _install_routed(r, first, env)
    plan = dataclasses.replace(plan, requirements=last)
    argv = install_command(
        plan, py, uv, ienv.args(plan.installer), build_constraints=str(constraints) if constraints else None
    )
    if plan.installer == "uv" and uv is None:
        run = _Run(127, "", "error: uv not found next to this Python or on PATH", 0.0)
    else:
        stream = None
        if r.progress is not None:
            show = r.progress

            def stream(line: str) -> None:
                shown = progress_line(plan.installer, line)
                if shown is not None:
                    show(shown)

        run = done if done is not None else _run(argv, env, cwd=r.plan.requirements.parent, on_line=stream)
    details: dict[str, Any] = {
        "command": _pretty_argv(plan, argv),
        "environment": sorted(env),
        "returncode": run.returncode,
    }
    if ienv.settings.describe():
        details["network"] = ienv.settings.describe()
    if ienv.dropped:
        details["not-passed"] = ienv.dropped
    if ienv.settings.ignored:
        details["network-ignored"] = list(ienv.settings.ignored)
    expected = f"every pin of {plan.requirements.name} installed with matching hashes"
    if run.returncode != 0:
        details["output"] = _tail(run.output)
        cause = _install_cause(plan, run, argv, env, details)
        details["cause"] = cause.kind
        step = Step.failed(
            LAYER,
            "install",
            cause.error,
            expected=expected,
            hint=cause.hint,
            details=details,
            seconds=round(run.seconds, 3),
        )
        return StageResult([step], failed=True)
    observed = f"installed from {plan.requirements.name} ({plan.installer}, --require-hashes --no-deps)"
    return StageResult(
        [
            Step.passed(
                LAYER,
                "install",
                expected=expected,
                observed=observed,
                details=details,
                seconds=round(run.seconds, 3),
            )
        ]
    )


def _stage_project(r: _Rebuild) -> StageResult:
    """The project itself, editable from its folder, as in the reference environment a developer
    made with `pip install -e .` or `uv sync`. A project that cannot be installed so (setuptools
    cannot tell which of its folders are packages) is a warning: the environment still has every
    locked dependency, and scripts run from the checkout as before."""
    found = project_to_install(r.plan)
    assert found is not None  # `applies` runs this stage only then
    name, folder = found
    plan, ienv = r.plan, r.ienv
    with tempfile.TemporaryDirectory(prefix="kernodeck-project-") as tmp:
        reqs = Path(tmp) / "project.txt"
        lock_text = plan.requirements.read_text(encoding="utf-8")
        reqs.write_text(project_requirements(lock_text, folder), encoding="utf-8")
        argv = project_argv(
            plan.installer, str(r.py), ["-r", str(reqs)], uv=r.uv, extra=ienv.args(plan.installer)
        )
        run = _run(argv, ienv.env, cwd=folder)
    expected = f"{name} installed editable from its folder ({plan.installer} install -e, no dependencies)"
    details: dict[str, Any] = {"command": _pretty_argv(plan, argv), "returncode": run.returncode}
    if run.returncode != 0:
        details["output"] = _tail(run.output)
        step = Step.warning(
            LAYER,
            "project",
            backend_error(run.output) or first_error(run.output) or f"the install exited {run.returncode}",
            expected=expected,
            hint=f"the locked dependencies are installed; to install {name} too, make it installable "
            "(e.g. [tool.setuptools] packages) or leave pyproject.toml out of [packages] from",
            details=details,
            seconds=round(run.seconds, 3),
        )
        return StageResult([step])
    return StageResult(
        [
            Step.passed(
                LAYER,
                "project",
                expected=expected,
                observed=f"{name} installed editable",
                details=details,
                seconds=round(run.seconds, 3),
            )
        ]
    )


def _stage_contract(r: _Rebuild) -> StageResult:
    run = _run(contract_argv(str(r.py)), r.ienv.env)
    expected = "no broken requirements (pip check)"
    if run.returncode != 0:
        step = Step.failed(
            LAYER,
            "contract",
            _first_line(run.stdout) or first_error(run.output),
            expected=expected,
            observed=_tail(run.stdout, 50),
            hint="the lock misses a dependency or pins incompatible versions; run `kernodeck lock` again",
            seconds=round(run.seconds, 3),
        )
        return StageResult([step], failed=True)
    return StageResult(
        [
            Step.passed(
                LAYER,
                "contract",
                expected=expected,
                observed=_first_line(run.stdout),
                seconds=round(run.seconds, 3),
            )
        ]
    )


def _stage_inventory(r: _Rebuild) -> StageResult:
    plan, m = r.plan, r.plan.manifest
    run = _run(inventory_argv(str(r.py)), r.ienv.env)
    if run.returncode != 0:
        step = Step.failed(LAYER, "inventory", first_error(run.output), seconds=round(run.seconds, 3))
        return StageResult([step], failed=True)
    target = r.inventory_path or (plan.manifest_path.parent / INVENTORY_FILE)
    context = f" (reference {m.reference.name} {m.reference.id}, platform {plan.platform.name})"
    header = INVENTORY_HEADER.format(context=context, requirements=plan.requirements.name)
    atomic_write_text(target, header + run.stdout)
    dists = parse_freeze(run.stdout)
    step = Step.passed(
        LAYER,
        "inventory",
        observed=dists,
        details={"file": target.name, "distributions": len(dists)},
        seconds=round(run.seconds, 3),
    )
    return StageResult([step])


def _stage_verify(r: _Rebuild) -> StageResult:
    """verify of the rebuilt environment, application checks included: its steps join the report."""
    from kernodeck.determinism import started_with_declared_env

    t0 = time.monotonic()
    try:
        with started_with_declared_env(r.plan.manifest.determinism):  # as the procedure runs it
            result = r.verify(
                r.plan.manifest_path, python=str(r.py), platform=r.plan.platform.name, compute=r.compute
            )
    except Exception as e:  # a crash in verify is a failed stage, reported like the others
        step = Step.failed(
            LAYER,
            "verify",
            f"verify could not run: {type(e).__name__}: {e}",
            seconds=round(time.monotonic() - t0, 3),
        )
        return StageResult([step], failed=True)
    r.verified, r.verify_seconds = result, round(time.monotonic() - t0, 3)
    return StageResult(list(result.steps))


#: The stages' names in order (`STAGES` follows it; a test holds them together).
STAGE_ORDER = (
    "bundle",
    "lock",
    "interpreter",
    "venv",
    "pip-version",
    "install",
    "project",
    "contract",
    "inventory",
    "verify",
)


def _after(name: str) -> tuple[str, ...]:
    """Every stage after `name`."""
    return STAGE_ORDER[STAGE_ORDER.index(name) + 1 :]


#: Rebuild's procedure, in order: each stage, what it skips when it fails and why. Every stage's
#: steps are required (a failure makes the exit code 1; a refused interpreter makes it 2).
STAGES: tuple[Stage, ...] = (
    Stage(
        "bundle",
        _stage_bundle,
        skips=_after("bundle"),
        why_skipped="the bundle does not match BUNDLE.sha256 (or its signature); nothing was created",
        applies=lambda plan: plan.bundle_sums is not None,
    ),
    Stage(
        "lock",
        _stage_lock,
        skips=_after("lock"),
        why_skipped="the lock file may not be used; nothing was created",
    ),
    Stage(
        "interpreter",
        _stage_interpreter,
        skips=_after("interpreter"),
        why_skipped="no suitable interpreter; nothing was created",
    ),
    Stage(
        "venv", _stage_venv, skips=_after("venv"), why_skipped="the virtual environment could not be created"
    ),
    Stage(
        "pip-version",
        _stage_pip_version,
        skips=_after("pip-version"),
        why_skipped="pip does not run in the new environment",
    ),
    Stage(
        "install",
        _stage_install,
        skips=_after("install"),
        why_skipped="the install failed",
        label="install ({installer})",
    ),
    Stage(
        "project",
        _stage_project,
        applies=lambda plan: project_to_install(plan) is not None,
        label="install the project itself ({installer})",
        required=False,  # its failure is a warning: the locked environment is complete without it
    ),
    Stage("contract", _stage_contract),  # a broken contract is reported; the inventory still helps
    Stage("inventory", _stage_inventory),
    Stage("verify", _stage_verify),
)


@dataclass(frozen=True)
class RebuildResult:
    """What `run_rebuild` returns: the report, and what the command line shows beside it, typed
    (never looked up in the report's steps by name)."""

    report: Report
    #: `pip --version` of the rebuilt environment ("pip 24.3.1 (python 3.11)"); None when the
    #: `pip-version` stage did not pass (or did not run).
    pip_version: str | None = None

    @property
    def exit_code(self) -> int:
        return self.report.exit_code


def run_rebuild(
    plan: RebuildPlan,
    *,
    environ: Mapping[str, str] | None = None,
    compute: bool = True,
    verify: VerifyFn | None = None,
    inventory_path: Path | None = None,
    log: Log | None = None,
    progress: Log | None = None,
) -> RebuildResult:
    """Run every stage of a planned rebuild (`STAGES`, in order); never raises for a failing stage
    (it is a Step, and the stages it skips are skipped Steps saying why). `log` gets a line as each
    stage starts; `progress` gets the installer's output while it installs, one `progress_line` at
    a time. Neither changes the report. The result carries the report and the typed facts the
    command line prints beside it (`RebuildResult.pip_version`)."""
    env_in = dict(os.environ if environ is None else environ)
    ienv = clean_environment(env_in, plan.credential_names, plan.installer)
    m = plan.manifest
    report = Report(
        kind="rebuild",
        manifest=plan.manifest_path.name
        if plan.bundle_sums
        else (plan.manifest_display or str(plan.manifest_path)),
        reference_id=m.reference.id,
        platform=plan.platform.name,
        platform_reason=plan.platform_reason or None,
        settings={
            "dest": plan.dest_display,
            "installer": plan.installer,
            "python": plan.python_request or (plan.platform.python or m.python.version),
            "requirements": plan.requirements.name,
            "compute": compute,
            "environment-passed": sorted(ienv.env),
        },
    )
    state = _Rebuild(
        plan=plan,
        environ=env_in,
        ienv=ienv,
        compute=compute,
        verify=verify or _verify_rebuilt,
        inventory_path=inventory_path,
        progress=progress,
    )
    skipped: dict[str, str] = {}
    for stage in STAGES:
        if not stage.applies(plan):
            continue
        if stage.name in skipped:
            report.add(Step.skipped(LAYER, stage.name, skipped[stage.name]))
            continue
        if log is not None:
            log(f"rebuild: {(stage.label or stage.name).format(installer=plan.installer)} ...")
        result = stage.run(state)
        if not stage.required:
            for step in result.steps:
                step.required = False
        report.add(*result.steps)
        if result.refused is not None:
            report.refused = result.refused
        if result.failed:
            for name in stage.skips:
                skipped.setdefault(name, stage.why_skipped)
    if state.verified is not None:
        report.interpreter = state.verified.interpreter
        report.inventory = state.verified.inventory
        report.settings["verify"] = {"seconds": state.verify_seconds, **state.verified.settings}
    return RebuildResult(report, pip_version=state.pip_version)


def _install_cause(
    plan: RebuildPlan, run: _Run, argv: Sequence[str], env: Mapping[str, str], details: dict[str, Any]
) -> InstallerCause:
    """The real cause of a failed install. pip prints HTTP errors (401, 403) and wheels skipped for
    their tags only with -vv, so when its output names no cause the same install (`argv`, `env`)
    is run again with -vv (it fails as fast) and the cause is read from that. An sdist whose build
    failed is named with the error its build backend ended with."""

    def pick(output: str) -> InstallerCause:
        return installer_cause(
            output,
            installer=plan.installer,
            requirements=plan.requirements.name,
            platform=plan.platform.name,
            credentials=plan.credential_names,
        )

    cause = pick(run.output)
    said = backend_error(run.output)
    if cause.kind == "other" and said is not None:
        return InstallerCause("build", f"building a source distribution failed: {said}", _build_hint(said))
    if plan.installer != "pip" or cause.kind not in ("not-found", "other") or run.returncode == 124:
        return cause
    at = list(argv).index("install") + 1
    diag = _run([*argv[:at], "-vv", *argv[at:]], env, cwd=plan.requirements.parent, timeout=600)
    better = pick(diag.output)
    if better.kind in ("not-found", "other"):
        return cause
    details["diagnosis"] = f"pip install -vv: {better.kind}"
    return better


def _build_hint(said: str) -> str:
    """What to do when an sdist's build failed with `said` (its backend's last error)."""
    if "No module named 'pkg_resources'" in said:
        return (
            "its build imports pkg_resources, which setuptools 81 and later no longer ship: add "
            'build-constraints = ["setuptools<81"] to [packages] in the manifest, or lock a version '
            "with a wheel"
        )
    return (
        "the sdist's build failed with its build requirements as the installer chose them: constrain "
        "them with [packages] build-constraints, or lock a version with a wheel"
    )


def _verify_rebuilt(
    path: Path,
    *,
    python: str | None = None,
    platform: str | None = None,
    compute: bool = True,
    skip: tuple[str, ...] = (),
) -> Report:
    """kernodeck.api.verify of the rebuilt environment: its interpreter is given, not chosen from
    the shell (the report names it as "the rebuilt environment")."""
    from kernodeck import api
    from kernodeck.interpreters import given

    target = given(python, REBUILT_REASON) if python is not None else None
    return api.verify(path, python=target, platform=platform, compute=compute, skip=skip)


def rebuild(
    source: str | Path = "repro.toml",
    *,
    dest: str | Path = ".venv-rebuild",
    python: str | None = None,
    platform: str | None = None,
    installer: Installer = "pip",
    force: bool = False,
    compute: bool = True,
    environ: Mapping[str, str] | None = None,
    verify: VerifyFn | None = None,
    inventory_path: Path | None = None,
    log: Log | None = None,
    progress: Log | None = None,
    allow_stale: bool = False,
    allowed_signers: str | Path | None = None,
) -> Report:
    """Plan (usage errors raise) and run (stage failures are Steps) a rebuild; its report
    (`run_rebuild` gives the typed result around it)."""
    plan = plan_rebuild(
        source,
        dest=dest,
        python=python,
        platform=platform,
        installer=installer,
        force=force,
        environ=environ,
        allow_stale=allow_stale,
        allowed_signers=allowed_signers,
    )
    return run_rebuild(
        plan,
        environ=environ,
        compute=compute,
        verify=verify,
        inventory_path=inventory_path,
        log=log,
        progress=progress,
    ).report
