"""A JSON project page kept by spans (kernodeck.index.models.ProjectPage): walked as json.loads
reads it, with the same answers for any document; its entries read back from the cached page on
disk (kernodeck.index.cache.PageBody), checked, so the lock holds no page body in memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from kernodeck.errors import IndexError_
from kernodeck.index import IndexClient, IndexSource, ProjectPage
from kernodeck.index.cache import IndexCache, PageBody
from kernodeck.index.models import _raw_entry, parse_json_page
from tests.fixtures.index_factory import IndexFactory, Server

pytest_plugins = ["tests.fixtures.index_fixtures"]

PAGE_URL = "https://index.example/simple/foo/"
SHA = "b" * 64


def _file(filename: str, **extra: Any) -> dict[str, Any]:
    return {
        "filename": filename,
        "url": f"https://files.example/{filename}",
        "hashes": {"sha256": SHA},
        "upload-time": "2024-01-02T03:04:05Z",
        **extra,
    }


FILES: list[Any] = [
    _file("foo-1.0.tar.gz", **{"requires-python": ">=3.8"}),
    _file("foo-1.0-py3-none-any.whl", yanked=True),
    ["not", "an", "object"],
    _file("foo-2.0-py3-none-any.whl", size=12, **{"core-metadata": {"sha256": SHA}}),
    _file("foo-2.0-py3-none-any.whl", hashes={"sha256": "no"}),  # rejected
    _file("foo-3.0-py3-none-any.whl", extra={"nested": [1, {"x": "]},{"}]}),
]


def _reference(body: bytes) -> ProjectPage | str:
    """What an eager json.loads of `body` makes of it: its entries kept as decoded, or the
    first line of the error."""
    try:
        doc = json.loads(body)
    except ValueError:
        return "not valid JSON"
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        return "has no 'files' list"
    meta = doc.get("meta")
    if isinstance(meta, dict) and str(meta.get("api-version", "1.0")).split(".")[0] != "1":
        return "speaks simple API version"
    return ProjectPage("foo", "main", url=PAGE_URL, raw=[_raw_entry(e) for e in doc["files"]])


def _answers(page: ProjectPage) -> Any:
    versions = page.versions()
    return (
        [str(v) for v in versions],
        {str(v): page.files_of(v) for v in versions},
        page.files,
        page.rejected,
    )


DOCS = [
    json.dumps({"meta": {"api-version": "1.1"}, "files": FILES}),
    json.dumps({"files": FILES}, indent=2),  # newlines and indents between everything
    json.dumps({"files": FILES}, separators=(",", ":")),  # no whitespace at all
    '\t\r\n {"files" :\n[ ' + " ,\n ".join(json.dumps(f) for f in FILES) + ' ] , "name" : "foo" }\n ',
    json.dumps({"files": []}),
    '{"files": [], "files": ' + json.dumps(FILES) + "}",  # the last one counts
    '{"files": ' + json.dumps(FILES) + ', "files": 3}',  # the last one is not a list
    '{"files": ' + json.dumps(FILES) + "} trailing",
    '{"files": ' + json.dumps(FILES) + ",}",
    '{"files": [' + json.dumps(FILES[0]) + ",]}",
    '{"files": [' + json.dumps(FILES[0]) + " " + json.dumps(FILES[1]) + "]}",
    '{"files": [' + json.dumps(FILES[0]) + "}",
    '{"files": [{"filename": "foo-1.0.tar.gz", "size": NaN, "url": "https://h/x", "hashes": {}}]}',
    '{"meta": {"api-version": "2.0"}, "files": []}',
    '{"files": "nope"}',
    "[1, 2]",
    "",
    "{}",
    '{"files": [' + json.dumps(_file("foo-4.0.tar.gz", yanked="\\u00e9")) + "]}",  # escaped, still ASCII
]


@pytest.mark.parametrize("text", DOCS)
def test_a_page_by_spans_answers_as_json_loads_does(text: str) -> None:
    body = text.encode()
    want = _reference(body)
    if isinstance(want, str):
        with pytest.raises(IndexError_) as e:
            parse_json_page(body, project="foo", index="main", page_url=PAGE_URL)
        assert want in str(e.value)
        return
    page = parse_json_page(body, project="foo", index="main", page_url=PAGE_URL)
    assert page.spans is not None and page.raw is None  # kept by spans, not decoded
    assert _answers(page) == _answers(want)


def test_a_page_that_is_not_plain_ascii_is_decoded_whole() -> None:
    for body in (
        json.dumps({"files": [_file("foo-1.0.tar.gz", yanked="é")]}, ensure_ascii=False).encode(),
        b"\xef\xbb\xbf" + json.dumps({"files": FILES}).encode(),  # a byte order mark
        json.dumps({"files": FILES}).encode("utf-16"),
    ):
        page = parse_json_page(body, project="foo", index="main", page_url=PAGE_URL)
        assert page.spans is None and page.raw is not None
        ref = _reference(body)
        assert isinstance(ref, ProjectPage) and _answers(page) == _answers(ref)


def _recording(text: str, read: list[Any]) -> Any:
    def reader(runs: Any) -> list[str]:
        read.extend(runs)
        return [text[a:b] for a, b in runs]

    return reader


def test_the_exclude_newer_cut_reads_no_entry_of_a_version_uploaded_after_it() -> None:
    late, early = "2025-07-01T00:00:00.000001Z", "2024-01-01T00:00:00Z"
    files = [
        _file("foo-1.0.tar.gz", **{"upload-time": early}),
        _file("foo-2.0.tar.gz", **{"upload-time": late}),
        _file("foo-2.0-py3-none-any.whl", **{"upload-time": "2025-06-30T23:59:59Z"}),
        _file("foo-3.0.tar.gz", **{"upload-time": "2025-07-01T02:00:00+02:00"}),  # not as indexes write it
        _file("foo-4.0.tar.gz", **{"upload-time": late}),
        _file("foo-4.0-py3-none-any.whl", hashes={"sha256": "no"}, **{"upload-time": early}),  # rejected
        _file("foo-5.0.tar.gz", **{"upload-time": "2025-06-01T00:00:00.500000Z"}),  # in the second of the cut
    ]
    body = json.dumps({"files": files}).encode()
    ref = _reference(body)
    assert isinstance(ref, ProjectPage)
    for cut in (
        "2025-06-01T00:00:00Z",
        "2025-06-30T23:59:59Z",
        "2025-07-01T00:00:00Z",
        "2023-01-01T00:00:00Z",
    ):
        cutoff = datetime.fromisoformat(cut.replace("Z", "+00:00"))
        page = parse_json_page(body, project="foo", index="main", page_url=PAGE_URL)
        read: list[Any] = []
        assert page.spans is not None
        page.use_reader(_recording(body.decode(), read))
        for v in ref.versions():
            read.clear()
            assert page.uploaded_after(v, cutoff) == ref.uploaded_after(v, cutoff), (cut, v)
            later_by_text = {
                "2023-01-01T00:00:00Z": ("1.0", "2.0", "4.0", "5.0"),
                "2025-06-01T00:00:00Z": ("2.0",),
                "2025-06-30T23:59:59Z": (),
            }.get(cut, ())
            assert (read == []) == (str(v) in later_by_text), (cut, v, read)


# --- read back from the cache ---------------------------------------------------------------------


def _populate(f: IndexFactory) -> None:
    for v in ("1.0", "2.0", "3.0"):
        f.add_wheel("foo", v, upload_time="2024-01-01T00:00:00Z")
        f.add_wheel("foo", v, tags="cp311-cp311-manylinux_2_17_x86_64", upload_time="2024-01-02T00:00:00Z")
    f.add_sdist("foo", "2.0")


def _page(c: IndexClient, url: str) -> ProjectPage:
    page = c.project_page(IndexSource("default", url), "foo")
    assert isinstance(page, ProjectPage), page
    return page


def _answers_by_version(page: ProjectPage) -> dict[str, Any]:
    return {str(v): page.files_of(v) for v in page.versions()}


def _page_file(tmp_path: Path, server: Server) -> tuple[IndexCache, str, Path]:
    cache = IndexCache(tmp_path / "cache")
    url = f"{server.url().rstrip('/')}/foo/"
    path = cache.page_path(url)
    assert path is not None and path.is_file()
    return cache, url, path


def _page_and_entry(c: IndexClient, tmp_path: Path, server: Server) -> tuple[ProjectPage, IndexCache, Any]:
    """The page as the client parsed it, the cache, and the page's cache entry as stored."""
    page = _page(c, server.url())
    cache, url, _path = _page_file(tmp_path, server)
    stored = cache.get_page(url)
    assert stored is not None
    return page, cache, stored


