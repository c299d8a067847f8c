from __future__ import annotations

import multiprocessing
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from kernodeck.errors import IndexError_
from kernodeck.index import (
    Accepted,
    IndexClient,
    IndexFile,
    IndexSource,
    MetadataError,
    MissingCredential,
    NotFound,
    ProjectPage,
    Rejected,
    evaluate,
)
from kernodeck.index.sources import _pip_index_settings, default_index_url
from kernodeck.targets import Target
from tests.fixtures.index_factory import IndexFactory, Server

pytest_plugins = ["tests.fixtures.index_fixtures"]  # fixtures: index_factory, served_index

LINUX = Target.build(name="linux", os="linux", arch="x86_64", python="3.11", backend="cu126")
MAC = Target.build(name="mac", os="macos", arch="arm64", python="3.11")


def _page(client: IndexClient, url: str, name: str, index: str = "default") -> ProjectPage:
    page = client.project_page(IndexSource(index, url), name)
    assert isinstance(page, ProjectPage), page
    return page


def _client(tmp_path: Path, **kw: Any) -> IndexClient:
    return IndexClient(cache_dir=tmp_path / "cache", **kw)


def _populate(f: IndexFactory) -> None:
    f.add_wheel(
        "foo", "1.0", requires=["bar>=1"], requires_python=">=3.8", upload_time="2024-01-01T00:00:00Z"
    )
    f.add_wheel(
        "foo",
        "2.0",
        requires=["bar>=2", 'colorama; sys_platform == "win32"'],
        extras={"test": ["pytest>=7"]},
        requires_python=">=3.12",
        upload_time="2026-12-05T12:00:00Z",
    )
    f.add_wheel("foo", "1.5", yanked="broken metadata", upload_time="2024-06-01T00:00:00Z")
    f.add_wheel("bar", "2.1", tags="cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64")
    f.add_wheel("bar", "2.1", tags="cp311-cp311-macosx_11_0_arm64")
    f.add_wheel("bar", "2.1", tags="cp312-cp312-win_amd64")


# --- pages ------------------------------------------------------------------------------------------


def test_json_page(index_factory: IndexFactory, served_index: Server, tmp_path: Path) -> None:
    _populate(index_factory)
    with _client(tmp_path) as c:
        page = _page(c, served_index.url(), "FOO")
    assert page.name == "foo"
    by_name = {f.filename: f for f in page.files}
    assert set(by_name) == {
        "foo-1.0-py3-none-any.whl",
        "foo-2.0-py3-none-any.whl",
        "foo-1.5-py3-none-any.whl",
    }
    f2 = by_name["foo-2.0-py3-none-any.whl"]
    assert f2.requires_python == ">=3.12"
    assert f2.upload_time == datetime(2026, 12, 5, 12, tzinfo=timezone.utc)
    assert f2.sha256 == index_factory.artifact(f2.filename).sha256
    assert f2.size == index_factory.artifact(f2.filename).size
    assert isinstance(f2.core_metadata, dict) and len(f2.core_metadata["sha256"]) == 64
    assert f2.url == served_index.file_url(f2.filename)
    assert by_name["foo-1.5-py3-none-any.whl"].yanked == "broken metadata"
    assert by_name["foo-1.0-py3-none-any.whl"].yanked is None
    assert str(f2.version) == "2.0" and f2.project == "foo" and f2.is_wheel
    accept = served_index.headers_seen[0]["accept"]
    assert accept.startswith("application/vnd.pypi.simple.v1+json")
    assert "text/html;q=0.01" in accept
    assert served_index.requests[0][1] == "/default/simple/foo/"


def test_html_fallback(index_factory: IndexFactory, tmp_path: Path) -> None:
    _populate(index_factory)
    index_factory.add_wheel("foo", "1.6", yanked=True)
    with index_factory.serve(formats=("html",)) as srv, _client(tmp_path) as c:
        page = _page(c, srv.url(), "foo")
        assert c.stats.pages_fetched == 1
    by_name = {f.filename: f for f in page.files}
    f2 = by_name["foo-2.0-py3-none-any.whl"]
    assert f2.requires_python == ">=3.12"
    assert f2.upload_time is None  # HTML pages carry no upload time
    assert f2.sha256 == index_factory.artifact(f2.filename).sha256
    assert isinstance(f2.core_metadata, dict) and "sha256" in f2.core_metadata
    assert by_name["foo-1.5-py3-none-any.whl"].yanked == "broken metadata"
    assert by_name["foo-1.6-py3-none-any.whl"].yanked == ""


