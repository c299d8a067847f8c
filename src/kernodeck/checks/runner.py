"""Run a check's command the way the reference ran it, and keep what it printed.

The argv comes from the manifest: `{out}` becomes a fresh output folder, a leading `python` (or
`python3`, or `{python}` anywhere) becomes the target interpreter. The command runs in the
manifest's folder, with the target environment plus the `[determinism]` variables (see
`kernodeck.determinism.env_for`) and the check's own `env`, under a timeout that kills its whole
process group. stdout and stderr go to `<out>/.kernodeck/`; a failure is summarised by the exit
code and the first error line of stderr as kernodeck.support.firsterror finds it (the first `Traceback`'s
exception line, or the first `...Error:` line), not by whatever noise came last.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernodeck.determinism import ENV_REPORT, env_for
from kernodeck.errors import UsageError
from kernodeck.manifest.schema import Determinism
from kernodeck.probe.launch import wait_group
from kernodeck.support.envvars import OUT
from kernodeck.support.firsterror import first_error as first_error_line

LOG_DIR = ".kernodeck"
MARKER = "made-by-kernodeck"

_PYTHON_NAMES = ("python", "python3")


@dataclass(frozen=True)
class RunResult:
    argv: list[str]
    cwd: Path
    out: Path
    returncode: int | None
    timed_out: bool
    timeout: float
    seconds: float
    stdout_log: Path
    stderr_log: Path
    first_error: str | None
    env_set: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0

    def describe_failure(self) -> str:
        if self.timed_out:
            head = f"timed out after {_secs(self.timeout)} s"
        elif self.returncode is not None and self.returncode < 0:
            head = f"killed by signal {_signal_name(-self.returncode)}"
        else:
            head = f"exit code {self.returncode}"
        if self.first_error:
            head += f": {self.first_error}"
        return head


def make_base(out_dir: Path | None) -> Path:
    """The folder that holds one output folder per check (a new temporary one by default)."""
    if out_dir is None:
        return Path(tempfile.mkdtemp(prefix="kernodeck-check-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def fresh_out(base: Path, name: str) -> Path:
    """An empty `<base>/<name>`; an old one is removed only if Kernodeck made it."""
    out = base / name
    if out.exists():
        if not (out / LOG_DIR / MARKER).is_file():
            raise UsageError(
                f"output folder {out} already exists and was not made by kernodeck",
                hint="pass another --out folder, or remove that one",
            )
        shutil.rmtree(out)
    (out / LOG_DIR).mkdir(parents=True)
    (out / LOG_DIR / MARKER).write_text("this folder is replaced on the next run\n", encoding="utf-8")
    return out


def resolve_python(python: str) -> str:
    """A path-like interpreter made absolute (the command runs in the manifest's folder); a bare
    name is left to PATH. Symlinks are kept: a venv's python must stay inside its venv. Which
    interpreter that is was decided by kernodeck.interpreters (the callers pass its choice)."""
    if os.sep in python or (os.altsep and os.altsep in python):
        return os.path.abspath(python)
    return python


#: The placeholders of a check's or resume's `run` (docs/manifest.md documents each: a test checks).
PLACEHOLDERS: tuple[str, ...] = ("{out}", "{python}")


def expand_argv(argv: Sequence[str], python: str, out: Path) -> list[str]:
    python = resolve_python(python)
    values = dict(zip(PLACEHOLDERS, (str(out), python), strict=True))
    args = [_expand(a, values) for a in argv]
    if args and args[0] in _PYTHON_NAMES:
        args[0] = python
    return args


def _expand(arg: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        arg = arg.replace(name, value)
    return arg


def target_env(
    python: str,
    *,
    base: Mapping[str, str] | None,
    determinism: Determinism | None,
    extra: Mapping[str, str] | None = None,
    out: Path | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(the full environment, the variables Kernodeck set on top of `base`)."""
    env = dict(os.environ if base is None else base)
    added: dict[str, str] = {}
    added.update(env_for(determinism))
    added.update(extra or {})
    if out is not None:
        added[OUT.name] = str(out)
        added[ENV_REPORT] = str(out / LOG_DIR / "determinism.json")
    env.update(added)
    # a process the app spawns as `python` gets the target interpreter, without activation
    python = resolve_python(python)
    bindir = str(Path(python).parent) if os.sep in python else ""
    if bindir:
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env, added


def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    out: Path,
    env_set: Mapping[str, str] | None = None,
) -> RunResult:
    """Run `argv` (already expanded) with a timeout; logs go to `<out>/.kernodeck/`."""
    logs = out / LOG_DIR
    logs.mkdir(parents=True, exist_ok=True)
    stdout_log, stderr_log = logs / "stdout.log", logs / "stderr.log"
    start = time.monotonic()
    timed_out = False
    returncode: int | None
    with open(stdout_log, "wb") as so, open(stderr_log, "wb") as se:
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=so,
                stderr=se,
                start_new_session=os.name == "posix",
            )
        except OSError as e:
            se.write(f"error: cannot start {argv[0]!r}: {e.strerror or e}\n".encode())
            se.flush()
            return RunResult(
                list(argv),
                cwd,
                out,
                127,
                False,
                timeout,
                0.0,
                stdout_log,
                stderr_log,
                f"error: cannot start {argv[0]!r}: {e.strerror or e}",
                dict(env_set or {}),
            )
        # at the end (a timeout or not), the whole process group goes: nothing it started lives on
        returncode, timed_out = wait_group(proc, timeout)
    seconds = time.monotonic() - start
    stderr = stderr_log.read_text(encoding="utf-8", errors="replace")
    first = first_error_line(stderr, fallback=returncode != 0 and not timed_out)
    return RunResult(
        list(argv),
        cwd,
        out,
        returncode,
        timed_out,
        timeout,
        seconds,
        stdout_log,
        stderr_log,
        first,
        dict(env_set or {}),
    )


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)


def _secs(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"
