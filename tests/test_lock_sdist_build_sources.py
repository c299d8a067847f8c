"""An sdist's metadata is built with build requirements from the lock's own sources: the manifest's
index, releases before exclude-newer, and none of the locking user's pip settings (real pip, real
PEP 517 build, a real local index over loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.errors import KernodeckError
from kernodeck.index.buildenv import BuildSources, install_argv
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import lock, read_lock, write_manifest
from tests.fixtures.old_sdist import MISSING, NEEDS_HELPER, publish_old_sdist

pytest_plugins = ["tests.fixtures.index_fixtures"]


def test_build_requirements_come_from_the_manifest_index_before_exclude_newer(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    publish_old_sdist(index_factory)
    # the locking user's own pip settings name an index that does not answer and a constraint
    # the build could not meet: neither reaches the build
    constraints = tmp_path / "user-constraints.txt"
    constraints.write_text("kd-build-helper>=3\n")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_CONSTRAINT", str(constraints))
    manifest = write_manifest(
        tmp_path / "proj",
        requirements=["oldsrc"],
        default_url=served_index.url(),
        allow_sdist=["oldsrc"],
        exclude_newer="2025-06-01T00:00:00Z",
    )
    result = lock(manifest, tmp_path / "cache")
    assert [p.status for p in result.platforms] == ["written"]
    text = read_lock(manifest)
    assert "oldsrc==0.4" in text and "foo==1.0" in text
    # the helper was fetched from the manifest's index, 1.0 only (2.0 is after exclude-newer)
    fetched = [p for m, p, *_ in served_index.requests if m == "GET" and "kd_build_helper" in p]
    assert fetched and all("-1.0-" in p for p in fetched), fetched


def test_without_exclude_newer_the_newest_build_requirement_is_used_and_its_failure_named(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
) -> None:
    publish_old_sdist(index_factory)
    manifest = write_manifest(
        tmp_path / "proj", requirements=["oldsrc"], default_url=served_index.url(), allow_sdist=["oldsrc"]
    )
    with pytest.raises(KernodeckError) as e:
        lock(manifest, tmp_path / "cache")
    assert "building the metadata of oldsrc-0.4.tar.gz failed" in e.value.message
    assert any(MISSING in line for line in e.value.context)
    assert e.value.hint and "build-constraints" in e.value.hint


def test_a_build_requirement_the_index_lacks_is_named_with_the_manifest_as_its_source(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
) -> None:
    index_factory.add_wheel("foo", "1.0")
    index_factory.add_sdist("oldsrc", "0.4", requires=["foo>=1"], backend_extra=NEEDS_HELPER)
    manifest = write_manifest(
        tmp_path / "proj", requirements=["oldsrc"], default_url=served_index.url(), allow_sdist=["oldsrc"]
    )
    with pytest.raises(KernodeckError) as e:
        lock(manifest, tmp_path / "cache")
    said = " ".join(e.value.context)
    assert "installing its build requirements (kd-build-helper) failed" in said
    assert "Could not find a version that satisfies the requirement kd-build-helper" in said
    assert e.value.hint and "manifest's indexes" in e.value.hint


def test_build_sources_lines_keep_credentials_as_placeholders() -> None:
    got = BuildSources.of(
        [
            ("simple", "https://${IX_USER}:${IX_TOKEN}@example.invalid/simple"),
            ("simple", "https://mirror.invalid/simple"),
            ("find-links", "/srv/wheels"),
        ],
        None,
    )
    assert got.options == (
        "--index-url https://${IX_USER}:${IX_TOKEN}@example.invalid/simple",
        "--extra-index-url https://mirror.invalid/simple",
        "--find-links /srv/wheels",
    )
    assert got.variables == ("IX_USER", "IX_TOKEN")
    argv = install_argv("/env/bin/python", "reqs.txt", got)
    assert "--isolated" in argv and argv[-2:] == ["-r", "reqs.txt"]
    assert not any("IX_TOKEN" in a or "example.invalid" in a for a in argv)  # only in the file
