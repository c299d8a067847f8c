"""A JSON project page is validated lazily, one version at a time, with the same verdicts as an
eager parse of every entry (kernodeck.index.models.ProjectPage): kept by spans over its text (an
ASCII page, the usual case) or as its decoded entries (any other)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from packaging.version import Version

from kernodeck.index import models
from kernodeck.index.models import ProjectPage, parse_json_page

PAGE_URL = "https://index.example/simple/foo/"
SHA = "a" * 64


def _file(filename: str, **extra: object) -> dict[str, object]:
    return {
        "filename": filename,
        "url": f"https://files.example/{filename}",
        "hashes": {"sha256": SHA},
        "upload-time": "2024-01-02T03:04:05.123456Z",
        **extra,
    }


def _page_body(ascii_only: bool = True) -> bytes:
    files: list[object] = [
        _file("foo-1.0.tar.gz"),
        _file("foo-1.0-py3-none-any.whl"),
        "not an object",
        _file("foo-1.0.0-py3-none-any.whl", **{"upload-time": "2024-01-03T00:00:00Z"}),  # 2nd spelling
        _file("foo-2.0-py3-none-any.whl", hashes={"sha256": "zz"}),  # rejected: bad hash
        _file("foo-2.0.tar.gz", **{"upload-time": "2025-06-01T00:00:00Z"}),
        _file("bar-3.0-py3-none-any.whl"),  # rejected: another project
        _file("foo-3.0-py3-none-any.whl", url="file:///etc/passwd"),  # rejected: leaves the index
        _file("foo-4.0rc1-py3-none-any.whl", **{"requires-python": ">=3.9", "yanked": "défaut"}),
        _file("foo-4.0rc1-cp311-cp311-manylinux_2_28_x86_64.whl", **{"upload-time": "2024-05-05T05:05:05Z"}),
        _file("foo-nope-py3-none-any.whl"),  # rejected: bad version
        {"url": "https://files.example/x.whl"},  # rejected: no filename
    ]
    doc = {"meta": {"api-version": "1.1"}, "files": files}
    return json.dumps(doc, ensure_ascii=ascii_only).encode()


KINDS = ["spans", "raw"]


def _lazy(kind: str = "spans") -> ProjectPage:
    page = parse_json_page(_page_body(kind == "spans"), project="Foo", index="main", page_url=PAGE_URL)
    assert (page.spans is not None, page.raw is not None) == (kind == "spans", kind == "raw")
    return page


def _eager() -> ProjectPage:
    full = _lazy()
    return ProjectPage(full.name, full.index, rejected=full.rejected, url=full.url, entries=full.entries)


@pytest.mark.parametrize("kind", KINDS)
def test_versions_files_and_rejections_match_an_eager_parse(kind: str) -> None:
    lazy, eager = _lazy(kind), _eager()
    assert (
        list(lazy.versions()) == list(eager.versions()) == [Version("1.0"), Version("2.0"), Version("4.0rc1")]
    )
    assert [str(v) for v in lazy.versions()] == [str(v) for v in eager.versions()]
    for v in eager.versions():
        assert lazy.files_of(v) == eager.files_of(v)
    assert [f.filename for f in lazy.files_of(Version("1.0"))] == [
        "foo-1.0.tar.gz",
        "foo-1.0-py3-none-any.whl",
        "foo-1.0.0-py3-none-any.whl",
    ]
    assert [f.filename for f in lazy.files_of(Version("2.0"))] == ["foo-2.0.tar.gz"]
    assert lazy.files == eager.files and len(lazy) == len(eager) == 6
    assert lazy.rejected == eager.rejected
    assert [label for label, _ in lazy.rejected] == [
        "entry 2",
        "foo-2.0-py3-none-any.whl",
        "bar-3.0-py3-none-any.whl",
        "foo-3.0-py3-none-any.whl",
        "foo-nope-py3-none-any.whl",
        "entry 11",
    ]
    assert lazy == eager
    assert [f.yanked for f in lazy.files_of(Version("4.0rc1"))] == ["défaut", None]
    assert [f.requires_python for f in lazy.files_of(Version("4.0rc1"))] == [">=3.9", None]
    assert {f.sha256 for f in lazy.files} == {SHA}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("cutoff", "after"),
    [
        (datetime(2024, 1, 2, 12, tzinfo=timezone.utc), {"1.0": False, "2.0": True, "4.0rc1": False}),
        (datetime(2020, 1, 1, tzinfo=timezone.utc), {"1.0": True, "2.0": True, "4.0rc1": True}),
        (datetime(2026, 1, 1, tzinfo=timezone.utc), {"1.0": False, "2.0": False, "4.0rc1": False}),
    ],
)
def test_exclude_newer_cut_matches_an_eager_parse(
    kind: str, cutoff: datetime, after: dict[str, bool]
) -> None:
    lazy, eager = _lazy(kind), _eager()
    for text, want in after.items():
        assert lazy.uploaded_after(Version(text), cutoff) is want
        assert eager.uploaded_after(Version(text), cutoff) is want
    assert lazy.uploaded_after(Version("9.9"), cutoff) is False


@pytest.mark.parametrize("kind", KINDS)
def test_one_version_validates_only_its_own_files(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    wheels = [_file(f"foo-{v}.0-{t}-none-any.whl") for v in range(1, 41) for t in ("py2", "py3", "py2.py3")]
    body = json.dumps({"files": wheels, "note": "é"}, ensure_ascii=kind == "spans").encode()
    seen: list[str] = []
    real = models._entry

    def counting(*args: object, **kw: object) -> models.Entry:
        seen.append(str(kw["filename"]))
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(models, "_entry", counting)
    page = parse_json_page(body, project="foo", index="main", page_url=PAGE_URL)
    # by spans, the versions are grouped as the page is walked; kept raw, when first asked
    assert len(seen) == (40 if kind == "spans" else 0)
    assert len(page.versions()) == 40
    assert len(seen) == 40  # the first file of each version proves the version exists
    again = 1 if kind == "spans" else 0  # by spans, a version's first file is not kept validated
    oldest = min(page.versions())
    assert page.uploaded_after(oldest, datetime(2020, 1, 1, tzinfo=timezone.utc)) is True
    assert page.uploaded_after(oldest, datetime(2026, 1, 1, tzinfo=timezone.utc)) is False
    # the cut reads the times as written; the first file decided "not later" (by spans, validated
    # again to say so)
    assert len(seen) == 40 + again
    newest = max(page.versions())
    assert [f.filename for f in page.files_of(newest)] == [
        "foo-40.0-py2-none-any.whl",
        "foo-40.0-py3-none-any.whl",
        "foo-40.0-py2.py3-none-any.whl",
    ]
    assert len(seen) == 42 + 2 * again  # and only that version's other two
    # every entry, once (by spans the first of each version twice), when all are asked for
    assert len(page.rejected) == 0 and len(seen) == 120 + 40 * again
