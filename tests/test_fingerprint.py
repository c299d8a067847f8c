from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from kernodeck.fingerprint import CACHE_FILE, FingerprintCache, fingerprint, sha256_file
from kernodeck.support.envvars import cache_dir


def test_file_digest_matches_hashlib(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f", block_size=1 << 20) == hashlib.sha256(data).hexdigest()
    assert fingerprint(tmp_path / "f").sha256 == hashlib.sha256(data).hexdigest()


def _tree(root: Path) -> None:
    (root / "b").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    (root / "b" / "z.bin").write_bytes(b"\0\1")
    (root / "B.txt").write_text("upper sorts first\n")


def test_directory_digest_is_documented_shell_pipeline(tmp_path: Path) -> None:
    _tree(tmp_path / "d")
    fp = fingerprint(tmp_path / "d")
    assert fp.kind == "dir" and fp.files == 3
    shell = subprocess.run(
        "cd d && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum",
        shell=True,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    if shell.returncode == 0 and shell.stdout:
        assert fp.sha256 == shell.stdout.split()[0]
    # the digest does not depend on where the directory is
    _tree(tmp_path / "elsewhere" / "d")
    assert fingerprint(tmp_path / "elsewhere" / "d").sha256 == fp.sha256


def test_cache_skips_unchanged_files_and_sees_changes(tmp_path: Path) -> None:
    f = tmp_path / "weights.bin"
    f.write_bytes(os.urandom(1 << 20))
    c1 = FingerprintCache.open(tmp_path / "cache")
    first = c1.file_sha256(f)
    c1.save()
    assert (tmp_path / "cache" / CACHE_FILE).exists()
    c2 = FingerprintCache.open(tmp_path / "cache")
    assert c2.file_sha256(f) == first
    assert c2.stats.bytes_hashed == 0 and c2.stats.hits == 1  # not read again
    f.write_bytes(os.urandom(1 << 20))
    c3 = FingerprintCache.open(tmp_path / "cache")
    assert c3.file_sha256(f) != first and c3.stats.misses == 1
    c4 = FingerprintCache.open(tmp_path / "cache", rehash=True)
    c4.file_sha256(f)
    assert c4.stats.bytes_hashed == 1 << 20  # --rehash forces a read


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path


def test_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILE).write_text("{not json")
    (tmp_path / "f").write_text("x")
    c = FingerprintCache.open(tmp_path)
    assert c.file_sha256(tmp_path / "f") == hashlib.sha256(b"x").hexdigest()
    c.save()
    assert FingerprintCache.open(tmp_path).entries
