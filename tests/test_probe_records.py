"""The RECORD check and its cache: a warm cache reads no file again, yet every edit is still seen
(an in-place edit with the mtime put back, a replaced file, a missing file, a new version)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name

from kernodeck.fingerprint import FingerprintCache
from kernodeck.probe import script
from kernodeck.probe.runner import ProbeRequest, RealProbe


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _install(site: Path, name: str, version: str, files: dict[str, bytes]) -> dict[str, Any]:
    """A distribution as an installer leaves it: its files, a .dist-info with METADATA and RECORD."""
    site.mkdir(parents=True, exist_ok=True)
    for old in site.glob(f"{name}-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    meta = site / f"{name}-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    lines = []
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        quoted = f'"{rel}"' if "," in rel else rel
        lines.append(f"{quoted},sha256={_b64(data)},{len(data)}")
    # METADATA is not listed: an unhashed row is a problem (only RECORD and .pyc may be)
    lines.append(f"{meta.name}/RECORD,,")
    (meta / "RECORD").write_text("\n".join(lines) + "\n")
    return {
        "name": name,
        "version": version,
        "location": str(site),
        "metadata_dir": str(meta),
        "record": str(meta / "RECORD"),
        "shadowed": False,
    }


def _check(
    dist: dict[str, Any], cache_dir: Path, *, rehash: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cache = script.RecordsCache(str(cache_dir), "test-env", read=not rehash)
    stats = script.check_records([dist], cache, rehash, threads=1)
    cache.save()
    return stats, dist["record_problems"]


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written by the test are a moment old; let the cache keep their digests anyway."""
    monkeypatch.setattr(script, "RACY_NS", 0)


FILES = {
    "demo/__init__.py": b"VALUE = 1\n",
    "demo/core.py": b"def f():\n    return 2\n",
    "demo/data, with comma.txt": b"x" * 100,
}


