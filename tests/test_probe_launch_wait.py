"""Waiting for a probe process: on Linux a pidfd wakes the wait at the exit itself (no polling
sleeps); a process still running at the deadline is reported as such, and is not reaped."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernodeck.probe import launch

needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform")


def _start(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


@needs_pidfd
def test_exit_wakes_the_wait_without_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = _start(0.2)

    def no_polling(seconds: float) -> None:
        raise AssertionError(f"polled with sleep({seconds})")

    monkeypatch.setattr(time, "sleep", no_polling)  # the module launch polls with
    try:
        assert launch._await_exit(proc, time.monotonic() + 60) is True
        assert proc.returncode is None  # not reaped: its group is killed before it is
    finally:
        assert proc.wait(timeout=60) == 0


def test_deadline_passes_while_it_runs() -> None:
    proc = _start(60)
    try:
        assert launch._await_exit(proc, time.monotonic() + 0.2) is False
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_an_already_reaped_process_counts_as_exited() -> None:
    proc = _start(0)
    proc.wait(timeout=60)
    assert launch._await_exit(proc, time.monotonic() + 5) is True
