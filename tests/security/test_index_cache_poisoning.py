"""Cross-index cache poisoning: metadata read from an untrusted index never answers for another.

The evil index publishes `foo 1.0` depending on `evil`, and its page claims the sha256 of the good
index's `foo 1.0`. A lock against it must not change what a later lock against the good index
resolves, with the same cache, with and without PEP 658 metadata files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.hostile_index import HostileServer
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.lock_project import lock, pins, write_manifest


@pytest.mark.parametrize("metadata_files", [True, False])
def test_evil_index_claiming_the_same_hash_cannot_poison_a_later_lock(
    tmp_path: Path, metadata_files: bool
) -> None:
    good = IndexFactory(tmp_path / "good")
    good.add_wheel("foo", "1.0", requires=["bar"])
    good.add_wheel("bar", "1.0")
    evil = IndexFactory(tmp_path / "evil")
    evil.add_wheel("foo", "1.0", requires=["evil"])
    evil.add_wheel("evil", "1.0")
    good_sha = good.artifact("foo-1.0-py3-none-any.whl").sha256
    cache = tmp_path / "cache"
    with (
        HostileServer(
            evil, metadata_files=metadata_files, hash_lies={"foo-1.0-py3-none-any.whl": good_sha}
        ) as bad,
        HostileServer(good, metadata_files=metadata_files) as honest,
    ):
        m_evil = write_manifest(tmp_path / "evil-proj", requirements=["foo"], default_url=bad.url())
        lock(m_evil, cache)
        assert pins((m_evil.parent / requirements_filename("linux")).read_text()) == {
            "foo": "1.0",
            "evil": "1.0",
        }

        m_good = write_manifest(tmp_path / "good-proj", requirements=["foo"], default_url=honest.url())
        for refresh in (False, True):
            lock(m_good, cache, refresh=refresh)
            text = (m_good.parent / requirements_filename("linux")).read_text()
            assert pins(text) == {"foo": "1.0", "bar": "1.0"}
            assert "evil" not in text
            assert good_sha in text
