"""Replaying a finished lock from the cache: byte-identical files, no network, and never when an
input changed (manifest, pins in the existing files, a cached page, --refresh, page freshness)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import kernodeck.lock.orchestrate as lockmod
import kernodeck.lock.replay as lockreplay
from kernodeck.index.cache import IndexCache
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts real resolutions (a replay makes none)."""
    calls: list[int] = []
    real = lockmod._resolve_and_render

    def counting(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(lockmod, "_resolve_and_render", counting)
    return calls


def _project(f: IndexFactory, served: Server, tmp_path: Path, **kw: Any) -> Path:
    f.add_wheel("app", "1.0", requires=["dep>=1", 'winonly; sys_platform == "win32"'])
    f.add_wheel("app", "1.1", requires=["dep>=1"], upload_time="2026-12-01T00:00:00Z")
    f.add_wheel("dep", "1.0", upload_time="2024-01-01T00:00:00Z")
    f.add_wheel("dep", "2.0", upload_time="2024-02-01T00:00:00Z")
    f.add_wheel("winonly", "1.0")
    return write_manifest(
        tmp_path / "proj",
        requirements=["app"],
        default_url=served.url(),
        platforms=[LINUX, WINDOWS],
        exclude_newer="2026-06-01T00:00:00Z",
        **kw,
    )


def _texts(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("requirements-rebuild-*.txt"))}


def test_replay_is_identical_and_offline(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, resolutions: list[int]
) -> None:
    manifest = _project(index_factory, served_index, tmp_path)
    cache = tmp_path / "cache"
    first = lock_manifest(manifest, cache_dir=cache)
    assert resolutions == [1] and {p.status for p in first.platforms} == {"written"}
    written = _texts(manifest.parent)
    # the files written now are preferred by the next lock, and the lock was recorded under that
    # run's key too: the first re-lock after a lock already replays
    served_index.reset()
    assert {p.status for p in lock_manifest(manifest, cache_dir=cache).platforms} == {"unchanged"}
    assert resolutions == [1]
    assert served_index.requests == []
    again = lock_manifest(manifest, cache_dir=cache, output_dir=tmp_path / "again")
    assert resolutions == [1]  # replayed (no pins there: the first run's own key)
    assert served_index.requests == []
    assert _texts(tmp_path / "again") == written
    assert [(p.platform, p.pins, p.hash_lines, p.summary) for p in again.platforms] == [
        (p.platform, p.pins, p.hash_lines, p.summary) for p in first.platforms
    ]
    # in place: unchanged; --check: fresh; --offline replays too
    assert {p.status for p in lock_manifest(manifest, cache_dir=cache).platforms} == {"unchanged"}
    assert lock_manifest(manifest, cache_dir=cache, check=True).ok
    assert resolutions == [1]
    # the same inputs without any cache: the same bytes
    lock_manifest(manifest, cache_dir=tmp_path / "fresh-cache", output_dir=tmp_path / "fresh", upgrade=True)
    assert _texts(tmp_path / "fresh") == written
    assert resolutions == [1, 1]


def test_no_replay_when_an_input_changes(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, resolutions: list[int]
) -> None:
    manifest = _project(index_factory, served_index, tmp_path)
    cache = tmp_path / "cache"
    lock_manifest(manifest, cache_dir=cache)
    assert len(resolutions) == 1
    # --refresh re-fetches and resolves
    lock_manifest(manifest, cache_dir=cache, refresh=True)
    assert len(resolutions) == 2
    # another platform selection, format or option set
    lock_manifest(manifest, ["linux"], cache_dir=cache)
    assert len(resolutions) == 3
    lock_manifest(manifest, cache_dir=cache, fmt="pylock")
    assert len(resolutions) == 4
    lock_manifest(manifest, cache_dir=cache, fmt="pylock")
    assert len(resolutions) == 4
    # the existing file prefers another version: resolved again, and the pin is kept
    linux = manifest.parent / requirements_filename("linux")
    assert "dep==2.0" in linux.read_text()
    linux.write_text(linux.read_text().replace("dep==2.0", "dep==1.0"))
    lock_manifest(manifest, cache_dir=cache)
    assert len(resolutions) == 5
    assert "dep==1.0" in linux.read_text()
    lock_manifest(manifest, cache_dir=cache, upgrade=True)
    assert len(resolutions) == 6 and "dep==2.0" in linux.read_text()
    # a comment cannot change a pin (not a lock input): replayed
    manifest.write_text(manifest.read_text() + "\n# a comment\n")
    lock_manifest(manifest, cache_dir=cache)
    assert len(resolutions) == 6
    # a changed lock input
    manifest.write_text(
        manifest.read_text().replace("exclude-newer", "prereleases = false\nexclude-newer", 1)
    )
    lock_manifest(manifest, cache_dir=cache)
    assert len(resolutions) == 6
    manifest.write_text(manifest.read_text().replace("prereleases = false", "prereleases = true", 1))
    lock_manifest(manifest, cache_dir=cache)
    assert len(resolutions) == 7
    # a cached page rewritten (another lock refreshed it)
    lock_manifest(manifest, cache_dir=cache)
    assert len(resolutions) == 7
    ic = IndexCache(cache)
    page = ic.page_path(f"{served_index.url().rstrip('/')}/dep/")
    assert page is not None and page.exists()
    st = page.stat()
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    lock_manifest(manifest, cache_dir=cache)
    assert len(resolutions) == 8


def test_no_replay_when_pages_are_stale(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    resolutions: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without exclude-newer a page answers only within its time-to-live; a replay the same."""
    index_factory.add_wheel("dep", "1.0")
    manifest = write_manifest(tmp_path / "proj", requirements=["dep"], default_url=served_index.url())
    cache = tmp_path / "cache"
    lock_manifest(manifest, cache_dir=cache, upgrade=True)
    lock_manifest(manifest, cache_dir=cache, upgrade=True)
    assert len(resolutions) == 1
    monkeypatch.setattr(lockreplay, "DEFAULT_PAGE_TTL", 0.0)
    lock_manifest(manifest, cache_dir=cache, upgrade=True)
    assert len(resolutions) == 2


def test_local_indexes_are_not_replayed(
    index_factory: IndexFactory, tmp_path: Path, resolutions: list[int]
) -> None:
    index_factory.add_wheel("dep", "1.0")
    url = index_factory.file_index_url()
    manifest = write_manifest(tmp_path / "proj", requirements=["dep"], default_url=url)
    lock_manifest(manifest, cache_dir=tmp_path / "cache")
    lock_manifest(manifest, cache_dir=tmp_path / "cache")
    assert len(resolutions) == 2
