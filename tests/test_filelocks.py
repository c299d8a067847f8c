"""Inter-process file locks (`kernodeck.filelocks`): another process and another thread are kept
out while the lock is held, a timeout hands back False and runs the block unlocked, and a process
that dies holding a lock leaves nothing behind. The index cache's named locks use it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from kernodeck.filelocks import held
from kernodeck.fingerprint import CACHE_FILE, FingerprintCache
from kernodeck.index.cache import IndexCache

_HOLD = """
import sys, time
from kernodeck.filelocks import held
with held(sys.argv[1], timeout=10) as got:
    print("held" if got else "missed", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_another_process_is_kept_out_until_the_lock_is_released(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    proc = _holder(path, 1.0)
    try:
        with held(path, timeout=0.2) as got:
            assert got is False  # the other process still holds it: the block runs unlocked
        start = time.monotonic()
        with held(path, timeout=30) as got:
            waited = time.monotonic() - start
            assert got is True
        assert proc.wait(timeout=30) == 0
        assert waited > 0.2  # it waited for the holder to let go
    finally:
        proc.kill()


def test_a_process_killed_while_holding_leaves_no_lock_behind(tmp_path: Path) -> None:
    path = tmp_path / "b.lock"
    proc = _holder(path, 60)
    proc.kill()
    proc.wait(timeout=30)
    with held(path, timeout=5) as got:
        assert got is True


def test_two_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    path = tmp_path / "c.lock"
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(20):
            with held(path, timeout=30) as got:
                assert got
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.001)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1


def test_the_index_cache_lock_waits_for_another_process(tmp_path: Path) -> None:
    """A named lock of the index cache is a file lock under `locks/`: a second process holding
    that file makes the cache wait (and go ahead unlocked once its timeout passes)."""
    cache = IndexCache(tmp_path / "cache")
    with cache.lock("page:https://example.invalid/simple:demo"):
        pass
    files = list((tmp_path / "cache").rglob("locks/*.lock"))
    assert len(files) == 1
    proc = _holder(files[0], 60)
    try:
        start = time.monotonic()
        with cache.lock("page:https://example.invalid/simple:demo", timeout=0.3):
            waited = time.monotonic() - start
        assert waited >= 0.3
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_the_fingerprint_cache_is_not_written_while_another_process_holds_its_lock(tmp_path: Path) -> None:
    """Its read-merge-write would drop the other process's entries: past the timeout the save is
    skipped (and done on a later save, once the lock is free)."""
    (tmp_path / "f").write_bytes(b"x" * 1000)
    cache = FingerprintCache.open(tmp_path / "cache")
    digest = cache.file_sha256(tmp_path / "f")
    (tmp_path / "cache").mkdir(exist_ok=True)
    proc = _holder(tmp_path / "cache" / (CACHE_FILE + ".lock"), 60)
    try:
        cache.save(timeout=0.2)
        assert not (tmp_path / "cache" / CACHE_FILE).exists()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    cache.save(timeout=5)
    again = FingerprintCache.open(tmp_path / "cache")
    assert again.file_sha256(tmp_path / "f") == digest and again.stats.hits == 1
