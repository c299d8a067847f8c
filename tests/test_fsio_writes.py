"""Files Kernodeck writes get the mode a plain `open()` would give them (0666 less the umask), and
a file it replaces keeps its mode: lock files on a shared machine are as readable as the ones
pip-compile or an editor writes there, not owner-only as `tempfile.mkstemp` would leave them. A
write the system refuses (no permission, a read-only file system) is a located error, exit 2,
not an internal error."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernodeck.cli import main
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.support.fsio import NotWritable, atomic_write_text, write_set
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


def _refuse_creating_in(monkeypatch: pytest.MonkeyPatch, folder: Path, err: int) -> None:
    """The system refuses to create files in `folder` (as for a user without write access, or a
    read-only file system): os.open with O_CREAT there fails with `err`."""
    real_open = os.open

    def refusing(path: Any, flags: int, *a: Any, **kw: Any) -> int:
        if flags & os.O_CREAT and Path(path).parent == folder:
            raise OSError(err, os.strerror(err), str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", refusing)


@pytest.mark.parametrize(("err", "why"), [(errno.EACCES, "permission denied"), (errno.EROFS, "read-only")])
def test_a_refused_write_names_the_folder_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int, why: str
) -> None:
    target = tmp_path / "out" / "lock.txt"
    target.parent.mkdir()
    target.write_text("old\n")
    _refuse_creating_in(monkeypatch, target.parent, err)
    with pytest.raises(NotWritable) as e:
        atomic_write_text(target, "new\n")
    with pytest.raises(NotWritable):
        write_set(target.parent, [("lock.txt", b"new\n")], lambda name: name.endswith(".txt"))
    monkeypatch.undo()
    assert e.value.exit_code == 2 and isinstance(e.value, OSError) and e.value.errno == err
    assert e.value.message == f"cannot write in {target.parent}: {e.value.message.split(': ', 1)[1]}"
    assert why in e.value.message and "nothing was changed" in e.value.message and e.value.hint
    assert target.read_text() == "old\n" and [p.name for p in target.parent.iterdir()] == ["lock.txt"]


def test_lock_into_a_folder_it_may_not_write_is_a_usage_error_not_a_bug(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kernodeck lock` where the user has no write access (found on a shared machine: a
    colleague's project folder): exit 2 with the folder named, not "internal error ... a bug"."""
    index_factory.add_wheel("app", "1.0")
    manifest = write_manifest(tmp_path / "proj", requirements=["app"], default_url=served_index.url())
    out = tmp_path / "theirs"
    out.mkdir()
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    _refuse_creating_in(monkeypatch, out, errno.EACCES)
    code = main(["lock", str(manifest), "-q", "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: cannot write in {out}: permission denied; nothing was changed there" in err
    assert "internal error" not in err and "bug" not in err
    assert list(out.iterdir()) == []


def test_a_path_the_system_refuses_elsewhere_is_reported_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused path met outside Kernodeck's own writers (here: reading the manifest) is said as
    it is, exit 2, without calling it a bug."""

    def refused(*a: Any, **kw: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "repro.toml"))

    monkeypatch.setattr("kernodeck.lock.orchestrate.lock_manifest", refused)
    code = main(["lock", str(tmp_path / "repro.toml"), "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"error: Permission denied: {tmp_path / 'repro.toml'}" in err and "bug" not in err


def _patch_mkdir(monkeypatch: pytest.MonkeyPatch, replacement: Any) -> None:
    """os.mkdir replaced, for Path.mkdir too: Python 3.10's pathlib calls the os.mkdir its accessor
    class bound when pathlib was imported."""
    monkeypatch.setattr(os, "mkdir", replacement)
    if sys.version_info < (3, 11):
        import pathlib

        monkeypatch.setattr(pathlib._NormalAccessor, "mkdir", staticmethod(replacement))  # type: ignore[attr-defined]


def test_a_cache_the_user_may_not_write_is_skipped_with_a_notice(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's cache (a `sudo kernodeck lock` once, a team's shared folder): a lock goes
    on without locking or keeping anything there, writes its files, and says so once; before,
    the cache's lock file stopped it with a PermissionError called a bug."""
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    manifest = write_manifest(tmp_path / "proj", requirements=["app"], default_url=served_index.url())
    cache = tmp_path / "theirs-cache"
    cache.mkdir()
    real_open, real_mkdir = os.open, os.mkdir

    def refusing_open(path: Any, flags: int, *a: Any, **kw: Any) -> int:
        if flags & os.O_CREAT and Path(path).is_relative_to(cache):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *a, **kw)

    def refusing_mkdir(path: Any, *a: Any, **kw: Any) -> None:
        if Path(path).is_relative_to(cache):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        real_mkdir(path, *a, **kw)

    monkeypatch.setattr(os, "open", refusing_open)
    _patch_mkdir(monkeypatch, refusing_mkdir)
    for _ in range(2):
        served_index.reset()
        result = lock_manifest(manifest, cache_dir=cache)
        assert [p.status for p in result.platforms] in (["written"], ["unchanged"])
        assert served_index.requests  # nothing was kept: each lock reads the index again
        refused = [n for n in result.notices if n.startswith("the cache in ")]
        assert refused == [
            f"the cache in {cache} cannot be written (permission denied): this lock kept nothing "
            "it fetched, and the next one fetches it again; set KERNODECK_CACHE_DIR to a folder "
            "you may write"
        ]
    monkeypatch.undo()
    assert list(cache.iterdir()) == []
    assert "app==1.0" in (tmp_path / "proj" / "requirements-rebuild-linux.txt").read_text()


def test_a_folder_it_may_not_make_names_the_folder_to_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that must first make its folder, refused there: the message names the folder the
    user can fix (the existing one it would be made in), not the one that does not exist."""
    real_mkdir = os.mkdir

    def refusing(path: Any, *a: Any, **kw: Any) -> None:
        if Path(path).parent == tmp_path:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        real_mkdir(path, *a, **kw)

    _patch_mkdir(monkeypatch, refusing)
    with pytest.raises(NotWritable) as e:
        atomic_write_text(tmp_path / "bundle" / "deep" / "REBUILD.md", "x\n")
    assert e.value.message.startswith(f"cannot write in {tmp_path}: permission denied")
