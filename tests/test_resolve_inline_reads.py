"""Where a lock's index reads run: what the cache answers is read in the thread that asks (a warm
lock resolves without handing each read to a pool thread and back), what needs the index goes to
the pools (a cold lock still reads ahead concurrently). Real locks against a loopback index; the
pools' `submit` is watched."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kernodeck.lock.orchestrate import lock_manifest
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]  # fixtures: index_factory, served_index

OLD = "2024-01-01T00:00:00Z"
READS = {"_read_page", "_read_metadata", "_load_project"}


@pytest.fixture
def handed_over(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the reads handed to a thread pool."""
    names: list[str] = []
    real = ThreadPoolExecutor.submit

    def spy(self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        work = args[1] if getattr(fn, "__name__", "") == "_settle" else fn  # once(): (future, fn, *args)
        names.append(getattr(work, "__name__", repr(work)))
        return real(self, fn, *args, **kwargs)

    monkeypatch.setattr(ThreadPoolExecutor, "submit", spy)
    return names


def test_a_warm_lock_reads_in_its_own_threads_and_a_cold_one_in_the_pools(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, handed_over: list[str]
) -> None:
    index_factory.add_wheel("app", "1.0", requires=["dep>=1", "other"], upload_time=OLD)
    index_factory.add_wheel("dep", "1.0", requires=["leaf"], upload_time=OLD)
    index_factory.add_wheel("other", "2.0", upload_time=OLD)
    index_factory.add_wheel("leaf", "0.3", upload_time=OLD)
    manifest = write_manifest(
        tmp_path / "proj",
        requirements=["app"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
        exclude_newer="2025-01-01T00:00:00Z",  # every page read after it stays fresh
    )
    cache = tmp_path / "cache"
    cold = lock_manifest(manifest, cache_dir=cache)
    assert {p.status for p in cold.platforms} == {"written"}
    assert {"_read_page", "_read_metadata"} <= set(handed_over), handed_over

    handed_over.clear()
    served_index.reset()
    # an input changed (a one-off constraint): no replay, a resolution on the warm cache
    warm = lock_manifest(manifest, cache_dir=cache, upgrade_packages=["dep<9"])
    assert [p.status for p in warm.platforms] == ["unchanged", "unchanged"]
    assert served_index.requests == []
    assert READS.isdisjoint(handed_over), handed_over


def test_a_lock_with_a_new_requirement_reads_only_that_from_the_index_in_the_pools(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, handed_over: list[str]
) -> None:
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"], upload_time=OLD)
    index_factory.add_wheel("dep", "1.0", upload_time=OLD)
    index_factory.add_wheel("extra", "1.0", upload_time=OLD)
    proj = tmp_path / "proj"
    cache = tmp_path / "cache"
    args: dict[str, Any] = {
        "default_url": served_index.url(),
        "platforms": [LINUX],
        "exclude_newer": "2025-01-01T00:00:00Z",
    }
    lock_manifest(write_manifest(proj, requirements=["app"], **args), cache_dir=cache)
    handed_over.clear()
    served_index.reset()
    manifest = write_manifest(proj, requirements=["app", "extra"], **args)
    result = lock_manifest(manifest, cache_dir=cache)
    assert [p.status for p in result.platforms] == ["written"]
    # the new project's page and metadata came from the index, through the pools; the rest from the cache
    assert handed_over.count("_read_page") == 1 and handed_over.count("_read_metadata") == 1, handed_over
    paths = [path for _, path, _ in served_index.requests]
    assert paths and all("extra" in path for path in paths), paths
    text = (proj / "requirements-rebuild-linux.txt").read_text()
    assert "extra==1.0" in text and "dep==1.0" in text


def test_a_cold_lock_stops_looking_in_the_cache_from_the_resolvers_thread(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each look in the cache on disk is a syscall in the resolver's thread: once the cache has
    missed 8 times and answered less often than it missed, only memory is asked there."""
    from kernodeck.index.collector import PageCollector
    from kernodeck.index.fetcher import MetadataFetcher

    names = [f"p{i}" for i in range(14)]
    index_factory.add_wheel("app", "1.0", requires=names, upload_time=OLD)
    for n in names:
        index_factory.add_wheel(n, "1.0", upload_time=OLD)
    looks: list[bool] = []  # whether each look of the asking thread (`disk` given) asked the disk
    for cls, method in ((PageCollector, "cached_page"), (MetadataFetcher, "cached_metadata")):
        real = getattr(cls, method)

        def spy(self: Any, *args: Any, _real: Any = real, disk: bool | None = None) -> Any:
            if disk is None:  # project_page's or metadata's own first look, in a pool thread
                return _real(self, *args)
            looks.append(disk)
            return _real(self, *args, disk=disk)

        monkeypatch.setattr(cls, method, spy)
    manifest = write_manifest(
        tmp_path / "proj", requirements=["app"], default_url=served_index.url(), platforms=[LINUX]
    )
    result = lock_manifest(manifest, cache_dir=tmp_path / "cache")
    assert [p.status for p in result.platforms] == ["written"]
    # (threads asking at once may each look once more before the count stops them)
    assert 8 <= looks.count(True) < len(looks) / 2 and not any(looks[-10:]), looks
