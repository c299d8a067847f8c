"""The probe's RECORD check gives the same verdicts, statistics and cache on worker threads as on
one thread: every kind of problem, files larger than the thread buffer, files taken one at a time
(large) and in runs (small), and a file the cache already proved."""

from __future__ import annotations

import base64
import copy
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from kernodeck.probe import script


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist(site: Path) -> dict[str, Any]:
    files = {f"pkg/small_{k:03d}.py": f"x = {k}\n".encode() for k in range(150)}
    files["pkg/big.bin"] = os.urandom(script._BLOCK + 12345)  # more than one buffer
    files["pkg/mid.bin"] = os.urandom(script._BIG + 7)  # handed out on its own
    files["pkg/exact.bin"] = os.urandom(script._BLOCK)  # exactly one buffer
    meta = site / "pkg-1.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\n")
    rows = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        rows.append(f"{rel},sha256={_b64(data)},{len(data)}")
    rows += [
        f"pkg/gone.py,sha256={_b64(b'gone')},4",
        f"pkg/fifo,sha256={_b64(b'')},0",
        f"pkg/sized.py,sha256={_b64(b'abc')},99",
    ]
    (site / "pkg" / "sized.py").write_bytes(b"abc")
    os.mkfifo(site / "pkg" / "fifo")
    (site / "pkg" / "small_007.py").write_bytes(b"x = 8\n")  # content differs, same size
    big = site / "pkg" / "big.bin"
    edited = bytearray(big.read_bytes())
    edited[-1] ^= 1
    big.write_bytes(bytes(edited))  # differs in its second buffer only
    rows.append(f"{meta.name}/RECORD,,")
    (meta / "RECORD").write_text("\n".join(rows) + "\n")
    return {
        "name": "pkg",
        "version": "1.0",
        "location": str(site),
        "metadata_dir": str(meta),
        "record": str(meta / "RECORD"),
        "shadowed": False,
    }


#: What `_dist` plants: (path, problem) as the RECORD check reports it.
EXPECTED_PROBLEMS = {
    ("pkg/gone.py", "missing"),
    ("pkg/fifo", "not-a-file"),
    ("pkg/sized.py", "size"),
    ("pkg/small_007.py", "hash"),
    ("pkg/big.bin", "hash"),
}


def _run(dist: dict[str, Any], cache_dir: Path, threads: int) -> tuple[Any, Any, Any]:
    d = copy.deepcopy(dist)
    cache = script.RecordsCache(str(cache_dir), "env", read=True)
    stats = script.check_records([d], cache, False, threads)
    return stats, d["record_problems"], cache.details


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_threads_agree_with_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script, "RACY_NS", 0)
    dist = _dist(tmp_path / "site")
    one = _run(dist, tmp_path / "c1", 1)
    four = _run(dist, tmp_path / "c4", 4)
    assert one == four
    stats, problems, details = four
    assert {(p["path"], p["problem"]) for p in problems} == EXPECTED_PROBLEMS
    assert stats["files"] == 156 and stats["hashed"] == 153 and stats["cache_hits"] == 0
    (saved,) = details.values()
    assert "pkg/exact.bin" in saved["files"] and "pkg/gone.py" not in saved["files"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_threads_take_cached_digests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script, "RACY_NS", 0)
    dist = _dist(tmp_path / "site")
    cache = script.RecordsCache(str(tmp_path / "c"), "env", read=True)
    script.check_records([copy.deepcopy(dist)], cache, False, 4)
    cache.save()
    (tmp_path / "site" / "pkg" / "small_001.py").write_bytes(b"x = 9\n")  # changed since
    stats, problems, _ = _run(dist, tmp_path / "c", 4)
    assert stats["hashed"] == 1 and stats["cache_hits"] == 152
    assert ("pkg/small_001.py", "hash") in {(p["path"], p["problem"]) for p in problems}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("enabled", [True, False])
def test_collector_paused_while_files_are_checked_and_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    import gc

    seen: list[bool] = []
    check_file = script._check_file

    def spy(*job: Any) -> Any:
        seen.append(gc.isenabled())
        return check_file(*job)

    monkeypatch.setattr(script, "_check_file", spy)
    dist = _dist(tmp_path / "site")
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        _, problems, _ = _run(dist, tmp_path / "c", 4)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert len(seen) == 156 and not any(seen)  # every file checked with the collector paused
    assert after is enabled  # and the caller's setting is back
    assert ("pkg/small_007.py", "hash") in {(p["path"], p["problem"]) for p in problems}
