"""Files Kernodeck writes get the mode a plain `open()` would give them (0666 less the umask), and
a file it replaces keeps its mode: lock files on a shared machine are as readable as the ones
pip-compile or an editor writes there, not owner-only as `tempfile.mkstemp` would leave them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.fsio import atomic_write_text, write_set
from kernodeck.lock import lock_manifest
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


@pytest.fixture
def umask() -> Iterator[None]:
    """Run the test under umask 027 (a team's group-readable setting), restored after it."""
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_own(tmp_path: Path, umask: None) -> None:
    new = tmp_path / "new.txt"
    atomic_write_text(new, "one\n")
    assert _mode(new) == 0o640  # 0666 less 027

    kept = tmp_path / "kept.txt"
    kept.write_text("old\n")
    kept.chmod(0o664)  # wider than the umask: the owner chose it
    atomic_write_text(kept, "new\n")
    assert kept.read_text() == "new\n" and _mode(kept) == 0o664

    private = tmp_path / "private.txt"
    private.write_text("old\n")
    private.chmod(0o600)
    atomic_write_text(private, "new\n")
    assert _mode(private) == 0o600
    # no temporary file left beside them
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "new.txt", "private.txt"]


def test_a_set_of_files_gets_the_same_modes(tmp_path: Path, umask: None) -> None:
    (tmp_path / "b.txt").write_text("old\n")
    (tmp_path / "b.txt").chmod(0o644)
    write_set(tmp_path, [("a.txt", b"a\n"), ("b.txt", b"b\n")], lambda name: name.endswith(".txt"))
    assert _mode(tmp_path / "a.txt") == 0o640
    assert _mode(tmp_path / "b.txt") == 0o644 and (tmp_path / "b.txt").read_text() == "b\n"


def test_lock_files_are_readable_by_the_group_the_umask_allows(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, umask: None
) -> None:
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    manifest = write_manifest(
        tmp_path / "proj", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    result = lock_manifest(manifest, cache_dir=tmp_path / "cache")
    files = sorted((tmp_path / "proj").glob("requirements-rebuild-*.txt"))
    assert [p.status for p in result.platforms] == ["written", "written"] and len(files) == 2
    assert {_mode(f) for f in files} == {0o640}
    # a re-lock that rewrites a file keeps the mode its owner gave it
    files[0].chmod(0o644)
    index_factory.add_wheel("dep", "2.0")
    lock_manifest(manifest, cache_dir=tmp_path / "cache", upgrade=True, refresh=True)
    assert "dep==2.0" in files[0].read_text()
    assert _mode(files[0]) == 0o644 and _mode(files[1]) == 0o640