def test_percent_encoded_local_versions(index_factory: IndexFactory, tmp_path: Path) -> None:
    index_factory.pytorch(backends=("cu126",), pythons=("311",), default_torch=False)
    with index_factory.serve(formats=("html",)) as srv, _client(tmp_path) as c:
        page = _page(c, srv.url("cu126"), "torch", "pytorch-cu126")
        assert srv.url("cu126").endswith("/whl/cu126")
        accepted = [
            r
            for f in page.files
            if isinstance(r := evaluate(f, LINUX, allow_sdist=False, exclude_newer=None), Accepted)
        ]
        assert [a.file.filename for a in accepted] == [
            "torch-2.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl"
        ]
        meta = c.metadata(accepted[0].file)
    nvidia = [r for r in meta.requires_dist if r.name.startswith("nvidia-")]
    assert nvidia and all(LINUX.evaluate_marker(r.marker) for r in nvidia)
    assert not any(MAC.evaluate_marker(r.marker) for r in nvidia)
    assert "opt-einsum" in meta.provides_extra


def test_malformed_entry_rejects_only_that_file(index_factory: IndexFactory, tmp_path: Path) -> None:
    index_factory.add_wheel("foo", "1.0")
    good = index_factory.artifact("foo-1.0-py3-none-any.whl")
    base: dict[str, Any] = {"hashes": {"sha256": good.sha256}}  # url: /default/files/<filename>
    bad_entries: dict[str, dict[str, Any]] = {
        "foo-1.1-py3-none-any.whl": {"hashes": {"sha256": "xyz"}},
        "foo-1.2-py3-none-any.whl": {"upload-time": "yesterday"},
        "foo-1.3-py3-none-any.whl": {"requires-python": ">=3.x"},
        "foo-1.4-py3-none-any.whl": {"size": "big"},
        "foo-1.5-py3-none-any.whl": {"yanked": 3},
        "bar-1.0-py3-none-any.whl": {},
        "foo.whl": {},
    }
    for fn, fields in bad_entries.items():
        index_factory.add_entry("foo", {**base, "filename": fn, **fields})
    with index_factory.serve() as srv, _client(tmp_path) as c:
        page = _page(c, srv.url(), "foo")
    assert [f.filename for f in page.files] == ["foo-1.0-py3-none-any.whl"]
    reasons = dict(page.rejected)
    assert set(reasons) == set(bad_entries)
    assert "hash" in reasons["foo-1.1-py3-none-any.whl"]
    assert "upload-time" in reasons["foo-1.2-py3-none-any.whl"]
    assert "requires-python" in reasons["foo-1.3-py3-none-any.whl"]
    assert "size" in reasons["foo-1.4-py3-none-any.whl"]
    assert "yanked" in reasons["foo-1.5-py3-none-any.whl"]
    assert "belongs to 'bar'" in reasons["bar-1.0-py3-none-any.whl"]
    assert "invalid distribution filename" in reasons["foo.whl"]
    # the same page as HTML: the bad hash and bad requires-python still reject only their file
    with index_factory.serve(formats=("html",)) as srv, _client(tmp_path / "h") as c:
        page = _page(c, srv.url(), "foo")
    assert "foo-1.0-py3-none-any.whl" in [f.filename for f in page.files]
    assert {"foo-1.1-py3-none-any.whl", "foo-1.3-py3-none-any.whl"} <= set(dict(page.rejected))


def test_not_found_and_http_errors(index_factory: IndexFactory, served_index: Server, tmp_path: Path) -> None:
    index_factory.add_wheel("foo", "1.0")
    with _client(tmp_path) as c:
        nf = c.project_page(IndexSource("default", served_index.url()), "nope")
    assert isinstance(nf, NotFound) and nf.name == "nope" and "nope" in nf.reason

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, request=request)

    with (
        IndexClient(cache_dir=tmp_path / "c2", transport=httpx.MockTransport(broken)) as c,
        pytest.raises(IndexError_) as e,
    ):
        c.project_page(IndexSource("corp", "https://index.invalid/simple"), "foo")
    assert "503" in e.value.message and "corp" in e.value.message and e.value.hint


