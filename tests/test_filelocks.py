"""Inter-process file locks (`kernodeck.support.filelocks`): another process and another thread are kept
out while the lock is held, a timeout hands back False and runs the block unlocked, and a process
that dies holding a lock leaves nothing behind. The index cache's named locks use it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from kernodeck.fingerprint import CACHE_FILE, FingerprintCache
from kernodeck.index.cache import IndexCache
from kernodeck.support.filelocks import held, held_slot

_HOLD = """
import sys, time
from kernodeck.support.filelocks import held, held_slot
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


_HOLD_SLOT = """
import sys, time
from kernodeck.support.filelocks import held_slot
with held_slot(sys.argv[1], int(sys.argv[3]), timeout=float(sys.argv[4])) as got:
    print("held" if got else "missed", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _slot_holder(path: Path, slot: int, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_SLOT, str(path), str(seconds), str(slot), "10"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_index_cache_lock_waits_for_another_process(tmp_path: Path) -> None:
    """A named lock of the index cache is one byte of one file: a second process holding that
    byte makes the cache wait (and go ahead unlocked once its timeout passes); a process holding
    another name's byte does not."""
    cache = IndexCache(tmp_path / "cache")
    name = "page:https://example.invalid/simple:demo"
    with cache.lock(name):
        pass
    path, slot = cache.lock_slot(name)
    other = cache.lock_slot("page:https://example.invalid/simple:other")[1]
    assert other != slot
    proc = _slot_holder(path, slot, 60)
    try:
        start = time.monotonic()
        with cache.lock(name, timeout=0.3):
            waited = time.monotonic() - start
        assert waited >= 0.3
    finally:
        proc.kill()
        proc.wait(timeout=30)
    proc = _slot_holder(path, other, 60)
    try:
        start = time.monotonic()
        with cache.lock(name, timeout=30):
            waited = time.monotonic() - start
        assert waited < 0.3
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_named_locks_create_one_file_whatever_the_number_of_names(tmp_path: Path) -> None:
    """A cold lock takes one lock per page and per metadata file: they must not cost a new file
    (an inode) each."""
    cache = IndexCache(tmp_path / "cache")
    for i in range(300):
        with cache.lock(f"meta:{i}"):
            pass
    made = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert made == [cache.lock_slot("meta:0")[0]]


def test_a_byte_shared_by_two_threads_is_held_until_the_last_leaves(tmp_path: Path) -> None:
    """Record locks belong to the process: two threads on one byte are counted, and the byte is
    given back to other processes only when both have left."""
    path = tmp_path / "s.lock"
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def second() -> None:
        first_in.wait(10)
        with held_slot(path, 7, timeout=5) as got:
            assert got is True
            second_in.set()
            first_out.wait(10)
            probe = subprocess.run(
                [sys.executable, "-c", _HOLD_SLOT, str(path), "0", "7", "0.2"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            results.append(probe.stdout.strip())

    results: list[str] = []
    t = threading.Thread(target=second)
    t.start()
    with held_slot(path, 7, timeout=5) as got:
        assert got is True
        first_in.set()
        second_in.wait(10)
    first_out.set()
    t.join(60)
    assert results == ["missed"]  # the first thread left, the second still holds the byte
    done = subprocess.run(
        [sys.executable, "-c", _HOLD_SLOT, str(path), "0", "7", "0.2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "held"


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
