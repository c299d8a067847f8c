"""The probe's warm RECORD path: a distribution proven by its RECORD's stat key and its files'
stat summary is checked without reading its RECORD again, and a file changed after a warm run is
still caught, also when its size is unchanged and only its mtime/ctime moved."""

from __future__ import annotations

import base64
import copy
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from kernodeck.probe import script
from tests.fixtures.record_dist import write_record


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


FILES = {"demo/__init__.py": b"VALUE = 1\n", "demo/core.py": b"def f():\n    return 2\n"}


def _install(site: Path) -> dict[str, Any]:
    meta = site / "demo-1.0.dist-info"
    meta.mkdir(parents=True)
    lines = []
    for rel, data in FILES.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        lines.append(f"{rel},sha256={_b64(data)},{len(data)}")
    return write_record(site, meta, "demo", lines)


def _check(dist: dict[str, Any], cache_dir: Path) -> dict[str, Any]:
    d = copy.deepcopy(dist)
    cache = script.RecordsCache(str(cache_dir), "env", read=True)
    stats = script.check_records([d], cache, False, 1, [dist["location"]])
    cache.save()
    return {**stats, "problems": d["record_problems"], "record_files": d["record_files"]}


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script, "RACY_NS", 0)


def test_warm_run_reads_no_record_and_counts_every_file(
    tmp_path: Path, no_racy_window: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = _install(tmp_path / "site")
    first = _check(dist, tmp_path / "c")
    assert first["hashed"] == 2 and first["problems"] == []
    read: list[str] = []
    real = script._record_rows

    def counting(path: str) -> list[list[str]]:
        read.append(path)
        return real(path)

    monkeypatch.setattr(script, "_record_rows", counting)
    warm = _check(dist, tmp_path / "c")
    assert read == []  # neither to check the files nor to search for unlisted ones
    assert warm["hashed"] == 0 and warm["cache_hits"] == 2 and warm["files"] == 2
    assert warm["record_files"] == 2 and warm["problems"] == [] and warm["unlisted"] == []


def test_same_size_change_after_a_warm_run_is_caught(tmp_path: Path, no_racy_window: None) -> None:
    dist = _install(tmp_path / "site")
    _check(dist, tmp_path / "c")
    assert _check(dist, tmp_path / "c")["cache_hits"] == 2  # the warm path ran
    core = tmp_path / "site" / "demo" / "core.py"
    st = os.stat(core)
    core.write_bytes(b"def f():\n    return 3\n")  # same size
    assert os.stat(core).st_size == st.st_size
    os.utime(core, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # mtime moved (ctime too)
    out = _check(dist, tmp_path / "c")
    assert [(p["path"], p["problem"]) for p in out["problems"]] == [("demo/core.py", "hash")]
    assert out["hashed"] == 1


def test_file_added_after_a_warm_run_is_reported_unlisted(tmp_path: Path, no_racy_window: None) -> None:
    dist = _install(tmp_path / "site")
    _check(dist, tmp_path / "c")
    assert _check(dist, tmp_path / "c")["unlisted"] == []
    (tmp_path / "site" / "demo" / "extra.py").write_bytes(b"x = 1\n")
    out = _check(dist, tmp_path / "c")
    assert [u["path"] for u in out["unlisted"]] == ["demo/extra.py"]
    assert out["problems"] == []
