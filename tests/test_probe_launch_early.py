"""finish(early=True): a probe that prints its output, closes stdout and goes on (the environment
probe saving its RECORD cache) is not waited for; settle() waits for it, as a later probe start
does; a process that exits, or one whose stdout a descendant holds open, ends as without `early`;
a timeout still kills it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from kernodeck.probe import launch

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups and pipes are read on POSIX")

# prints, ends its stdout as the probe does, then writes a file after a while
GOES_ON = r"""
import os, sys, time
sys.stdout.write("facts\n"); sys.stdout.flush()
null = os.open(os.devnull, os.O_WRONLY); os.dup2(null, 1)
time.sleep(float(sys.argv[2]))
open(sys.argv[1], "w").write("saved")
"""


@posix_only
def test_output_returns_before_the_process_ends_and_settle_waits(tmp_path: Path) -> None:
    marker = tmp_path / "saved"
    proc = launch.spawn([sys.executable, "-c", GOES_ON, str(marker), "1.0"], dict(os.environ))
    done = launch.finish(proc, None, 60, early=True)
    assert done.out == b"facts\n" and done.returncode is None and not done.timed_out
    assert not marker.exists() and proc.returncode is None  # still at work, not reaped
    launch.settle()
    assert marker.read_text() == "saved"
    assert proc.returncode == 0  # reaped by its end thread
    assert not launch._lingering


@posix_only
def test_a_later_probe_start_settles_the_one_still_saving(tmp_path: Path) -> None:
    marker = tmp_path / "saved"
    proc = launch.spawn([sys.executable, "-c", GOES_ON, str(marker), "0.5"], dict(os.environ))
    assert launch.finish(proc, None, 60, early=True).returncode is None
    cmd = [sys.executable, "-c", "print('next')"]
    launch.prestart(cmd)  # waits for the first one's save: the next reads what it wrote
    assert marker.read_text() == "saved"
    nxt = launch.take(cmd)
    assert nxt is not None and launch.finish(nxt, None, 60).out == b"next\n"


@posix_only
def test_a_process_that_fails_is_waited_for_and_reaped() -> None:
    # a crash ends stdout moments before its exit can be seen: no whole line, so no early return
    code = "import sys; sys.stdout.write('{partial'); sys.stderr.write('boom'); sys.exit(3)"
    for _ in range(20):
        proc = launch.spawn([sys.executable, "-c", code], dict(os.environ))
        done = launch.finish(proc, None, 60, early=True)
        assert (done.out, done.err, done.returncode, done.timed_out) == (b"{partial", b"boom", 3, False)
        assert not launch._lingering


@posix_only
def test_stdout_held_by_a_descendant_ends_at_the_exit(tmp_path: Path) -> None:
    # a daemon in a session of its own keeps stdout open: the exit ends the wait, after the grace
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(p.pid))\n"
        "print('out')\n"
    )
    proc = launch.spawn([sys.executable, "-c", code], dict(os.environ))
    started = time.monotonic()
    try:
        done = launch.finish(proc, None, 60, early=True, grace=0.3)
        assert (done.out, done.returncode, done.timed_out) == (b"out\n", 0, False)
        assert time.monotonic() - started < 30
    finally:
        os.kill(int((tmp_path / "pid").read_text()), 9)


@posix_only
def test_timeout_kills_a_process_that_holds_stdout() -> None:
    proc = launch.spawn([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ))
    done = launch.finish(proc, None, 0.5, early=True, grace=0.1)
    assert done.timed_out and done.returncode is not None and done.returncode < 0