# --- metadata -----------------------------------------------------------------------------------------


def test_metadata_file_used_when_present(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    _populate(index_factory)
    with _client(tmp_path) as c:
        page = _page(c, served_index.url(), "foo")
        f2 = next(f for f in page.files if f.filename == "foo-2.0-py3-none-any.whl")
        meta = c.metadata(f2)
        assert c.stats.metadata_files == 1 and c.stats.range_requests == 0 and c.stats.whole_downloads == 0
    assert meta.name == "foo" and str(meta.version) == "2.0"
    assert [str(r) for r in meta.requires_dist] == [
        "bar>=2",
        'colorama; sys_platform == "win32"',
        'pytest>=7; extra == "test"',
    ]
    assert str(meta.requires_python) == ">=3.12"
    assert meta.provides_extra == frozenset({"test"})
    assert served_index.count(suffix=".whl") == 0
    assert served_index.count(suffix=".metadata") == 1


def test_metadata_hash_mismatch_refused(index_factory: IndexFactory, tmp_path: Path) -> None:
    index_factory.add_wheel("foo", "1.0")
    art = index_factory.artifact("foo-1.0-py3-none-any.whl")
    index_factory.add_wheel("other", "1.0")  # keeps 'foo' file routing simple
    entry = {
        "filename": "foo-1.0-py3-none-any.whl",
        "url": "/default/files/foo-1.0-py3-none-any.whl",
        "hashes": {"sha256": art.sha256},
        "core-metadata": {"sha256": "0" * 64},
    }
    index_factory.add_entry("foo", entry)
    with index_factory.serve() as srv, _client(tmp_path) as c:
        page = _page(c, srv.url(), "foo")
        liar = next(f for f in page.files if f.metadata_sha256 == "0" * 64)
        with pytest.raises(MetadataError, match=r"hash mismatch for the metadata of foo-1\.0"):
            c.metadata(liar)


def test_metadata_by_range_requests(index_factory: IndexFactory, tmp_path: Path) -> None:
    big = index_factory.add_wheel("big", "1.0", requires=["foo"], payload_size=2_000_000)
    first = index_factory.add_wheel(
        "early", "1.0", requires=["foo"], payload_size=500_000, dist_info_first=True
    )
    with index_factory.serve(metadata_files=False) as srv, _client(tmp_path) as c:
        page = _page(c, srv.url(), "big")
        assert page.files[0].core_metadata is None
        meta = c.metadata(page.files[0])
        assert [str(r) for r in meta.requires_dist] == ["foo"]
        assert c.stats.range_requests >= 1 and c.stats.whole_downloads == 0
        assert c.stats.bytes_downloaded < big.stat().st_size / 20
        assert srv.count(suffix=".whl", ranged=False) == 0
        assert srv.count(suffix=".whl", ranged=True) == c.stats.range_requests
        # METADATA at the start of the zip: tail, then one more range for the member
        before = c.stats.range_requests
        early = _page(c, srv.url(), "early").files[0]
        assert str(c.metadata(early).version) == "1.0"
        assert c.stats.range_requests - before == 2
        assert srv.count(suffix=".whl", ranged=False) == 0
        assert srv.count(suffix=".metadata") == 0
    assert first.stat().st_size > 500_000


def test_whole_file_when_server_ignores_range(index_factory: IndexFactory, tmp_path: Path) -> None:
    index_factory.add_wheel("foo", "1.0", requires=["bar"], payload_size=50_000)
    index_factory.add_wheel("foo", "1.1", requires=["bar"], payload_size=50_000)
    index_factory.tamper("foo-1.1-py3-none-any.whl")
    with index_factory.serve(metadata_files=False, ranges=False) as srv, _client(tmp_path) as c:
        page = _page(c, srv.url(), "foo")
        files = {f.filename: f for f in page.files}
        meta = c.metadata(files["foo-1.0-py3-none-any.whl"])
        assert [str(r) for r in meta.requires_dist] == ["bar"]
        assert c.stats.whole_downloads == 1
        with pytest.raises(IndexError_) as e:
            c.metadata(files["foo-1.1-py3-none-any.whl"])
        assert "hash mismatch for foo-1.1-py3-none-any.whl" in e.value.message
        assert any(line.startswith("expected sha256:") for line in e.value.context)
        assert e.value.hint and "refused" in e.value.hint
        with pytest.raises(IndexError_, match="hash mismatch"):
            c.fetch_file(files["foo-1.1-py3-none-any.whl"])
        assert (
            c.fetch_file(files["foo-1.0-py3-none-any.whl"])
            == index_factory.artifact("foo-1.0-py3-none-any.whl").path.read_bytes()
        )


def test_sdist_metadata_by_pep517_build(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    index_factory.add_sdist(
        "srconly", "0.3", requires=["foo>=1", 'bar; python_version < "3.12"'], requires_python=">=3.9"
    )
    with _client(tmp_path) as c:
        page = _page(c, served_index.url(), "srconly")
        sdist = page.files[0]
        assert sdist.is_sdist and not sdist.is_wheel
        assert isinstance(evaluate(sdist, LINUX, allow_sdist=False, exclude_newer=None), Rejected)
        assert isinstance(evaluate(sdist, LINUX, allow_sdist=True, exclude_newer=None), Accepted)
        meta = c.metadata(sdist)
        assert c.stats.sdist_builds == 1 and c.stats.whole_downloads == 1
    assert meta.name == "srconly" and str(meta.version) == "0.3"
    assert [str(r) for r in meta.requires_dist] == ["foo>=1", 'bar; python_version < "3.12"']
    assert str(meta.requires_python) == ">=3.9"
    # a second client finds it in the disk cache: no download, no build
    with _client(tmp_path) as c:
        page = _page(c, served_index.url(), "srconly")
        assert c.metadata(page.files[0]) == meta
        assert c.stats.sdist_builds == 0 and c.stats.whole_downloads == 0


# --- evaluation on real pages -----------------------------------------------------------------------------


def test_yanked_requires_python_and_exclude_newer(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    _populate(index_factory)
    cutoff = datetime(2026, 11, 30, tzinfo=timezone.utc)
    with _client(tmp_path) as c:
        page = _page(c, served_index.url(), "foo")
    results = {f.filename: evaluate(f, LINUX, allow_sdist=False, exclude_newer=cutoff) for f in page.files}
    assert isinstance(results["foo-1.0-py3-none-any.whl"], Accepted)
    r15 = results["foo-1.5-py3-none-any.whl"]
    assert isinstance(r15, Rejected) and r15.reason == "yanked: broken metadata"
    r20 = results["foo-2.0-py3-none-any.whl"]
    assert isinstance(r20, Rejected) and r20.reason.startswith(
        "uploaded 2026-12-05T12:00:00Z after exclude-newer"
    )
    py312 = Target.build(name="p", os="linux", arch="x86_64", python="3.12")
    r = evaluate(
        next(f for f in page.files if f.filename.startswith("foo-2.0")),
        py312,
        allow_sdist=False,
        exclude_newer=None,
    )
    assert isinstance(r, Accepted)
    r = evaluate(
        next(f for f in page.files if f.filename.startswith("foo-2.0")),
        LINUX,
        allow_sdist=False,
        exclude_newer=None,
    )
    assert isinstance(r, Rejected) and r.reason == "requires-python >=3.12"


# --- cache --------------------------------------------------------------------------------------------------


def test_warm_cache_makes_no_metadata_requests(index_factory: IndexFactory, tmp_path: Path) -> None:
    _populate(index_factory)
    index_factory.add_wheel("baz", "1.0", payload_size=30_000)
    for metadata_files in (True, False):
        cache = tmp_path / f"cache-{metadata_files}"
        with index_factory.serve(metadata_files=metadata_files) as srv:
            files: list[IndexFile] = []
            with IndexClient(cache_dir=cache) as c:
                for name in ("foo", "bar", "baz"):
                    files += _page(c, srv.url(), name).files
                c.prefetch_metadata(files)
                assert c.stats.metadata_fetched == len(files)
            srv.reset()
            with IndexClient(cache_dir=cache) as c:
                warm: list[IndexFile] = []
                for name in ("foo", "bar", "baz"):
                    warm += _page(c, srv.url(), name).files
                c.prefetch_metadata(warm)
                metas = [c.metadata(f) for f in warm]
                assert c.stats.metadata_fetched == 0
                assert c.stats.pages_from_cache == 3 and c.stats.pages_fetched == 0
            assert len(metas) == len(files)
            assert srv.requests == []  # pages within the TTL, metadata immutable


def test_page_ttl_and_refresh(index_factory: IndexFactory, served_index: Server, tmp_path: Path) -> None:
    index_factory.add_wheel("foo", "1.0")
    with _client(tmp_path) as c:
        _page(c, served_index.url(), "foo")
    index_factory.add_wheel("foo", "1.1")
    with _client(tmp_path) as c:  # within the TTL: the cached page, no request
        assert len(_page(c, served_index.url(), "foo").files) == 1
    with _client(tmp_path, page_ttl=0) as c:  # expired: fetched again
        assert len(_page(c, served_index.url(), "foo").files) == 2
    index_factory.add_wheel("foo", "1.2")
    with _client(tmp_path, refresh=True) as c:
        assert len(_page(c, served_index.url(), "foo").files) == 3
    assert served_index.count(contains="/simple/foo") == 3


def test_page_fetched_after_exclude_newer_is_final(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    index_factory.add_wheel("foo", "1.0")
    past = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with _client(tmp_path, exclude_newer=past, page_ttl=0) as c:
        _page(c, served_index.url(), "foo")
    index_factory.add_wheel("foo", "1.1")
    with _client(tmp_path, exclude_newer=past, page_ttl=0) as c:
        assert len(_page(c, served_index.url(), "foo").files) == 1
        assert c.stats.pages_from_cache == 1
    future = datetime.now(timezone.utc).replace(year=datetime.now().year + 5)
    with _client(tmp_path, exclude_newer=future, page_ttl=0) as c:  # the page may still grow: refetch
        assert len(_page(c, served_index.url(), "foo").files) == 2
    with _client(tmp_path, exclude_newer=past, refresh=True) as c:
        assert len(_page(c, served_index.url(), "foo").files) == 2
        assert c.stats.pages_fetched == 1
    assert served_index.count(contains="/simple/foo") == 3


def test_etag_revalidation(index_factory: IndexFactory, tmp_path: Path) -> None:
    index_factory.add_wheel("foo", "1.0")
    with index_factory.serve(etag=True) as srv:
        with _client(tmp_path) as c:
            _page(c, srv.url(), "foo")
        with _client(tmp_path) as c:
            assert len(_page(c, srv.url(), "foo").files) == 1
            assert c.stats.pages_revalidated == 1 and c.stats.pages_fetched == 0
        assert "if-none-match" in srv.headers_seen[-1]
        index_factory.add_wheel("foo", "1.1")
        with _client(tmp_path) as c:
            assert len(_page(c, srv.url(), "foo").files) == 2
            assert c.stats.pages_fetched == 1


def test_offline_uses_only_the_cache(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    _populate(index_factory)
    with _client(tmp_path) as c:
        page = _page(c, served_index.url(), "foo")
        c.metadata(page.files[0])
        assert isinstance(c.project_page(IndexSource("default", served_index.url()), "nope"), NotFound)
    served_index.reset()
    with _client(tmp_path, offline=True) as c:
        page = _page(c, served_index.url(), "foo")
        assert c.metadata(page.files[0]).name == "foo"
        with pytest.raises(MetadataError, match=f"offline: the metadata of {page.files[1].filename}"):
            c.metadata(page.files[1])
        assert isinstance(c.project_page(IndexSource("default", served_index.url()), "nope"), NotFound)
        with pytest.raises(
            IndexError_, match="offline: the page of 'bar' on index 'default' is not in the cache"
        ) as e:
            c.project_page(IndexSource("default", served_index.url()), "bar")
        assert e.value.hint and "without --offline" in e.value.hint
    assert served_index.requests == []


def _lock_in_child(cache: str, url: str, names: list[str], out: Any) -> None:
    with IndexClient(cache_dir=Path(cache)) as c:
        files: list[IndexFile] = []
        for n in names:
            page = c.project_page(IndexSource("default", url), n)
            assert isinstance(page, ProjectPage)
            files += page.files
        c.prefetch_metadata(files)
        out.put(sorted((f.filename, str(c.metadata(f).requires_dist)) for f in files))


def test_two_processes_share_one_cache(index_factory: IndexFactory, tmp_path: Path) -> None:
    _populate(index_factory)
    for i in range(12):
        index_factory.add_wheel(f"pkg{i}", "1.0", requires=[f"pkg{i + 1}"], payload_size=20_000)
    names = ["foo", "bar", *(f"pkg{i}" for i in range(12))]
    ctx = multiprocessing.get_context("spawn")
    with index_factory.serve(metadata_files=False) as srv:
        q = ctx.Queue()
        procs = [
            ctx.Process(target=_lock_in_child, args=(str(tmp_path / "cache"), srv.url(), names, q))
            for _ in range(2)
        ]
        for p in procs:
            p.start()
        results = [q.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        assert results[0] == results[1] and len(results[0]) == 18
        srv.reset()
        with _client(tmp_path) as c:
            files = [f for n in names for f in _page(c, srv.url(), n).files]
            c.prefetch_metadata(files)
            assert c.stats.metadata_fetched == 0 and c.stats.metadata_from_cache == len(files)
        assert srv.requests == []
    leftovers = [p for p in (tmp_path / "cache").rglob("*.tmp")]
    assert leftovers == []


# --- credentials ------------------------------------------------------------------------------------------


def test_credentials_in_memory_only(
    index_factory: IndexFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_factory.add_wheel("foo", "1.0")
    monkeypatch.setenv("KD_TEST_USER", "alice")
    monkeypatch.setenv("KD_TEST_TOKEN", "s3cret-t0ken")
    with index_factory.serve(auth=("alice", "s3cret-t0ken"), metadata_files=False) as srv:
        url = srv.url().replace("http://", "http://${KD_TEST_USER}:${KD_TEST_TOKEN}@")
        with _client(tmp_path) as c:
            page = _page(c, url, "foo", "corp")
            assert "s3cret" not in page.url and "alice" not in page.files[0].url
            assert c.metadata(page.files[0]).name == "foo"  # file requests carry the auth too
            assert "s3cret" not in repr(c.stats) and "s3cret" not in repr(page)
        assert all(h.get("authorization", "").startswith("Basic ") for h in srv.headers_seen)
        monkeypatch.setenv("KD_TEST_TOKEN", "wrong-t0ken")
        with _client(tmp_path / "other") as c, pytest.raises(IndexError_) as e:
            c.project_page(IndexSource("corp", url), "foo")
        text = e.value.render() + repr(e.value)
        assert "401" in text and "wrong-t0ken" not in text and "alice" not in text
        assert "KD_TEST_USER" in (e.value.hint or "")
        port = srv.port
    # nothing listens there any more: a network error, still without the secret
    dead = f"http://${{KD_TEST_USER}}:${{KD_TEST_TOKEN}}@127.0.0.1:{port}/default/simple"
    with _client(tmp_path / "dead") as c, pytest.raises(IndexError_) as e:
        c.project_page(IndexSource("corp", dead), "foo")
    text = e.value.render() + repr(e.value) + repr(e.value.__cause__)
    assert "wrong-t0ken" not in text and "alice" not in text
    monkeypatch.delenv("KD_TEST_TOKEN")
    with _client(tmp_path / "x") as c, pytest.raises(MissingCredential, match="KD_TEST_TOKEN"):
        c.project_page(IndexSource("corp", dead), "foo")


def test_netrc(index_factory: IndexFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index_factory.add_wheel("foo", "1.0")
    rc = tmp_path / "netrc"
    rc.write_text("machine 127.0.0.1 login bob password hunter2\n")
    rc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(rc))
    with index_factory.serve(auth=("bob", "hunter2")) as srv, _client(tmp_path) as c:
        assert _page(c, srv.url(), "foo").files


# --- air-gapped sources ------------------------------------------------------------------------------------


@pytest.mark.parametrize("metadata_files", [True, False])
def test_file_index(index_factory: IndexFactory, tmp_path: Path, metadata_files: bool) -> None:
    _populate(index_factory)
    url = index_factory.file_index_url(metadata_files=metadata_files)
    assert url.startswith("file://")
    with _client(tmp_path) as c:
        page = _page(c, url, "foo", "local")
        assert len(page.files) == 3
        f = next(f for f in page.files if f.filename == "foo-2.0-py3-none-any.whl")
        assert f.url.startswith("file://") and f.sha256 == index_factory.artifact(f.filename).sha256
        assert f.requires_python == ">=3.12" and bool(f.core_metadata) is metadata_files
        assert str(c.metadata(f).version) == "2.0"
        assert c.fetch_file(f) == index_factory.artifact(f.filename).path.read_bytes()
        assert isinstance(c.project_page(IndexSource("local", url), "nope"), NotFound)


def test_find_links_folder(index_factory: IndexFactory, tmp_path: Path) -> None:
    _populate(index_factory)
    index_factory.add_sdist("srconly", "0.1")
    folder = index_factory.find_links_dir()
    (folder / "README.txt").write_text("not a distribution")
    src = IndexSource("wheelhouse", folder.as_uri(), format="find-links")
    with _client(tmp_path) as c:
        page = c.project_page(src, "Bar")
        assert isinstance(page, ProjectPage)
        assert sorted(f.filename for f in page.files) == sorted(
            a.filename for a in index_factory.artifacts("bar")
        )
        for f in page.files:
            assert f.sha256 == index_factory.artifact(f.filename).sha256
        accepted = [
            f
            for f in page.files
            if isinstance(evaluate(f, LINUX, allow_sdist=False, exclude_newer=None), Accepted)
        ]
        assert [f.filename for f in accepted] == [
            "bar-2.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
        ]
        assert c.metadata(accepted[0]).name == "bar"
        assert isinstance(c.project_page(src, "nope"), NotFound)
        sd = c.project_page(src, "srconly")
        assert isinstance(sd, ProjectPage) and sd.files[0].is_sdist


# --- default index -------------------------------------------------------------------------------------------


def test_default_index_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/env/simple")
    assert default_index_url() == "http://127.0.0.1:9/env/simple"
    monkeypatch.delenv("PIP_INDEX_URL")
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://127.0.0.1:9/conf/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    _pip_index_settings.cache_clear()
    try:
        assert default_index_url() == "http://127.0.0.1:9/conf/simple"
        monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
        _pip_index_settings.cache_clear()
        builtin = default_index_url()  # pip's own default, read from pip at run time
        assert builtin.startswith("https://") and builtin.rstrip("/").endswith("/simple")
    finally:
        _pip_index_settings.cache_clear()


def test_client_is_quick_on_many_pages(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    for i in range(40):
        index_factory.add_wheel(f"p{i}", "1.0")
    with _client(tmp_path, concurrency=8) as c:
        src = IndexSource("default", served_index.url())
        t = time.perf_counter()
        c.prefetch_pages((src, f"p{i}") for i in range(40))
        assert all(isinstance(c.project_page(src, f"p{i}"), ProjectPage) for i in range(40))
        assert c.stats.pages_fetched == 40
        assert time.perf_counter() - t >= 0  # no timed assertion; the count above is the point


def test_factory_index_is_installable_by_uv(index_factory: IndexFactory, tmp_path: Path) -> None:
    """The test index is real: uv resolves and installs from it, building the sdist offline."""
    import os
    import subprocess
    import sys

    index_factory.add_wheel("foo", "1.0", requires=["bar>=1"])
    index_factory.add_sdist("bar", "1.2")
    with index_factory.serve() as srv:
        cmd = [sys.executable, "-m", "uv", "pip", "install", "--no-cache", "--target", str(tmp_path / "t")]
        cmd += ["--index-url", srv.url(), "foo"]
        env = {**os.environ, "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uvcache")}
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "t" / "foo" / "__init__.py").read_text() == '__version__ = "1.0"\n'
    assert (tmp_path / "t" / "bar" / "__init__.py").exists()