def test_a_page_reads_its_entries_from_the_cached_page(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    _populate(index_factory)
    with IndexClient(disk_cache=False) as c:
        plain = _page(c, served_index.url())
    assert plain.spans is not None
    want = _answers_by_version(plain)
    assert [f.filename for f in want["2.0"]][-1] == "foo-2.0.tar.gz"
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        cold = _page(c, served_index.url())
        assert cold.spans is not None
        first = cold.files_of(Version("3.0"))
        assert first == plain.files_of(Version("3.0"))
        _cache, _url, path = _page_file(tmp_path, served_index)
        path.unlink()  # a page by spans holds no body: what it has not read yet is gone
        assert cold.files_of(Version("3.0")) == first  # read already
        with pytest.raises(IndexError_, match="changed or went away"):
            cold.files_of(Version("1.0"))
    served_index.reset()
    with IndexClient(cache_dir=tmp_path / "cache") as c:  # fetched again (the file was deleted)
        assert _answers_by_version(_page(c, served_index.url())) == want
    with IndexClient(cache_dir=tmp_path / "cache") as c:  # from the parsed form and the .json
        warm = _page(c, served_index.url())
        assert c.stats.pages_from_cache == 1 and c.stats.pages_fetched == 0
        assert warm.spans is not None and warm.raw is None
        assert _answers_by_version(warm) == want
        assert warm.files == plain.files and warm.rejected == plain.rejected


def test_a_page_rewritten_with_the_same_body_is_still_read(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """Another run revalidated the page meanwhile: a new head line and seal, the same body."""
    _populate(index_factory)
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        page, cache, stored = _page_and_entry(c, tmp_path, served_index)
        cache.put_page(replace(stored, fetched_at=stored.fetched_at + 12345.678, etag='"again"'))
        with IndexClient(disk_cache=False) as plain:
            assert _answers_by_version(page) == _answers_by_version(_page(plain, served_index.url()))


def test_a_page_whose_body_changed_meanwhile_is_not_read(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    _populate(index_factory)
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        page, cache, stored = _page_and_entry(c, tmp_path, served_index)
        changed = stored.body.replace(b"foo-1.0-py3-none-any.whl", b"foo-1.0-py2-none-any.whl")
        assert changed != stored.body and len(changed) == len(stored.body)
        cache.put_page(replace(stored, body=changed))
        with pytest.raises(IndexError_, match="changed or went away"):
            page.files_of(Version("1.0"))


def test_a_warm_page_checks_what_it_reads_before_using_it(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """Damage that keeps the size and the time (the parsed form still matches) is found in the
    blocks a lock reads."""
    _populate(index_factory)
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        _page(c, served_index.url())
    _cache, _url, path = _page_file(tmp_path, served_index)
    data = path.read_bytes()
    st = path.stat()
    at = data.index(b"foo-3.0-py3-none-any.whl")
    path.write_bytes(data[:at] + b"foo-3.1" + data[at + 7 :])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        warm = _page(c, served_index.url())
        assert c.stats.pages_fetched == 0 and warm.spans is not None
        with pytest.raises(IndexError_, match="changed or went away"):
            warm.files_of(Version("3.0"))
    assert not path.exists()  # discarded: the next run fetches it again
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        assert sorted(f.filename for f in _page(c, served_index.url()).files_of(Version("3.0"))) == [
            "foo-3.0-cp311-cp311-manylinux_2_17_x86_64.whl",
            "foo-3.0-py3-none-any.whl",
        ]


def test_a_warm_page_checks_only_the_blocks_it_reads(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """A page of many versions: damage far from the version read does not stop the read (its
    block is not read), and is found once a read reaches it."""
    for i in range(1, 320):
        index_factory.add_wheel("foo", f"{i}.0", upload_time="2024-01-01T00:00:00Z")
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        _page(c, served_index.url())
    _cache, _url, path = _page_file(tmp_path, served_index)
    data = path.read_bytes()
    near, far = data.index(b'"foo-1.0-py3-none-any.whl"'), data.index(b'"foo-99.0-py3-none-any.whl"')
    assert far - near > 2 * 64 * 1024  # two blocks apart
    st = path.stat()
    path.write_bytes(data[:near] + b'"foo-1.1' + data[near + 8 :])  # the same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with IndexClient(cache_dir=tmp_path / "cache") as c:
        warm = _page(c, served_index.url())
        assert c.stats.pages_fetched == 0 and warm.spans is not None
        assert [f.filename for f in warm.files_of(Version("99.0"))] == ["foo-99.0-py3-none-any.whl"]
        assert path.exists()
        with pytest.raises(IndexError_, match="changed or went away"):
            warm.files_of(Version("1.0"))
    assert not path.exists()  # discarded: the next run fetches it again


def test_block_checksums_cover_the_body_and_survive_the_parsed_form(tmp_path: Path) -> None:
    body = json.dumps({"files": [_file(f"foo-{i}.0-py3-none-any.whl") for i in range(1, 900)]}).encode()
    crcs = PageBody.block_crcs(body)
    assert len(crcs) == 4 * -(-len(body) // (64 * 1024)) and len(body) > 2 * 64 * 1024
    reader = PageBody(tmp_path / "x.json", PAGE_URL, b"seal", len(body), crcs)
    assert reader.form == (b"seal", len(body), crcs)


# --- the allocator ----------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt: Linux only")
def test_an_index_client_gives_big_buffers_back_when_freed() -> None:
    """After a big buffer is freed glibc would carve the next ones out of its heaps (and keep
    them); once an index client has loaded a page body they are mapped on their own: mallinfo2
    counts them mapped. A client that loads none (a lock the cache answers) leaves malloc alone."""
    script = textwrap.dedent(
        """
        import ctypes, sys
        class Info(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in
                        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = Info
        if sys.argv[1] != "plain":
            import httpx
            from kernodeck.index import IndexClient
            from kernodeck.index.models import IndexSource
            page = {"meta": {"api-version": "1.1"}, "name": "demo", "files": []}
            reply = lambda request: httpx.Response(
                200, json=page, headers={"Content-Type": "application/vnd.pypi.simple.v1+json"})
            with IndexClient(disk_cache=False, transport=httpx.MockTransport(reply)) as client:
                if sys.argv[1] == "page":
                    client.project_page(IndexSource("corp", "https://index.invalid/simple"), "demo")
        big = bytearray(24 << 20)
        del big  # glibc now takes buffers under 24 MiB from its heap
        before = libc.mallinfo2().hblkhd
        page = bytearray(4 << 20)
        print(libc.mallinfo2().hblkhd - before >= 4 << 20)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    got = {}
    for mode in ("plain", "client", "page"):
        r = subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, env=env, timeout=120
        )
        assert r.returncode == 0, r.stderr
        got[mode] = r.stdout.strip()
    assert got == {"plain": "False", "client": "False", "page": "True"}
