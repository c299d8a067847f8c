"""Against the real default index (pip's configured or built-in one). Run with `make test-live`.

Set KERNODECK_LIVE_INDEX_URL to aim at another index (tests otherwise ignore the host pip config).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernodeck.index import Accepted, IndexClient, IndexSource, ProjectPage, evaluate
from kernodeck.index.sources import default_index_url
from kernodeck.targets import Target

pytestmark = pytest.mark.live


def _source() -> IndexSource:
    return IndexSource("default", os.environ.get("KERNODECK_LIVE_INDEX_URL") or default_index_url())


def test_small_project_page_and_metadata(tmp_path: Path) -> None:
    target = Target.build(name="linux", os="linux", arch="x86_64", python="3.11")
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        page = c.project_page(_source(), "six")
        assert isinstance(page, ProjectPage) and page.files
        wheels = [
            r
            for f in page.files
            if isinstance(r := evaluate(f, target, allow_sdist=False, exclude_newer=None), Accepted)
        ]
        newest = max(wheels, key=lambda a: (a.version, -a.rank))
        assert newest.file.sha256 is not None
        meta = c.metadata(newest.file)
        assert meta.name.lower() == "six" and meta.version == newest.version
        assert c.stats.whole_downloads == 0  # PEP 658 or range requests, never the whole wheel
    with IndexClient(cache_dir=tmp_path / "cache") as c:  # warm: no metadata request at all
        page = c.project_page(_source(), "six")
        assert isinstance(page, ProjectPage)
        c.metadata(newest.file)
        assert c.stats.metadata_fetched == 0


def test_large_wheel_metadata_by_ranges(tmp_path: Path) -> None:
    """A big wheel: its metadata costs a few kilobytes, not the download."""
    target = Target.build(name="linux", os="linux", arch="x86_64", python="3.11")
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        page = c.project_page(_source(), "numpy")
        assert isinstance(page, ProjectPage)
        wheels = [
            r
            for f in page.files
            if isinstance(r := evaluate(f, target, allow_sdist=False, exclude_newer=None), Accepted)
        ]
        best = max(wheels, key=lambda a: (a.version, -a.rank))
        meta = c.metadata(best.file)
        assert meta.name == "numpy"
        assert c.stats.whole_downloads == 0
        assert best.file.size is None or c.stats.range_bytes < best.file.size / 20
        print(
            f"\n{best.file.filename}: {c.stats.range_requests} range requests, {c.stats.range_bytes} of {best.file.size} bytes"
        )
