"""Inputs stay inside their bounds and load does not break a lock: an http index page linking to
file:// is refused; range requests answered with 200 and the whole body, a wrong Content-Range, a
short body, connections reset or cut mid-body never make a lock fail or use wrong bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.errors import KernodeckError
from kernodeck.index import IndexClient, IndexSource, ProjectPage
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.hostile_index import HostileServer
from tests.fixtures.index_factory import IndexFactory, build_wheel_bytes, metadata_text
from tests.fixtures.lock_project import lock, pins, write_manifest


def _factory(tmp_path: Path) -> IndexFactory:
    f = IndexFactory(tmp_path / "ix")
    # payload: the wheels are bigger than the first range read, so ranges really are partial
    f.add_wheel("foo", "1.0", requires=["bar"], payload_size=40_000)
    f.add_wheel("bar", "1.0", payload_size=40_000)
    return f


def test_file_link_from_an_http_index_is_refused(tmp_path: Path) -> None:
    f = _factory(tmp_path)
    # a real local wheel of bar 1.0 with a different dependency, with its true hash
    filename, data = build_wheel_bytes(
        "bar", "1.0", metadata=metadata_text("bar", "1.0", requires=["stolen"]), files={"bar/x.py": b"y"}
    )
    local = tmp_path / "local" / filename
    local.parent.mkdir()
    local.write_bytes(data)
    with HostileServer(f, link_override={filename: local.as_uri()}) as srv:
        m = write_manifest(
            tmp_path / "proj", requirements=["foo"], default_url=srv.url(), constraints=["bar==1.0"]
        )
        with pytest.raises(KernodeckError, match="bar has no files"):
            lock(m, tmp_path / "cache")
        with IndexClient(cache_dir=tmp_path / "cache2") as c:
            page = c.project_page(IndexSource("default", srv.url()), "bar")
    assert not (m.parent / requirements_filename("linux")).exists()
    assert isinstance(page, ProjectPage) and page.files == ()
    assert [name for name, _ in page.rejected] == [filename]
    assert "leaves the index" in page.rejected[0][1]


@pytest.mark.parametrize(
    ("range_mode", "break_files"),
    [("whole", None), ("wrong-range", None), ("short", None), (None, "reset"), (None, "cut")],
)
def test_hostile_file_answers_never_break_or_bend_a_lock(
    tmp_path: Path, range_mode: str | None, break_files: str | None
) -> None:
    f = _factory(tmp_path)
    with HostileServer(f, metadata_files=False, range_mode=range_mode, break_files=break_files) as srv:
        m = write_manifest(tmp_path / "proj", requirements=["foo"], default_url=srv.url())
        lock(m, tmp_path / "cache")
        text = (m.parent / requirements_filename("linux")).read_text()
        hostile_requests = len(srv.requests)
    assert pins(text) == {"foo": "1.0", "bar": "1.0"}
    for fn in ("foo-1.0-py3-none-any.whl", "bar-1.0-py3-none-any.whl"):
        assert f.artifact(fn).sha256 in text
    assert hostile_requests > 0
