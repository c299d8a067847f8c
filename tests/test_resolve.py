"""Resolution against a local test index: markers, extras, constraints, yanked, requires-python,
exclude-newer, routing, sdists, metadata by range requests, unsatisfiable manifests, warm caches.

The helpers (`write_manifest`, `lock`, `pins`, `hashes`) live in tests/fixtures/lock_project.py.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from kernodeck.errors import KernodeckError, ResolutionError, UsageError
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import (
    LINUX,
    LINUX310,
    MACOS,
    WINDOWS,
    hashes,
    lock,
    pins,
    read_lock,
    sha_of,
    write_manifest,
)

pytest_plugins = ["tests.fixtures.index_fixtures"]


# --- markers, extras, constraints ------------------------------------------------------------------


def test_markers_are_evaluated_per_platform(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel(
        "app",
        "1.0",
        requires=[
            'linuxdep; sys_platform == "linux"',
            'windep; sys_platform == "win32"',
            'backport; python_version < "3.11"',
        ],
    )
    for n in ("linuxdep", "windep", "backport"):
        f.add_wheel(n, "1.0")
    path = write_manifest(
        tmp_path / "p",
        requirements=["app"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS, LINUX310],
    )
    result = lock(path, cache)
    assert [p.platform for p in result.platforms] == ["linux", "windows", "linux-py310"]
    assert pins(read_lock(path, "linux")) == {"app": "1.0", "linuxdep": "1.0"}
    assert pins(read_lock(path, "windows")) == {"app": "1.0", "windep": "1.0"}
    assert pins(read_lock(path, "linux-py310")) == {"app": "1.0", "backport": "1.0", "linuxdep": "1.0"}
    text = read_lock(path, "linux")
    assert "app==1.0 \\\n" in text and "    # via app\n" in text and "    # via -r repro.toml\n" in text
    assert "# platform: linux (cpython 3.11, manylinux_2_28 x86_64)" in text


def test_manifest_requirement_markers(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    index_factory.add_wheel("winonly", "1.0")
    index_factory.add_wheel("everywhere", "1.0")
    path = write_manifest(
        tmp_path / "p",
        requirements=['winonly; sys_platform == "win32"', "everywhere"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
    )
    lock(path, cache)
    assert pins(read_lock(path, "linux")) == {"everywhere": "1.0"}
    assert pins(read_lock(path, "windows")) == {"everywhere": "1.0", "winonly": "1.0"}


def test_extras_pull_extra_dependencies(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("lib", "2.0", requires=["core>=1"], extras={"fast": ["speedup>=1"], "docs": ["sphinxish"]})
    f.add_wheel("core", "1.5")
    f.add_wheel("speedup", "1.1")
    f.add_wheel("sphinxish", "1.0")
    path = write_manifest(tmp_path / "p", requirements=["lib[fast]>=1"], default_url=served_index.url())
    lock(path, cache)
    text = read_lock(path)
    assert pins(text) == {"core": "1.5", "lib": "2.0", "speedup": "1.1"}
    assert "lib==2.0 \\\n" in text  # extras are not written: the pins are what gets installed
    assert re.search(r"speedup==1\.1 \\\n.*\n    # via lib\n", text)


def test_constraints_limit_versions(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("app", "1.0", requires=["dep"])
    for v in ("1.0", "1.5", "2.0"):
        f.add_wheel("dep", v)
    f.add_wheel("unused", "1.0")
    path = write_manifest(
        tmp_path / "p",
        requirements=["app"],
        constraints=["dep<2", "unused<1"],
        default_url=served_index.url(),
    )
    lock(path, cache)
    assert pins(read_lock(path)) == {"app": "1.0", "dep": "1.5"}  # a constraint never adds a package


def test_prereleases_only_when_asked(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("pre", "1.0")
    f.add_wheel("pre", "2.0b1")
    f.add_wheel("onlypre", "0.1a1")
    p1 = write_manifest(tmp_path / "a", requirements=["pre", "onlypre"], default_url=served_index.url())
    lock(p1, cache)
    assert pins(read_lock(p1)) == {"pre": "1.0", "onlypre": "0.1a1"}  # all-prerelease projects are fine
    p2 = write_manifest(tmp_path / "b", requirements=["pre>=2.0b1"], default_url=served_index.url())
    lock(p2, cache)
    assert pins(read_lock(p2)) == {"pre": "2.0b1"}
    p3 = write_manifest(
        tmp_path / "c", requirements=["pre"], default_url=served_index.url(), prereleases=True
    )
    lock(p3, cache)
    assert pins(read_lock(p3)) == {"pre": "2.0b1"}


# --- files: yanked, requires-python, exclude-newer -----------------------------------------------------


def test_yanked_only_when_pinned_exactly(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("y", "1.0")
    f.add_wheel("y", "2.0", yanked="broken")
    p1 = write_manifest(tmp_path / "a", requirements=["y"], default_url=served_index.url())
    lock(p1, cache)
    assert pins(read_lock(p1)) == {"y": "1.0"}
    p2 = write_manifest(tmp_path / "b", requirements=["y==2.0"], default_url=served_index.url())
    lock(p2, cache)
    assert pins(read_lock(p2)) == {"y": "2.0"}


def test_requires_python_from_page_and_from_metadata(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("rp", "1.0", requires_python=">=3.8")
    f.add_wheel("rp", "2.0", requires_python=">=3.12")  # on the page
    f.add_wheel("meta", "1.0")
    f.add_wheel("meta", "2.0", requires_python=">=3.12", page_requires_python=False)  # only in METADATA
    path = write_manifest(
        tmp_path / "p",
        requirements=["rp", "meta"],
        default_url=served_index.url(),
        platforms=[LINUX, {"name": "new", "os": "linux", "arch": "x86_64", "python": "3.12"}],
        same_versions="no",  # each platform on its own
    )
    lock(path, cache)
    assert pins(read_lock(path, "linux")) == {"meta": "1.0", "rp": "1.0"}
    assert pins(read_lock(path, "new")) == {"meta": "2.0", "rp": "2.0"}


def test_exclude_newer(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("fresh", "1.0", upload_time="2024-05-01T00:00:00Z")
    f.add_wheel("fresh", "2.0", upload_time="2025-06-01T00:00:00Z")
    path = write_manifest(
        tmp_path / "p",
        requirements=["fresh"],
        default_url=served_index.url(),
        exclude_newer="2025-01-01T00:00:00Z",
    )
    lock(path, cache)
    text = read_lock(path)
    assert pins(text) == {"fresh": "1.0"}
    assert "exclude-newer: 2025-01-01T00:00:00Z" in text


# --- routing ---------------------------------------------------------------------------------------------


def test_explicit_index_beats_a_higher_version_on_the_default(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("corp-tokenizer", "1.0", index="corp", requires=["helper"])
    f.add_wheel("corp-tokenizer", "99.0", index="default")  # a dependency-confusion attempt
    f.add_wheel("helper", "1.0")
    f.add_wheel("helper", "5.0", index="corp")  # not routed to corp: must come from default
    path = write_manifest(
        tmp_path / "p",
        requirements=["corp-tokenizer"],
        indexes=[
            {"name": "default", "url": served_index.url(), "default": True},
            {"name": "corp", "url": served_index.url("corp"), "packages": ["corp-tokenizer"]},
        ],
    )
    lock(path, cache)
    text = read_lock(path)
    assert pins(text) == {"corp-tokenizer": "1.0", "helper": "1.0"}
    assert hashes(text) == sha_of(f, ["corp_tokenizer-1.0-py3-none-any.whl"], "corp") | sha_of(
        f, ["helper-1.0-py3-none-any.whl"]
    )
    assert f"--index-url {served_index.url()}\n--extra-index-url {served_index.url('corp')}\n" in text
    assert served_index.count(contains="/default/simple/corp-tokenizer") == 0  # never asked elsewhere


def test_sources_table_routes_a_package(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("private", "1.0", index="corp")
    f.add_wheel("private", "3.0")
    path = write_manifest(
        tmp_path / "p",
        requirements=["private"],
        indexes=[
            {"name": "default", "url": served_index.url(), "default": True},
            {"name": "corp", "url": served_index.url("corp")},
        ],
        sources={"private": "corp"},
    )
    lock(path, cache)
    assert pins(read_lock(path)) == {"private": "1.0"}


def test_first_index_wins_for_unrouted_packages(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("shared", "1.0")
    f.add_wheel("shared", "2.0", index="extra")
    f.add_wheel("onlyextra", "1.0", index="extra")
    path = write_manifest(
        tmp_path / "p",
        requirements=["shared", "onlyextra"],
        indexes=[
            {"name": "default", "url": served_index.url(), "default": True},
            {"name": "extra", "url": served_index.url("extra")},
        ],
    )
    lock(path, cache)
    assert pins(read_lock(path)) == {"onlyextra": "1.0", "shared": "1.0"}


# --- sdists ------------------------------------------------------------------------------------------------


def test_wheel_less_package_fails_naming_package_platform_and_tags(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_sdist("srconly", "1.0")
    f.add_wheel("srconly", "1.0", tags="cp311-cp311-win_amd64")
    path = write_manifest(tmp_path / "p", requirements=["srconly"], default_url=served_index.url())
    with pytest.raises(ResolutionError) as ei:
        lock(path, cache)
    text = ei.value.render()
    assert "srconly" in ei.value.message and "platform linux" in ei.value.message
    assert "cp311-cp311-win_amd64" in text
    assert "allow-sdist" in text
    assert not (path.parent / requirements_filename("linux")).exists()


def test_a_pre_release_wheel_does_not_hide_that_the_wanted_versions_are_sdists(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    """pandoc's case in a Poetry dev group: `pandoc = "^2.3"`, 2.3 and 2.4 only as sdists, a
    2.4b0 wheel (a pre-release the lock does not take). The error names the sdists and the
    allow-sdist hint, as when no wheel exists at all."""
    f = index_factory
    f.add_sdist("srconly", "2.3")
    f.add_sdist("srconly", "2.4")
    f.add_wheel("srconly", "2.4b0")
    f.add_wheel("srconly", "1.1.0")
    path = write_manifest(tmp_path / "p", requirements=["srconly>=2.3,<3.0"], default_url=served_index.url())
    with pytest.raises(ResolutionError) as ei:
        lock(path, cache)
    text = ei.value.render()
    assert "no file of srconly 2.4, 2.3 can be installed" in ei.value.message
    assert "its source distributions: srconly-2.3.tar.gz, srconly-2.4.tar.gz" in text
    assert ei.value.hint and "add 'srconly' to [packages] allow-sdist" in ei.value.hint


def test_allow_sdist_locks_the_sdist(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_sdist("srconly", "1.0", requires=["dep>=1"])
    f.add_wheel("dep", "1.0")
    path = write_manifest(
        tmp_path / "p", requirements=["srconly"], default_url=served_index.url(), allow_sdist=["srconly"]
    )
    lock(path, cache)
    text = read_lock(path)
    assert pins(text) == {"dep": "1.0", "srconly": "1.0"}  # dependencies came from a PEP 517 metadata build
    assert sha_of(f, ["srconly-1.0.tar.gz"]) <= hashes(text)
    assert "--only-binary :all:" not in text and "--prefer-binary" in text


_WARNS = """
import warnings as _w

