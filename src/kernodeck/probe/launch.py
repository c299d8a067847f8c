"""Starting the environment probe early, before the manifest is read.

The probe (probe/script.py) runs in its own process under the target interpreter; its longest
part, checking every installed file against RECORD, does not depend on the manifest. `prestart`
launches it as soon as the interpreter (chosen by kernodeck.interpreters) and the selected layers
are known, so that it runs while Kernodeck imports its modules and loads the manifest; the probe then reads the manifest-dependent
rest of the request from stdin (`--request-stdin`). `RealProbe` takes a prestarted process whose
command line equals the one it would run, else starts its own.

This module imports only the standard library (and kernodeck.layers, kernodeck.errors): importing it costs nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernodeck.layers import FACT_LAYERS, Layer, selected

PROBE_DIR = Path(__file__).resolve().parent
SCRIPT = PROBE_DIR / "script.py"

#: Sub-directory of the cache directory holding the RECORD verification cache (see script.py).
RECORDS_CACHE = "records-v1"

_started: dict[tuple[str, ...], subprocess.Popen[bytes]] = {}


def probe_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"
    env.pop("PYTHONPATH", None)
    return env


#: `python -I -c RUN_CACHED SCRIPT ARGS...` runs SCRIPT as `python -I SCRIPT ARGS...` would, from
#: its cached bytecode: compiled once per interpreter version and kept in __pycache__ beside it,
#: as imports are (a script run by path is compiled at every start: 23 ms for the probe). The
#: empty path entry that `-c` puts first before Python 3.11 (the working folder) is taken away.
#: Plain syntax: an interpreter too old for the script still says why (see runner._TOO_OLD).
RUN_CACHED = (
    "import sys\n"
    "if sys.path[:1] == ['']: del sys.path[0]\n"
    "import __main__\n"
    "from importlib.machinery import SourceFileLoader\n"
    "sys.argv = sys.argv[1:]\n"
    "__main__.__file__ = sys.argv[0]\n"
    "exec(SourceFileLoader('__main__', sys.argv[0]).get_code('__main__'), __main__.__dict__)\n"
)


def run_script(python: str, script: Path) -> list[str]:
    """The start of a command line that runs `script` under `python`, isolated (-I), from its
    cached bytecode (RUN_CACHED)."""
    return [python, "-I", "-c", RUN_CACHED, str(script)]


def script_command(
    python: str, *, records: bool, rehash: bool, records_cache: Path | None, smi: bool = True
) -> list[str]:
    """The probe's command line; the rest of the request goes to its stdin."""
    cmd = [*run_script(python, SCRIPT), "--request-stdin"]
    if records:
        cmd.append("--records")
        if rehash:
            cmd.append("--rehash")
        if records_cache is not None:
            cmd += ["--records-cache", str(records_cache)]
    if not smi:
        cmd.append("--no-smi")
    return cmd


