"""The probe's RECORD check in forked copies (Linux, a single-threaded probe, many files) gives
the same verdicts, statistics and cache as one thread; a copy that fails has its files checked
by the probe itself; without a temporary folder, threads do the work. Run in a fresh interpreter, as the probe runs: a test process has threads,
and the probe never forks from a process that has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.probe import script
from tests.fixtures.record_dist import EXPECTED_PROBLEMS, record_dist

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import copy, json, os, sys
from kernodeck.probe import script

dist = json.loads(sys.argv[1])
script.RACY_NS = 0
script._FORK_MIN_FILES = 1  # this test's 156 files take the forked path
forks = []
real_fork = os.fork

def fork():
    pid = real_fork()
    if pid:
        forks.append(pid)
    return pid

os.fork = fork
parent = os.getpid()
if sys.argv[2] == "failing-copy":
    check = script._check_file

    def in_copies_fails(*job):
        if os.getpid() != parent:
            raise OSError("a copy that fails")
        return check(*job)

    script._check_file = in_copies_fails

if sys.argv[2] == "no-temporary-folder":
    import tempfile

    def no_folder(*a, **k):
        raise OSError("no writable temporary folder")

    tempfile.TemporaryFile = no_folder

def run(threads, where):
    d = copy.deepcopy(dist)
    cache = script.RecordsCache(where, "env", read=True)
    stats = script.check_records([d], cache, False, threads)
    return [stats, d["record_problems"], cache.details]

one = run(1, sys.argv[3] + "/one")
assert not forks
two = run(2, sys.argv[3] + "/two")
print(json.dumps({"forks": len(forks), "one": one, "two": two}))
"""


@pytest.mark.skipif(not script._FORK, reason="forked copies are used on Linux only")
@pytest.mark.parametrize("case", ["copies", "failing-copy", "no-temporary-folder"])
def test_forked_copies_agree_with_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    dist = record_dist(tmp_path / "site")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(dist), case, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["forks"] == (0 if case == "no-temporary-folder" else 2)  # else threads did it
    assert got["one"] == got["two"]
    stats, problems, _details = got["two"]
    assert stats["files"] == 156 and stats["hashed"] == 153
    assert {(p["path"], p["problem"]) for p in problems} == EXPECTED_PROBLEMS


def test_a_process_with_threads_does_not_fork() -> None:
    import threading

    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not script._single_threaded()
    finally:
        stop.set()
        t.join()
