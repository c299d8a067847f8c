"""Resolution edge cases: yanked files with extras and constraints, constraint-only names, prereleases before exclude-newer, missing wheels named by tag."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.errors import ResolutionError
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import hashes, lock, pins, read_lock, sha_of, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


def test_extra_does_not_let_a_yanked_file_in(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    # One wheel of lib 1.0 is yanked, the other is not; `lib[fast]>=1` is no exact pin, so the
    # yanked wheel must not be hashed (the base candidate behind the extra used to be built as
    # if pinned exactly, taking the yanked file in).
    f = index_factory
    good = f.add_wheel("lib", "1.0", tags="cp311-cp311-manylinux_2_17_x86_64", extras={"fast": ["speedup"]})
    bad = f.add_wheel("lib", "1.0", tags="py3-none-any", extras={"fast": ["speedup"]}, yanked="broken")
    f.add_wheel("speedup", "1.0")
    path = write_manifest(tmp_path / "p", requirements=["lib[fast]>=1"], default_url=served_index.url())
    lock(path, cache)
    text = read_lock(path)
    assert pins(text) == {"lib": "1.0", "speedup": "1.0"}
    assert sha_of(f, [good.name]) <= hashes(text)
    assert not (sha_of(f, [bad.name]) & hashes(text))


def test_extra_pinned_exactly_may_take_a_yanked_file(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    only = f.add_wheel("lib", "1.0", extras={"fast": ["speedup"]}, yanked="broken")
    f.add_wheel("speedup", "1.0")
    path = write_manifest(tmp_path / "p", requirements=["lib[fast]==1.0"], default_url=served_index.url())
    lock(path, cache)
    text = read_lock(path)
    assert pins(text) == {"lib": "1.0", "speedup": "1.0"}
    assert sha_of(f, [only.name]) <= hashes(text)


def test_constraint_only_names_and_duplicate_requirements(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("lib", "1.0", extras={"fast_x": ["speedup"]})
    f.add_wheel("lib", "2.0", extras={"fast_x": ["speedup"]})
    f.add_wheel("speedup", "1.0")
    f.add_wheel("other", "1.0")
    # A constraint never adds a package; duplicate requirements (any spelling of name and extra)
    # merge into one pin.
    path = write_manifest(
        tmp_path / "p",
        requirements=["lib>=1", "lib<2", "LIB[Fast.X]"],
        constraints=["other==1.0", "speedup<2"],
        default_url=served_index.url(),
    )
    lock(path, cache)
    text = read_lock(path)
    assert pins(text) == {"lib": "1.0", "speedup": "1.0"}
    assert text.count("lib==1.0") == 1
    assert "speedup==1.0 \\\n    --hash=sha256:" in text


def test_prerelease_allowed_when_every_version_before_exclude_newer_is_one(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    # At exclude-newer only 1.0rc1 existed: pip and uv (prereleases "if necessary") take it;
    # the final 1.0, uploaded later, used to count as a final release and refuse every version.
    f.add_wheel("pre", "1.0rc1", upload_time="2024-01-01T00:00:00Z")
    f.add_wheel("pre", "1.0", upload_time="2025-01-01T00:00:00Z")
    path = write_manifest(
        tmp_path / "p",
        requirements=["pre"],
        default_url=served_index.url(),
        exclude_newer="2024-06-01T00:00:00Z",
    )
    lock(path, cache)
    assert pins(read_lock(path)) == {"pre": "1.0rc1"}


def test_exact_pin_in_a_constraint_may_take_a_yanked_version(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    # PEP 592: an exact pin may take a yanked file; pip and uv count `==` in a constraint too.
    f.add_wheel("y", "1.0")
    f.add_wheel("y", "2.0", yanked="broken")
    path = write_manifest(
        tmp_path / "p", requirements=["y"], constraints=["y==2.0"], default_url=served_index.url()
    )
    lock(path, cache)
    assert pins(read_lock(path)) == {"y": "2.0"}


def test_required_version_without_a_wheel_names_its_tags(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    # lib 2.0 installs anywhere, but the manifest asks for 1.0, which has only a Windows wheel:
    # the message must name the package, the platform and the tags of 1.0's files (it used to
    # list the other usable versions only).
    f = index_factory
    f.add_wheel("lib", "1.0", tags="cp311-cp311-win_amd64")
    f.add_wheel("lib", "2.0")
    path = write_manifest(tmp_path / "p", requirements=["lib==1.0"], default_url=served_index.url())
    with pytest.raises(ResolutionError) as info:
        lock(path, cache)
    err = info.value
    assert "no file of lib 1.0 can be installed on platform linux" in err.message
    assert "manylinux_2_28 x86_64" in err.message
    assert any("cp311-cp311-win_amd64" in c for c in err.context)
    assert any("the manifest requires lib==1.0" in c for c in err.context)


def _usable_line(err: ResolutionError) -> str:
    return next(c for c in err.context if c.startswith("versions of lib usable on linux"))


def test_versions_usable_lists_no_prerelease_unless_allowed(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    # `prereleases = false`: a list of candidates in an error names only versions a lock could
    # choose; 2.0rc1 could not, so it is not offered as "usable".
    f = index_factory
    f.add_wheel("lib", "1.0")
    f.add_wheel("lib", "2.0rc1")
    path = write_manifest(tmp_path / "p", requirements=["lib>=3"], default_url=served_index.url())
    with pytest.raises(ResolutionError) as info:
        lock(path, cache)
    line = _usable_line(info.value)
    assert line.endswith(": 1.0")
    assert "rc1" not in line


@pytest.mark.parametrize(
    ("requirement", "prereleases"), [("lib>=3", True), ("lib>=3.0rc1", False)], ids=["allowed", "named"]
)
def test_versions_usable_lists_prereleases_when_allowed_or_named(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    cache: Path,
    requirement: str,
    prereleases: bool,
) -> None:
    f = index_factory
    f.add_wheel("lib", "1.0")
    f.add_wheel("lib", "2.0rc1")
    path = write_manifest(
        tmp_path / "p", requirements=[requirement], default_url=served_index.url(), prereleases=prereleases
    )
    with pytest.raises(ResolutionError) as info:
        lock(path, cache)
    assert _usable_line(info.value).endswith(": 2.0rc1, 1.0")
