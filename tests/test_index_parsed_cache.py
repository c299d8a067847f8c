"""The parsed form of cached project pages: identical to parsing the page, used only while the page
it was made from is unchanged, bypassed by --refresh, independent of exclude-newer; and the fast
filename parser agrees with packaging."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import parse_sdist_filename, parse_wheel_filename

from kernodeck.index import IndexClient, IndexSource, ProjectPage
from kernodeck.index.cache import CachedPage, CorruptEntry, IndexCache
from kernodeck.index.models import _parse_filename_fast, parse_filename, parse_json_page
from tests.fixtures.index_factory import IndexFactory, Server

pytest_plugins = ["tests.fixtures.index_fixtures"]


def _client(tmp_path: Path, **kw: Any) -> IndexClient:
    return IndexClient(cache_dir=tmp_path / "cache", **kw)


def _page(c: IndexClient, url: str, name: str) -> ProjectPage:
    page = c.project_page(IndexSource("default", url), name)
    assert isinstance(page, ProjectPage), page
    return page


def _parsed_files(cache_root: Path) -> list[Path]:
    return sorted((cache_root / "index-v3" / "pages").glob("*/*.parsed"))


def _populate(f: IndexFactory) -> None:
    f.add_wheel("foo", "1.0", requires_python=">=3.8", upload_time="2024-01-01T00:00:00Z")
    f.add_wheel("foo", "1.0.0", tags="cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64")
    f.add_wheel("foo", "2.0", upload_time="2026-12-05T12:00:00.123456Z")
    f.add_wheel("foo", "1.5", yanked="broken", upload_time="2024-06-01T00:00:00+02:00")
    f.add_sdist("foo", "1.5")


def _same(a: ProjectPage, b: ProjectPage) -> None:
    assert a.files == b.files
    assert a.rejected == b.rejected
    assert (a.name, a.index, a.url) == (b.name, b.index, b.url)
    assert list(a.versions()) == list(b.versions())
    assert [str(v) for v in a.versions()] == [str(v) for v in b.versions()]


def test_parsed_page_equals_parsed_body(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    _populate(index_factory)
    with _client(tmp_path) as c:
        first = _page(c, served_index.url(), "foo")
    assert len(_parsed_files(tmp_path / "cache")) == 1
    served_index.reset()
    with _client(tmp_path) as c:
        again = _page(c, served_index.url(), "foo")
        assert c.stats.pages_from_cache == 1 and c.stats.pages_fetched == 0
    assert served_index.requests == []
    assert again.entries is not None  # served from the parsed form
    _same(first, again)
    with _client(tmp_path, disk_cache=False) as c:  # no cache at all: the same page
        _same(_page(c, served_index.url(), "foo"), again)


def test_parsed_page_ignored_when_page_changes(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    _populate(index_factory)
    with _client(tmp_path) as c:
        _page(c, served_index.url(), "foo")
    index_factory.add_wheel("foo", "3.0")
    with _client(tmp_path, refresh=True) as c:  # --refresh: fetched and parsed again
        assert len(_page(c, served_index.url(), "foo").files) == 6
        assert c.stats.pages_fetched == 1
    with _client(tmp_path) as c:  # the new parsed form
        assert len(_page(c, served_index.url(), "foo").files) == 6
        assert c.stats.pages_fetched == 0
    # a page rewritten behind the parsed form's back (another process, an older kernodeck): the
    # parsed form no longer matches and the .json is read
    cache = IndexCache(tmp_path / "cache")
    url = f"{served_index.url().rstrip('/')}/foo/"
    path = cache.page_path(url)
    assert path is not None and cache.get_parsed(url) is not None
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert cache.get_parsed(url) is None
    with _client(tmp_path) as c:
        assert len(_page(c, served_index.url(), "foo").files) == 6
    assert cache.get_parsed(url) is not None  # written again


def test_parsed_page_and_exclude_newer(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """The parsed form keeps every file, so any exclude-newer judges the same files as the page."""
    _populate(index_factory)
    past = datetime(2025, 1, 1, tzinfo=timezone.utc)
    with _client(tmp_path, exclude_newer=past) as c:
        _page(c, served_index.url(), "foo")
    with _client(tmp_path, disk_cache=False) as c:
        plain = _page(c, served_index.url(), "foo")
    for cutoff in (past, datetime(2024, 3, 1, tzinfo=timezone.utc), None):
        with _client(tmp_path, exclude_newer=cutoff) as c:
            page = _page(c, served_index.url(), "foo")
        _same(page, plain)
        if cutoff is not None:
            for v in page.versions():
                expect = all(f.upload_time is not None and f.upload_time > cutoff for f in plain.files_of(v))
                assert page.uploaded_after(v, cutoff) == expect == plain.uploaded_after(v, cutoff)


def test_uploaded_after_at_the_second() -> None:
    body = (
        b'{"meta": {"api-version": "1.1"}, "files": ['
        b'{"filename": "x-1.0-py3-none-any.whl", "url": "https://h/x-1.0-py3-none-any.whl",'
        b' "hashes": {}, "upload-time": "2025-06-01T00:00:00.500000Z"},'
        b'{"filename": "x-2.0-py3-none-any.whl", "url": "https://h/x-2.0-py3-none-any.whl",'
        b' "hashes": {}, "upload-time": "2025-06-01T02:00:00+02:00"}]}'
    )
    page = parse_json_page(body, project="x", index="default", page_url="https://h/simple/x/")
    v1, v2 = sorted(page.versions())
    assert page.uploaded_after(v1, datetime(2025, 6, 1, 0, 0, 0, 400000, tzinfo=timezone.utc))
    assert not page.uploaded_after(v1, datetime(2025, 6, 1, 0, 0, 0, 500000, tzinfo=timezone.utc))
    assert not page.uploaded_after(v2, datetime(2025, 6, 1, tzinfo=timezone.utc))  # equal instants
    assert page.uploaded_after(v2, datetime(2025, 5, 31, 23, 59, 59, tzinfo=timezone.utc))


@pytest.mark.parametrize(
    "filename",
    [
        "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "torch-2.6.0+cu126-cp311-cp311-linux_x86_64.whl",
        "Foo.Bar-1.0-py2.py3-none-any.whl",
        "foo-1.0+local.7-py3-none-any.whl",
        "foo-v1.0.post1.dev2-py3-none-any.whl",
        "foo-1!2.0rc1-py3-none-any.whl",
        "foo-1.0 -py3-none-any.whl",
        "foo-.-py3-none-any.whl",
        "foo-1.0rc1.tar.gz",
        "foo-bar-1!2.0.zip",
        "foo-1.0 .tar.gz",
        "foo-1.0-1-py3-none-any.whl",
        "foo-1.0-1a-py3-none-any.whl",
        "foo-1.0-x-py3-none-any.whl",
        "foo-1.0-3py-none-any.whl",
        "foo__bar-1.0-py3-none-any.whl",
        "-1.0-py3-none-any.whl",
        "foo-1.x-py3-none-any.whl",
        "foo-1.0-py3-none.whl",
        "foo-1.0-py3-none-.whl",
        "a b-1.0-py3-none-any.whl",
        "x-1-2-3-4-5-6.whl",
        "foo-1.0.tar.gz",
        "foo-bar-1.0.zip",
        "-1.0.tar.gz",
        "foo.tar.gz",
        "foo-1.0.tar.bz2",
    ],
)
def test_fast_filename_parse_agrees_with_packaging(filename: str) -> None:
    try:
        if filename.endswith(".whl"):
            n, v, _b, t = parse_wheel_filename(filename)
            want: Any = (n, v, t)
        else:
            n, v = parse_sdist_filename(filename)
            want = (n, v, None)
    except Exception:
        want = None
    assert _parse_filename_fast(filename) == want
    if want is not None:  # the version as packaging spells it ("1.0" and "1.0.0" are equal)
        fast = _parse_filename_fast(filename)
        assert fast is not None and str(fast[1]) == str(want[1])
    if want is None:
        with pytest.raises(ValueError):
            parse_filename(filename)
    else:
        assert parse_filename(filename) == want


def test_a_cached_page_keeps_its_body_as_received_and_reads_the_older_form(tmp_path: Path) -> None:
    body = b'{"files": []}\n\xff line two "quoted"\n'
    page = CachedPage(
        url="https://index.example/simple/foo/", body=body, content_type="text/html", fetched_at=1.0
    )
    stored = page.to_json()
    assert stored.endswith(b"\n" + body)  # not escaped into a JSON string
    assert CachedPage.from_json(stored) == page
    older = json.dumps(
        {
            "url": page.url,
            "body": body.decode("utf-8", errors="surrogateescape"),
            "content_type": page.content_type,
            "fetched_at": 1.0,
            "etag": None,
            "last_modified": None,
            "base": None,
            "not_found": False,
        }
    ).encode("utf-8", errors="surrogateescape")
    assert CachedPage.from_json(older) == page
    cache = IndexCache(tmp_path)
    cache.put_page(page)
    assert cache.get_page(page.url) == page


def test_cached_metadata_answers_only_for_the_hash_its_index_declares(tmp_path: Path) -> None:
    """The seal of a cache entry holds its content's sha256 (checked as the entry is read); the
    metadata hash an index declares is compared with it, in any case of hex digits; an entry that
    does not match is discarded."""
    import hashlib

    cache = IndexCache(tmp_path / "cache")
    data = b"Metadata-Version: 2.1\nName: foo\nVersion: 1.0\n"
    digest = hashlib.sha256(data).hexdigest()
    key = IndexCache.metadata_key(
        "https://index.invalid/simple", "https://files.invalid/foo.whl", None, digest
    )
    cache.put_metadata(key, data)
    assert cache.get_metadata(key, digest) == data
    assert cache.get_metadata(key, digest.upper()) == data
    assert cache.get_metadata(key, None) == data
    with pytest.raises(CorruptEntry, match="metadata hash its index declared"):
        cache.get_metadata(key, "0" * 64)
    assert cache.get_metadata(key, digest) is None  # discarded: fetched again