def get_requires_for_build_wheel(config_settings=None):
    _w.warn("Unknown distribution option: 'test_requires'")
    return []
"""

_FAILS = """
import sys as _sys

def get_requires_for_build_wheel(config_settings=None):
    print("running egg_info", file=_sys.stderr)
    raise ModuleNotFoundError("No module named 'numpy'")
"""


def test_an_sdist_backends_warnings_stay_out_of_the_output(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    """setuptools prints dozens of lines of deprecation notices per old sdist; pyproject_hooks
    re-raises them as warnings in the locking process, where they buried the lock's own output."""
    index_factory.add_sdist("srconly", "1.0", backend_extra=_WARNS)
    path = write_manifest(
        tmp_path / "p", requirements=["srconly"], default_url=served_index.url(), allow_sdist=["srconly"]
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lock(path, cache)
    assert pins(read_lock(path)) == {"srconly": "1.0"}
    assert not [w for w in seen if "test_requires" in str(w.message)]


_NEEDS_PKG_RESOURCES = """
def get_requires_for_build_wheel(config_settings=None):
    raise ModuleNotFoundError("No module named 'pkg_resources'")  # as an old setup.py's import fails
"""


def test_an_sdist_whose_build_needs_pkg_resources_says_so(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    """Old setup.py files import pkg_resources, which setuptools 81 removed (albumentations 0.4.3
    in CompVis/stable-diffusion's environment): the hint names that, not a generic build failure."""
    index_factory.add_sdist("srconly", "1.0", backend_extra=_NEEDS_PKG_RESOURCES)
    path = write_manifest(
        tmp_path / "p", requirements=["srconly"], default_url=served_index.url(), allow_sdist=["srconly"]
    )
    with pytest.raises(KernodeckError) as ei:
        lock(path, cache)
    assert "| ModuleNotFoundError: No module named 'pkg_resources'" in ei.value.render()
    assert ei.value.hint is not None and "setuptools 81 and later no longer ship" in ei.value.hint


def test_a_failed_sdist_build_shows_what_the_backend_said(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    index_factory.add_sdist("srconly", "1.0", backend_extra=_FAILS)
    path = write_manifest(
        tmp_path / "p", requirements=["srconly"], default_url=served_index.url(), allow_sdist=["srconly"]
    )
    with pytest.raises(KernodeckError) as ei:
        lock(path, cache)
    text = ei.value.render()
    assert "building the metadata of srconly-1.0.tar.gz failed" in text
    assert "| running egg_info" in text
    assert "| ModuleNotFoundError: No module named 'numpy'" in text


# --- metadata transport and caching -------------------------------------------------------------------------


def test_range_requests_when_no_metadata_file(
    index_factory: IndexFactory, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("big", "1.0", requires=["small"], payload_size=400_000)
    f.add_wheel("small", "1.0")
    with f.serve(metadata_files=False) as srv:
        path = write_manifest(tmp_path / "p", requirements=["big"], default_url=srv.url())
        lock(path, cache)
        assert pins(read_lock(path)) == {"big": "1.0", "small": "1.0"}
        assert srv.count(suffix=".metadata") == 0
        assert srv.count(suffix=".whl", ranged=True) >= 2
        assert srv.count(suffix="big-1.0-py3-none-any.whl", method="GET", ranged=False) == 0


def test_a_walk_down_a_projects_versions_reads_ahead_of_the_resolver(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    """When the newest releases of a project each conflict with what is already pinned, the
    resolver tries them one by one, each after the last one's metadata arrived (60 releases of
    ultralytics took 14 s on a real network). The reads of the next older releases start ahead of
    it, so the walk waits for a few reads; the pins are those of a walk without reading ahead."""
    f = index_factory
    f.add_wheel("dep", "1.0")
    f.add_wheel("dep", "2.0")
    for n in range(1, 81):
        f.add_wheel("app", f"{n}.0", requires=["dep>=2"] if n > 70 else ["dep>=1"])
    path = write_manifest(tmp_path / "p", requirements=["dep<2", "app"], default_url=served_index.url())
    lock(path, cache)
    assert pins(read_lock(path)) == {"app": "70.0", "dep": "1.0"}
    # releases the resolver never had to try were read ahead of it, a bounded number of them
    assert served_index.count(suffix="app-69.0-py3-none-any.whl.metadata") == 1
    assert served_index.count(suffix="app-30.0-py3-none-any.whl.metadata") == 0


def test_warm_relock_reads_no_metadata_over_the_network(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("app", "1.0", requires=["dep"])
    f.add_wheel("dep", "1.0")
    path = write_manifest(
        tmp_path / "p", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    lock(path, cache)
    first = read_lock(path)
    assert served_index.count(suffix=".metadata") >= 2
    served_index.reset()
    result = lock(path, cache)
    assert read_lock(path) == first
    assert served_index.count(suffix=".metadata") == 0
    assert served_index.count(suffix=".whl") == 0
    assert all(p.status == "unchanged" for p in result.platforms)


def test_metadata_is_shared_across_platforms(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    index_factory.add_wheel("pure", "1.0")
    path = write_manifest(
        tmp_path / "p",
        requirements=["pure"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS, MACOS],
    )
    lock(path, cache)
    assert served_index.count(suffix="pure-1.0-py3-none-any.whl.metadata") == 1
    assert served_index.count(contains="/simple/pure") == 1


# --- failures -------------------------------------------------------------------------------------------------


def test_unsatisfiable_manifest_names_the_chain(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("framework", "2.0", requires=["engine==3.2.0"])
    f.add_wheel("engine", "3.2.0")
    f.add_wheel("engine", "2.9.0")
    path = write_manifest(
        tmp_path / "p",
        requirements=["framework==2.*"],
        constraints=["engine<3"],
        default_url=served_index.url(),
    )
    existing = path.parent / requirements_filename("linux")
    existing.write_text("previous\n")
    with pytest.raises(ResolutionError) as ei:
        lock(path, cache)
    msg = ei.value.message
    assert "framework 2.0 requires engine==3.2.0" in msg
    assert "the manifest constrains engine<3" in msg
    rendered = ei.value.render()
    assert "framework is required by repro.toml" in rendered
    assert "Criterion" not in rendered and "RequirementInformation" not in rendered
    assert ei.value.exit_code == 1
    assert existing.read_text() == "previous\n"  # a failed lock leaves previous files untouched


def test_conflict_between_two_parents(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("a", "1.0", requires=["c<2"])
    f.add_wheel("b", "1.0", requires=["c>=2"])
    f.add_wheel("c", "1.0")
    f.add_wheel("c", "2.0")
    path = write_manifest(tmp_path / "p", requirements=["a", "b"], default_url=served_index.url())
    with pytest.raises(ResolutionError) as ei:
        lock(path, cache)
    assert "a 1.0 requires c<2" in ei.value.message and "b 1.0 requires c>=2" in ei.value.message


def test_unknown_project(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    index_factory.add_wheel("known", "1.0")
    path = write_manifest(tmp_path / "p", requirements=["nosuchthing"], default_url=served_index.url())
    with pytest.raises(ResolutionError) as ei:
        lock(path, cache)
    assert "nosuchthing is not on any index" in ei.value.message


# --- minimal churn -----------------------------------------------------------------------------------------------


def test_existing_pins_are_kept_unless_upgrading(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    f = index_factory
    f.add_wheel("app", "1.0", requires=["dep", "other"])
    f.add_wheel("dep", "1.0")
    f.add_wheel("other", "1.0")
    path = write_manifest(tmp_path / "p", requirements=["app"], default_url=served_index.url())
    lock(path, cache)
    f.add_wheel("dep", "2.0")
    f.add_wheel("other", "2.0")
    lock(path, cache, refresh=True)
    assert pins(read_lock(path)) == {"app": "1.0", "dep": "1.0", "other": "1.0"}
    lock(path, cache, refresh=True, upgrade_packages=["dep"])
    assert pins(read_lock(path)) == {"app": "1.0", "dep": "2.0", "other": "1.0"}
    lock(path, cache, refresh=True, upgrade=True)
    assert pins(read_lock(path)) == {"app": "1.0", "dep": "2.0", "other": "2.0"}
    # with a specifier, as in pip-compile and uv: upgrade (here: move) only within it
    lock(path, cache, refresh=True, upgrade_packages=["other<2"])
    assert pins(read_lock(path)) == {"app": "1.0", "dep": "2.0", "other": "1.0"}
    with pytest.raises(UsageError):
        lock(path, cache, upgrade_packages=["other @ https://example.invalid/x.whl"])
    with pytest.raises(UsageError):
        lock(path, cache, upgrade_packages=["not a name!"])


def test_same_inputs_same_bytes(index_factory: IndexFactory, served_index: Server, tmp_path: Path) -> None:
    f = index_factory
    f.add_wheel("app", "1.0", requires=["dep", 'win; sys_platform == "win32"'])
    f.add_wheel("dep", "1.0", tags="cp311-cp311-manylinux_2_17_x86_64")
    f.add_wheel("dep", "1.0", tags="cp311-cp311-win_amd64")
    f.add_wheel("dep", "1.0", tags="py3-none-any")
    f.add_wheel("win", "1.0")
    path = write_manifest(
        tmp_path / "p", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    lock(path, tmp_path / "cache1", fmt="pylock")
    first = {p.name: p.read_bytes() for p in path.parent.glob("*") if p.name != "repro.toml"}
    for p in path.parent.glob("requirements-*"):
        p.unlink()
    lock(path, tmp_path / "cache2", fmt="pylock", upgrade=True)
    second = {p.name: p.read_bytes() for p in path.parent.glob("*") if p.name != "repro.toml"}
    assert first == second
    assert sorted(first) == [
        "pylock.linux.toml",
        "pylock.windows.toml",
        "requirements-rebuild-linux.txt",
        "requirements-rebuild-windows.txt",
    ]
    linux = first["requirements-rebuild-linux.txt"].decode()
    # every wheel installable on the platform is hashed, and only those
    assert hashes(linux) == sha_of(
        f,
        [
            "dep-1.0-cp311-cp311-manylinux_2_17_x86_64.whl",
            "dep-1.0-py3-none-any.whl",
            "app-1.0-py3-none-any.whl",
        ],
    )


def test_credentials_stay_placeholders(
    index_factory: IndexFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_factory.add_wheel("private", "1.0")
    monkeypatch.setenv("KD_TEST_USER", "alice")
    monkeypatch.setenv("KD_TEST_TOKEN", "s3cret-token")
    with index_factory.serve(auth=("alice", "s3cret-token")) as srv:
        url = srv.url().replace("http://", "http://${KD_TEST_USER}:${KD_TEST_TOKEN}@")
        path = write_manifest(tmp_path / "p", requirements=["private"], default_url=url)
        lock(path, tmp_path / "cache", fmt="pylock")
    text = read_lock(path)
    assert pins(text) == {"private": "1.0"}
    assert f"--index-url {url}\n" in text
    for f in path.parent.iterdir():
        assert "s3cret-token" not in f.read_text(), f.name
