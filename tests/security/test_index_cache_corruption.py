"""A damaged cache entry is never used: truncated metadata and one flipped hex digit in a cached
page are discarded and fetched again online; offline the error names the entry and does not blame
the index."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.hostile_index import HostileServer
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.lock_project import lock, pins, write_manifest

_SHA = re.compile(rb"[0-9a-f]{64}")


@pytest.fixture
def factory(tmp_path: Path) -> IndexFactory:
    f = IndexFactory(tmp_path / "ix")
    f.add_wheel("foo", "1.0", requires=["bar", "baz"])
    f.add_wheel("bar", "1.0")
    f.add_wheel("baz", "1.0")
    return f


def _entries(cache: Path, kind: str, pattern: str = "*") -> list[Path]:
    return sorted(p for p in (cache / "index-v3" / kind).glob(f"*/{pattern}") if p.is_file())


def _forget_locks(cache: Path) -> None:
    shutil.rmtree(cache / "index-v3" / "lock-records", ignore_errors=True)


def _offline_lock(
    manifest: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(cache))
    capsys.readouterr()
    code = main(["lock", str(manifest), "--offline", "-q"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("metadata_files", [True, False])
def test_truncated_metadata_is_refetched_never_used(
    factory: IndexFactory,
    tmp_path: Path,
    metadata_files: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cache = tmp_path / "cache"
    with HostileServer(factory, metadata_files=metadata_files) as srv:
        m = write_manifest(tmp_path / "proj", requirements=["foo"], default_url=srv.url())
        lock(m, cache)
        out = m.parent / requirements_filename("linux")
        want = out.read_text()
        assert pins(want) == {"foo": "1.0", "bar": "1.0", "baz": "1.0"}
        metas = _entries(cache, "metadata")
        foo = [p for p in metas if b"Name: foo" in p.read_bytes()]
        assert len(foo) == 1
        data = foo[0].read_bytes()
        cut = data[: data.index(b"Requires-Dist: baz")]  # drops a dependency
        foo[0].write_bytes(cut)
        # offline: an error naming the entry, nothing written, the index not blamed
        out.unlink()
        _forget_locks(cache)
        code, err = _offline_lock(m, cache, monkeypatch, capsys)
        assert code == 1
        assert "damaged" in err and str(foo[0]) in err
        assert not out.exists()
        # online: fetched again, the right lock
        foo[0].write_bytes(cut)
        srv.reset()
        lock(m, cache)
        assert out.read_text() == want
        assert srv.count(contains="foo-1.0") >= 1  # the metadata was read again from the index


@pytest.mark.parametrize("parsed", [False, True])
def test_flipped_hex_digit_in_cached_page_is_never_written_into_a_lock(
    factory: IndexFactory,
    tmp_path: Path,
    parsed: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cache = tmp_path / "cache"
    with HostileServer(factory) as srv:
        m = write_manifest(
            tmp_path / "proj",
            requirements=["foo"],
            default_url=srv.url(),
            exclude_newer="2030-01-01T00:00:00Z",
        )
        lock(m, cache)
        out = m.parent / requirements_filename("linux")
        want = out.read_text()
        good = factory.artifact("bar-1.0-py3-none-any.whl").sha256
        assert good in want
        body = next(p for p in _entries(cache, "pages", "*.json") if good.encode() in p.read_bytes())
        # the parsed form keeps where the page's entries start (not their digests): any byte of it
        page = next(p for p in body.parent.iterdir() if p.name.endswith(".parsed")) if parsed else body

        def flip() -> None:
            data = bytearray(page.read_bytes())
            i = data.index(good.encode()) + 10 if not parsed else len(data) - 3
            data[i] = ord("0") if data[i] != ord("0") else ord("1")
            page.write_bytes(bytes(data))  # the .json keeps its size and time: the .parsed still matches it

        flip()
        out.unlink()
        _forget_locks(cache)
        code, err = _offline_lock(m, cache, monkeypatch, capsys)
        if parsed:
            # the damaged parsed form is dropped; the intact .json answers offline
            assert code == 0, err
            assert out.read_text() == want
        else:
            assert code == 1
            assert "damaged" in err and str(page) in err
            assert "index 'default' answered" not in err
            assert not out.exists()
        # online (exclude-newer makes a cached page final: only the check can send it back)
        if page.exists():
            flip()
        _forget_locks(cache)
        lock(m, cache)
        assert out.read_text() == want


def test_flipped_hex_digit_in_a_lock_record_is_never_replayed(factory: IndexFactory, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with HostileServer(factory) as srv:
        m = write_manifest(
            tmp_path / "proj",
            requirements=["foo"],
            default_url=srv.url(),
            exclude_newer="2030-01-01T00:00:00Z",
        )
        lock(m, cache)
        out = m.parent / requirements_filename("linux")
        want = out.read_text()
        # one record under this run's key, one under the key of the next run (its pins preferred)
        records = _entries(cache, "lock-records")
        assert len(records) == 2
        good = factory.artifact("bar-1.0-py3-none-any.whl").sha256
        for record in records:
            data = bytearray(record.read_bytes())
            i = data.index(good.encode()) + 5
            data[i] = ord("0") if data[i] != ord("0") else ord("1")
            record.write_bytes(bytes(data))
        lock(m, cache)  # the next run's key: pins preferred
        assert out.read_text() == want
        out.unlink()
        lock(m, cache)  # this run's key: nothing preferred
        assert out.read_text() == want
