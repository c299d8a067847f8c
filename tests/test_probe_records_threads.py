"""The probe's RECORD check gives the same verdicts, statistics and cache on worker threads as on
one thread: every kind of problem, files larger than the thread buffer, files taken one at a time
(large) and in runs (small), and a file the cache already proved."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from kernodeck.probe import script
from tests.fixtures.record_dist import EXPECTED_PROBLEMS, record_dist


def _run(dist: dict[str, Any], cache_dir: Path, threads: int) -> tuple[Any, Any, Any]:
    d = copy.deepcopy(dist)
    cache = script.RecordsCache(str(cache_dir), "env", read=True)
    stats = script.check_records([d], cache, False, threads)
    return stats, d["record_problems"], cache.details


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_threads_agree_with_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script, "RACY_NS", 0)
    dist = record_dist(tmp_path / "site")
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
    dist = record_dist(tmp_path / "site")
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
    dist = record_dist(tmp_path / "site")
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


@pytest.mark.parametrize(("big", "small"), [(0, 1), (3, 10), (73, 42_000), (3_000, 200_000)])
def test_spans_cover_every_job_once_and_fit_one_pipe_page(big: int, small: int) -> None:
    # jobs as _run_checks gets them: largest first, RECORD's size second to last
    jobs = [("x", str(script._BIG + n), None) for n in range(big, 0, -1)]
    jobs += [("x", str(n % 900), None) for n in range(small)]
    spans = script._spans(jobs)
    assert [k for start, end in spans for k in range(start, end)] == list(range(len(jobs)))
    assert len(spans) * 4 <= 4096  # the span numbers are written to a pipe before any reader
    if big <= script._SPANS // 2:
        assert all(end - start == 1 for start, end in spans[:big])  # large files alone
    assert all(end - start >= min(script._RUN, small) for start, end in spans[big:-1])