def spawn(
    cmd: list[str], env: dict[str, str] | None = None, *, cwd: str | os.PathLike[str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a probe in its own process group (session), so that a timeout ends all it started.
    Probes that printed their output and still save their cache are waited for first (settle),
    so that this one reads what they write."""
    settle()
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=probe_env() if env is None else env,
        start_new_session=os.name == "posix",
    )


#: After a probe exits, how long its output pipes may stay open (held by something it started).
PIPE_GRACE = 2.0


@dataclass
class Finished:
    out: bytes
    err: bytes
    returncode: int | None
    timed_out: bool


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group a probe leads (itself and whatever it started and left there)."""
    if os.name == "posix":
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
            return
    with contextlib.suppress(OSError):
        proc.kill()


def _await_exit(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait until the process exits (True) or the deadline passes (False), without reaping it.
    Where Linux gives a pidfd, woken by the exit itself; elsewhere by polling (1 ms, doubling up
    to 50 ms: on average some 25 ms late, which a pidfd saves every probe)."""
    _sleep_until_exit(proc, deadline)
    delay = 0.001
    # os.waitid is missing on macOS before Python 3.13: there the leader is reaped by poll(), and
    # its group id is then only very unlikely (not impossibly) reused before the group is killed
    waitid = getattr(os, "waitid", None)
    while True:
        if waitid is None:
            if proc.poll() is not None:
                return True
        else:
            try:
                if waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return True
            except ChildProcessError:  # already reaped
                return True
        now = time.monotonic()
        if now >= deadline:
            return False
        time.sleep(min(delay, deadline - now))
        delay = min(delay * 2, 0.05)


def _sleep_until_exit(proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Sleep until the process exits or the deadline passes, on a pidfd (Linux 5.3+), which
    becomes readable at the exit. Returns at once where there is none (the caller polls);
    whether the process exited is then told by waitid, as without a pidfd."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return
    import select

    try:
        fd = pidfd_open(proc.pid)
    except OSError:  # no pidfd here (old kernel, seccomp), or the process is already reaped
        return
    try:
        select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    except (OSError, ValueError):
        return
    finally:
        os.close(fd)


def wait_group(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, bool]:
    """Wait for a process started with `start_new_session` (output not on pipes), at most
    `timeout` seconds; then kill its whole group, whatever it left running, and reap it.
    Returns (exit status, whether it timed out)."""
    if os.name != "posix":  # pragma: no cover
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(), True
    exited = _await_exit(proc, time.monotonic() + timeout)
    kill_group(proc)
    return proc.wait(), not exited


def finish(
    proc: subprocess.Popen[bytes],
    data: bytes | None,
    timeout: float,
    *,
    grace: float = PIPE_GRACE,
    early: bool = False,
) -> Finished:
    """Send `data`, read stdout and stderr, and end within `timeout` (plus `grace`) whatever happens.

    `Popen.communicate` waits for the end of its pipes, which a descendant that keeps them open
    (a daemon forked by the program, in another session even) can hold for ever. Here the pipes
    are read by threads; once the process has exited they get `grace` seconds, then its process
    group is killed and whatever is still unread is left behind. At the timeout the whole group
    is killed. The group leader is reaped only after its group was killed, so that its id cannot
    name another group meanwhile.

    `early=True`: a process that closes its stdout after a whole line and goes on (the environment
    probe, which saves its cache after it printed the facts) is not waited for: its output is
    returned with returncode None, and the rest (exit, group, reaping; the same timeout) happens on a thread
    that `settle()` joins, as do every later probe start and this process's exit.
    """
    if os.name != "posix":  # pragma: no cover - no process groups to kill
        try:
            out, err = proc.communicate(data, timeout=timeout)
            return Finished(out, err, proc.returncode, False)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            return Finished(out, err, proc.returncode, True)
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}
    readers: dict[str, threading.Thread] = {}
    for name, pipe in (("out", proc.stdout), ("err", proc.stderr)):
        if pipe is None:
            continue
        # The reader owns a duplicate of the pipe: closing the pipe here can never make it read
        # from a descriptor number that meanwhile names another file.
        fd = os.dup(pipe.fileno())

        def read(fd: int = fd, sink: list[bytes] = chunks[name]) -> None:
            try:
                while True:
                    block = os.read(fd, 1 << 16)
                    if not block:
                        return
                    sink.append(block)
            except OSError:
                return
            finally:
                os.close(fd)

        t = threading.Thread(target=read, name=f"kernodeck-probe-{name}", daemon=True)
        t.start()
        readers[name] = t
    if proc.stdin is not None:
        stdin = proc.stdin

        def write() -> None:
            with contextlib.suppress(OSError, ValueError):  # a probe that exits early closes its end
                if data:
                    stdin.write(data)
                stdin.close()

        threading.Thread(target=write, name="kernodeck-probe-in", daemon=True).start()
    deadline = time.monotonic() + timeout
    if early and "out" in readers:
        return _finish_early(proc, readers, chunks, deadline, grace)
    returncode, exited = _end(proc, readers, deadline, grace)
    return Finished(b"".join(chunks["out"]), b"".join(chunks["err"]), returncode, not exited)


def _finish_early(
    proc: subprocess.Popen[bytes],
    readers: dict[str, threading.Thread],
    chunks: dict[str, list[bytes]],
    deadline: float,
    grace: float,
) -> Finished:
    """finish(early=True): the end runs on a thread from the start; this one waits for the end of
    stdout or the exit, whichever comes first (a descendant may hold stdout open: then the exit)."""
    woken = threading.Event()
    ended: list[tuple[int, bool]] = []
    exited: list[bool] = []

    def on_exit(by_itself: bool) -> None:
        exited.append(by_itself)
        woken.set()

    def end() -> None:
        try:
            ended.append(_end(proc, readers, deadline, grace, on_exit))
        finally:
            if not exited:  # _end failed before the exit: the waiter is woken all the same
                on_exit(False)

    def watch_stdout(reader: threading.Thread = readers["out"]) -> None:
        reader.join()
        woken.set()

    rest = threading.Thread(target=end, name="kernodeck-probe-end", daemon=True)
    rest.start()
    threading.Thread(target=watch_stdout, name="kernodeck-probe-eof", daemon=True).start()
    woken.wait()
    if not exited and chunks["out"] and chunks["out"][-1].endswith(b"\n"):
        # stdout ended after a whole line, the process goes on: its end is settle()'s (a crash
        # ends stdout before its exit is seen: nothing or a partial line, waited for below)
        if not _lingering:
            atexit.register(settle)
        _lingering.append(rest)
        return Finished(b"".join(chunks["out"]), b"".join(chunks["err"]), None, False)
    rest.join()
    returncode, by_itself = ended[0] if ended else (proc.wait(), False)
    return Finished(b"".join(chunks["out"]), b"".join(chunks["err"]), returncode, not by_itself)


def _end(
    proc: subprocess.Popen[bytes],
    readers: dict[str, threading.Thread],
    deadline: float,
    grace: float,
    on_exit: Callable[[bool], None] | None = None,
) -> tuple[int, bool]:
    """finish's end: wait for the exit until `deadline` (then `on_exit(exited)`), give the pipes
    `grace` seconds, kill the group, reap the leader, close the pipes. (exit status, whether it
    exited by itself)"""
    exited = _await_exit(proc, deadline)
    if on_exit is not None:
        on_exit(exited)
    if exited:
        end = min(deadline, time.monotonic() + grace)
        for t in readers.values():
            t.join(max(0.0, end - time.monotonic()))
    kill_group(proc)  # the leader is a zombie or alive: its id still names this group
    for t in readers.values():
        t.join(0.5 if exited else grace)
    returncode = proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    return returncode, exited


#: The ends of probes that printed their output and went on (finish(early=True)).
_lingering: list[threading.Thread] = []


def settle() -> None:
    """Wait for every probe that printed its output and went on (each within its own timeout):
    before a new probe starts, so that it reads the cache they write, and at exit."""
    while _lingering:
        _lingering.pop(0).join()


def prestart(cmd: list[str]) -> None:
    """Start the probe now; `take(cmd)` hands it over. Never raises: a probe that cannot start
    here is started (and its error reported) by RealProbe."""
    key = tuple(cmd)
    if key in _started:
        return
    try:
        _started[key] = spawn(cmd)
    except OSError:
        return
    if len(_started) == 1:
        atexit.register(_reap)


def take(cmd: list[str]) -> subprocess.Popen[bytes] | None:
    """The prestarted probe with exactly this command line, if any (each is taken once)."""
    return _started.pop(tuple(cmd), None)


def discard(cmd: list[str]) -> None:
    """Stop a prestarted probe nobody took (the run failed before it needed the facts)."""
    proc = take(cmd)
    if proc is not None:
        finish(proc, None, 0)


def _reap() -> None:
    """Probes started for a run that ended before it needed them (bad manifest, usage error)."""
    for proc in list(_started.values()):
        finish(proc, None, 0)
    _started.clear()


def records_cache_dir(cache_dir: Path | None) -> Path | None:
    return cache_dir / RECORDS_CACHE if cache_dir is not None else None


def wants_facts(only: tuple[str, ...] | list[str], skip: tuple[str, ...] | list[str]) -> tuple[bool, bool]:
    """(whether the selected layers need the environment probe, whether they check RECORD)."""
    chosen = selected(only, skip)
    return bool(FACT_LAYERS & set(chosen)), Layer.PACKAGES in chosen