def test_warm_cache_reads_nothing_and_sees_an_edit_with_mtime_restored(
    tmp_path: Path, no_racy_window: None
) -> None:
    dist = _install(tmp_path / "site", "demo", "1.0", FILES)
    cache = tmp_path / "cache"
    stats, problems = _check(dist, cache)
    assert problems == [] and stats["files"] == 3 and stats["hashed"] == 3
    stats, problems = _check(dist, cache)
    assert problems == [] and stats["hashed"] == 0 and stats["cache_hits"] == 3

    # same size, mtime put back: the ctime still moves
    target = tmp_path / "site" / "demo" / "core.py"
    st = target.stat()
    target.write_bytes(b"def f():\n    return 3\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
    stats, problems = _check(dist, cache)
    assert [(p["path"], p["problem"]) for p in problems] == [("demo/core.py", "hash")]
    assert stats["hashed"] == 1 and stats["cache_hits"] == 2  # only the changed file is read
    # and it stays caught on the next run, from the cache
    stats, problems = _check(dist, cache)
    assert [(p["path"], p["problem"]) for p in problems] == [("demo/core.py", "hash")]
    assert stats["hashed"] == 0


def test_replaced_file_and_missing_file_after_a_warm_cache(tmp_path: Path, no_racy_window: None) -> None:
    dist = _install(tmp_path / "site", "demo", "1.0", FILES)
    cache = tmp_path / "cache"
    _check(dist, cache)
    # a file replaced by another inode with the same size and mtime
    target = tmp_path / "site" / "demo" / "__init__.py"
    st = target.stat()
    other = tmp_path / "other"
    other.write_bytes(b"VALUE = 9\n")
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(other, target)
    _, problems = _check(dist, cache)
    assert [(p["path"], p["problem"]) for p in problems] == [("demo/__init__.py", "hash")]
    target.unlink()
    _, problems = _check(dist, cache)
    assert [(p["path"], p["problem"]) for p in problems] == [("demo/__init__.py", "missing")]


def test_new_version_is_checked_against_its_own_record(tmp_path: Path, no_racy_window: None) -> None:
    site = tmp_path / "site"
    cache = tmp_path / "cache"
    _check(_install(site, "demo", "1.0", FILES), cache)
    upgraded = {**FILES, "demo/core.py": b"def f():\n    return 20\n"}
    dist = _install(site, "demo", "2.0", upgraded)
    stats, problems = _check(dist, cache)
    assert problems == [] and stats["hashed"] == 3  # a new dist-info: nothing is taken on trust
    # a half-done upgrade: the new RECORD, an old file
    (site / "demo" / "core.py").write_bytes(FILES["demo/core.py"])
    stats, problems = _check(dist, cache)
    assert [(p["path"], p["problem"]) for p in problems] == [("demo/core.py", "size")]


def test_rehash_reads_every_file_and_a_corrupt_cache_is_ignored(tmp_path: Path, no_racy_window: None) -> None:
    dist = _install(tmp_path / "site", "demo", "1.0", FILES)
    cache = tmp_path / "cache"
    _check(dist, cache)
    stats, _ = _check(dist, cache, rehash=True)
    assert stats["hashed"] == 3 and stats["cache_hits"] == 0
    for f in cache.iterdir():
        f.write_text("{not json")
    stats, problems = _check(dist, cache)
    assert problems == [] and stats["hashed"] == 3


@pytest.mark.parametrize("damaged", ["not hex at all", "zz" * 32, 12345, None])
def test_a_damaged_cached_digest_is_hashed_again(tmp_path: Path, no_racy_window: None, damaged: Any) -> None:
    """A cache entry whose stat key still holds but whose digest is no sha256 hex is neither
    trusted nor reported as a mismatch: the file is read again."""
    import json

    dist = _install(tmp_path / "site", "demo", "1.0", FILES)
    cache = tmp_path / "cache"
    _check(dist, cache)
    (detail,) = cache.glob("dist-*.json")
    saved = json.loads(detail.read_text())
    saved["files"]["demo/core.py"][4] = damaged
    detail.write_text(json.dumps(saved))
    (index,) = cache.glob("env-*.json")
    index.unlink()  # not proven as a whole: the files are checked one by one
    stats, problems = _check(dist, cache)
    assert problems == [] and stats["hashed"] == 1 and stats["cache_hits"] == 2
    repaired = json.loads(detail.read_text())["files"]["demo/core.py"][4]
    assert repaired == hashlib.sha256(FILES["demo/core.py"]).hexdigest()


def test_recent_files_are_not_trusted_from_the_cache(tmp_path: Path) -> None:
    """A file changed within the racy window could change again within one timestamp tick."""
    dist = _install(tmp_path / "site", "demo", "1.0", FILES)
    cache = tmp_path / "cache"
    _check(dist, cache)
    stats, problems = _check(dist, cache)
    assert problems == [] and stats["hashed"] == 3


def test_record_rows_fast_path_matches_csv(tmp_path: Path) -> None:
    import csv

    text = 'a/b.py,sha256=abc,12\n"a/c, d.py",sha256=def,3\nx.dist-info/RECORD,,\n'
    (tmp_path / "R").write_text(text)
    (tmp_path / "S").write_text(text.replace('"a/c, d.py"', "a/c.py"))
    assert script._record_rows(str(tmp_path / "R")) == list(csv.reader(text.splitlines()))
    plain = (tmp_path / "S").read_text()
    assert script._record_rows(str(tmp_path / "S")) == list(csv.reader(plain.splitlines()))


def _venv_with_demo(tmp_path: Path) -> tuple[Path, Path]:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    site = next((tmp_path / "v" / "lib").glob("python3*/site-packages"))
    _install(site, "demo", "1.0", FILES)
    return tmp_path / "v" / "bin" / "python", site


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")
def test_real_probe_warm_cache_then_edit(tmp_path: Path) -> None:
    python, site = _venv_with_demo(tmp_path)
    time.sleep(script.RACY_NS / 1e9 + 0.1)  # older than the racy window, so that digests are kept
    probe = RealProbe(python, cache=FingerprintCache.open(tmp_path / "cache"))
    request = ProbeRequest(torch=False, locate=("demo:demo/core.py",))
    facts = probe.collect(request)
    assert facts.records.hashed == 3 and not facts.dists()[canonicalize_name("demo")].record_problems
    assert facts.located[0].found  # the manifest-dependent part of the request arrives on stdin
    facts = probe.collect(request)
    assert facts.records.hashed == 0 and facts.records.cache_hits == 3
    assert (tmp_path / "cache" / "records-v1").is_dir()

    target = site / "demo" / "core.py"
    st = target.stat()
    target.write_bytes(b"def f():\n    return 3\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    facts = probe.collect(request)
    problems = facts.dists()[canonicalize_name("demo")].record_problems
    assert [(p.path, p.problem) for p in problems] == [("demo/core.py", "hash")]
    # without a cache the answer is the same
    facts = RealProbe(python, cache=FingerprintCache.open(enabled=False)).collect(request)
    assert [(p.path, p.problem) for p in facts.dists()[canonicalize_name("demo")].record_problems] == [
        ("demo/core.py", "hash")
    ]
    assert facts.records.hashed == 3


def test_no_torch_means_no_torch_process(tmp_path: Path) -> None:
    python, _ = _venv_with_demo(tmp_path)
    probe = RealProbe(python, cache=FingerprintCache.open(enabled=False))
    facts = probe.collect(ProbeRequest(torch=False, records=False))
    assert facts.torch_files.installed is False and facts.torch_files.importable is False
    torch = probe.collect_torch(ProbeRequest())
    assert torch.status == "not-installed" and "No module named 'torch'" in (torch.error or "")
