"""The files of one lock move together: a run interrupted between two renames leaves a journal,
`lock --check` and verify say the set may be mixed, and the next lock finishes it; leftover
temporary files of earlier runs are removed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import is_lock_file, requirements_filename
from kernodeck.support import fsio
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


class Killed(BaseException):
    """Stands for kill -9 between two renames (nothing after it runs)."""


def test_write_set_interrupted_between_renames_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("requirements-rebuild-a.txt", "requirements-rebuild-b.txt"):
        (folder / name).write_text("old\n")

    def crash(i: int) -> None:
        if i == 1:
            raise Killed

    with pytest.raises(Killed):
        fsio.write_set(
            folder,
            [("requirements-rebuild-a.txt", b"new\n"), ("requirements-rebuild-b.txt", b"new\n")],
            is_lock_file,
            before_rename=crash,
        )
    # a mixed set on disk, and a reader can tell
    assert (folder / "requirements-rebuild-a.txt").read_text() == "new\n"
    assert (folder / "requirements-rebuild-b.txt").read_text() == "old\n"
    assert fsio.interrupted_set(folder)
    # the next writer (here with nothing to write) finishes the set and leaves no temporary file
    fsio.write_set(folder, [], is_lock_file)
    assert (folder / "requirements-rebuild-b.txt").read_text() == "new\n"
    assert not fsio.interrupted_set(folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        "requirements-rebuild-a.txt",
        "requirements-rebuild-b.txt",
    ]


def test_a_failure_while_staging_leaves_the_old_set_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("requirements-rebuild-a.txt", "requirements-rebuild-b.txt"):
        (folder / name).write_text("old\n")
    real = fsio._stage
    calls: list[Path] = []

    def full_disk_on_the_second(target: Path, data: bytes) -> Path:
        calls.append(target)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(target, data)

    monkeypatch.setattr(fsio, "_stage", full_disk_on_the_second)
    with pytest.raises(OSError):
        fsio.write_set(
            folder,
            [("requirements-rebuild-a.txt", b"new\n"), ("requirements-rebuild-b.txt", b"new\n")],
            is_lock_file,
        )
    assert {p.name: p.read_text() for p in folder.iterdir()} == {
        "requirements-rebuild-a.txt": "old\n",
        "requirements-rebuild-b.txt": "old\n",
    }
    assert not fsio.interrupted_set(folder)


def _project(f: IndexFactory, served: Server, tmp_path: Path) -> Path:
    f.add_wheel("app", "1.0", requires=["dep>=1"])
    f.add_wheel("dep", "1.0")
    return write_manifest(
        tmp_path / "proj", requirements=["app"], default_url=served.url(), platforms=[LINUX, WINDOWS]
    )


def test_an_interrupted_lock_is_reported_then_finished(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _project(index_factory, served_index, tmp_path)
    cache = tmp_path / "cache"
    folder = manifest.parent
    stale = folder / ".requirements-rebuild-linux.txt.k3x9q.tmp"  # left by a run killed long ago
    stale.write_text("half")
    real = fsio.write_set

    def killed_after_first_rename(*a: Any, **kw: Any) -> None:
        def crash(i: int) -> None:
            if i == 1:
                raise Killed

        real(*a, **kw, before_rename=crash)

    monkeypatch.setattr("kernodeck.lock.orchestrate.write_set", killed_after_first_rename)
    with pytest.raises(Killed):
        lock_manifest(manifest, cache_dir=cache)
    assert not stale.exists()  # leftovers of earlier runs are removed before a set is written
    written = [p for p in ("linux", "windows") if (folder / requirements_filename(p)).exists()]
    assert written == ["linux"]  # the first rename happened, the second did not
    monkeypatch.setattr("kernodeck.lock.orchestrate.write_set", real)

    check = lock_manifest(manifest, cache_dir=cache, check=True)
    assert not check.ok
    assert all(any("interrupted" in r for r in p.reasons) for p in check.platforms)

    lock_manifest(manifest, cache_dir=cache)
    assert all((folder / requirements_filename(p)).exists() for p in ("linux", "windows"))
    assert not fsio.interrupted_set(folder)
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert lock_manifest(manifest, cache_dir=cache, check=True).ok


def test_an_unchanged_relock_leaves_the_files_alone_and_still_finishes_a_torn_set(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    manifest = _project(index_factory, served_index, tmp_path)
    cache = tmp_path / "cache"
    folder = manifest.parent
    lock_manifest(manifest, cache_dir=cache)
    files = [folder / requirements_filename(p) for p in ("linux", "windows")]
    before = [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files]
    result = lock_manifest(manifest, cache_dir=cache)
    assert [p.status for p in result.platforms] == ["unchanged", "unchanged"]
    assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files] == before  # not rewritten
    assert not (folder / fsio.SET_JOURNAL).exists()
    # a journal left by a run killed after its last rename (same content): still finished
    (folder / fsio.SET_JOURNAL).write_text(
        '[{"target": "requirements-rebuild-linux.txt", "temp": "gone.tmp"}]\n'
    )
    assert fsio.interrupted_set(folder)
    lock_manifest(manifest, cache_dir=cache)
    assert not fsio.interrupted_set(folder)
    assert lock_manifest(manifest, cache_dir=cache, check=True).ok
