"""Application checks: the first error line of real tracebacks (exception groups), and timeouts that end the whole process group."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kernodeck.checks.runner import run_command
from kernodeck.support.firsterror import first_error as first_error_line

GROUP = """\
import builtins

class OutOfMemoryError(RuntimeError):
    pass

OutOfMemoryError.__module__ = "torch"
raise builtins.ExceptionGroup("workers failed", [OutOfMemoryError("CUDA out of memory."), ValueError("x")])
"""


def test_exception_group_traceback_names_the_first_leaf_error(tmp_path: Path) -> None:
    if sys.version_info < (3, 11):  # pragma: no cover
        return
    (tmp_path / "group.py").write_text(GROUP)
    err = subprocess.run([sys.executable, "group.py"], cwd=tmp_path, capture_output=True, text=True).stderr
    assert "Exception Group Traceback" in err
    assert first_error_line(err) == "torch.OutOfMemoryError: CUDA out of memory."


def test_exception_group_without_a_leaf_line_names_the_group() -> None:
    text = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "x.py", line 1, in <module>\n'
        "  | ExceptionGroup: many (2 sub-exceptions)\n"
        "  +-+---------------- 1 ----------------\n"
    )
    assert first_error_line(text) == "ExceptionGroup: many (2 sub-exceptions)"


GRANDCHILD = """\
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "w") as f:
    f.write(str(child.pid))
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    if not Path("/proc/self/stat").exists():  # pragma: no cover
        return
    (tmp_path / "slow.py").write_text(GRANDCHILD)
    pidfile = tmp_path / "child.pid"
    r = run_command(
        [sys.executable, "slow.py", str(pidfile)],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=3,
        out=tmp_path / "out",
    )
    assert r.timed_out and not r.ok
    assert pidfile.is_file(), "the grandchild never started"
    pid = int(pidfile.read_text())
    for _ in range(200):  # the kill is delivered; wait for the exit without asserting a duration
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)
