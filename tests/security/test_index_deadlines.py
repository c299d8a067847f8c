"""Every run ends: a page body trickling one byte at a time cannot hold a lock past the request
deadline (`KERNODECK_HTTP_TIMEOUT`), and a page over the size cap (`KERNODECK_MAX_PAGE_BYTES`) is
refused with a clear error, and so is metadata over its cap. Each lock runs in a subprocess bounded by a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.errors import IndexError_
from kernodeck.index import IndexClient, IndexSource, ProjectPage
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.hostile_index import HostileServer
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.lock_project import write_manifest

SRC = Path(__file__).resolve().parents[2] / "src"


def _lock(manifest: Path, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "KERNODECK_CACHE_DIR": str(cache),
        "PYTHONPATH": str(SRC),
        "PIP_CONFIG_FILE": os.devnull,
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "kernodeck", "lock", str(manifest), "-q"],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


def _factory(tmp_path: Path) -> IndexFactory:
    f = IndexFactory(tmp_path / "ix")
    f.add_wheel("foo", "1.0")
    return f


def test_slow_body_cannot_hold_a_lock_past_the_request_deadline(tmp_path: Path) -> None:
    # one byte every 0.3 s: a page of a few hundred bytes would take minutes; every byte
    # restarts a per-read timeout, so only a total deadline ends it
    with HostileServer(_factory(tmp_path), slow_pages=0.3) as srv:
        m = write_manifest(tmp_path / "proj", requirements=["foo"], default_url=srv.url())
        proc = _lock(m, tmp_path / "cache", KERNODECK_HTTP_TIMEOUT="2")
    assert proc.returncode == 1, proc.stderr
    assert "did not finish within 2 s" in proc.stderr
    assert "KERNODECK_HTTP_TIMEOUT" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (m.parent / requirements_filename("linux")).exists()


def test_page_over_the_size_cap_is_refused_clearly(tmp_path: Path) -> None:
    with HostileServer(_factory(tmp_path), page_padding=3_000_000) as srv:
        m = write_manifest(tmp_path / "proj", requirements=["foo"], default_url=srv.url())
        proc = _lock(m, tmp_path / "cache", KERNODECK_MAX_PAGE_BYTES="1000000")
        assert proc.returncode == 1, proc.stderr
        assert "larger than the limit of" in proc.stderr and "KERNODECK_MAX_PAGE_BYTES" in proc.stderr
        assert "Traceback" not in proc.stderr
        # the same page under the default cap locks
        ok = _lock(m, tmp_path / "cache2")
        assert ok.returncode == 0, ok.stderr


def test_metadata_over_the_size_cap_is_refused_clearly(tmp_path: Path) -> None:
    f = IndexFactory(tmp_path / "ix")
    f.add_wheel("foo", "1.0", extras={f"x{i}": [f"dep{i}"] for i in range(400)})
    for metadata_files in (True, False):
        with (
            HostileServer(f, metadata_files=metadata_files) as srv,
            IndexClient(cache_dir=tmp_path / f"c{metadata_files}", max_metadata_bytes=4000) as c,
        ):
            page = c.project_page(IndexSource("default", srv.url()), "foo")
            assert isinstance(page, ProjectPage)
            with pytest.raises(IndexError_, match="limit") as e:
                c.metadata(page.files[0])
            assert "KERNODECK_MAX_METADATA_BYTES" in (e.value.hint or "")


def test_slow_body_cannot_hold_a_lock_past_the_lock_deadline(tmp_path: Path) -> None:
    with HostileServer(_factory(tmp_path), slow_pages=0.3) as srv:
        m = write_manifest(tmp_path / "proj", requirements=["foo"], default_url=srv.url())
        proc = _lock(m, tmp_path / "cache", KERNODECK_LOCK_TIMEOUT="2")
    assert proc.returncode == 1, proc.stderr
    assert "ran past the time this lock may spend on indexes" in proc.stderr
    assert "KERNODECK_LOCK_TIMEOUT" in proc.stderr and "Traceback" not in proc.stderr
