"""Following the leader: a platform checked against another platform's resolution instead of
searched for again (`kernodeck.resolve.follow`), and the lock that uses it.

The walk must give exactly what the resolver gives wherever it answers (same versions, same files,
same parents), and must answer None, never a wrong lock, where a search is needed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from kernodeck.manifest import load_manifest
from kernodeck.resolve import Resolution, ResolveSettings, Routing, Session, follow_target, resolve_target
from kernodeck.targets import Target
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, LINUX310, MACOS, WINDOWS, lock, pins, read_lock, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

LINUX_ONLY = "cp311-cp311-manylinux_2_17_x86_64"


def _shape(res: Resolution) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """What a lock file is made of: name, version, files (best first) and parents, per pin."""
    return [(p.name, str(p.version), tuple(f.filename for f in p.candidate.files), p.via) for p in res.pins]


class _Lock:
    def __init__(self, path: Path, cache: Path) -> None:
        manifest = load_manifest(path)
        self.targets = {p.name: Target.from_platform(p, manifest.python) for p in manifest.platform}
        self.session = Session(
            Routing.from_packages(manifest.packages),
            ResolveSettings.from_packages(manifest.packages),
            cache_dir=cache,
        )

    def resolve(self, name: str) -> Resolution:
        return resolve_target(self.session, self.targets[name])

    def follow(self, name: str, leader: Resolution, **kw: Any) -> Resolution | None:
        return follow_target(self.session, self.targets[name], leader, **kw)


@pytest.fixture
def session_for(tmp_path: Path, cache: Path) -> Iterator[Any]:
    opened: list[_Lock] = []

    def make(path: Path) -> _Lock:
        lk = _Lock(path, cache)
        opened.append(lk)
        return lk

    yield make
    for lk in opened:
        lk.session.close()


@pytest.fixture
def graph(index_factory: IndexFactory) -> IndexFactory:
    """Markers per platform, extras, Requires-Python, a shared diamond and binary wheels."""
    f = index_factory
    f.add_wheel(
        "app",
        "2.0",
        requires=[
            "lib[fast]>=1",
            "num>=1",
            'colorama; sys_platform == "win32"',
            'appnope; sys_platform == "darwin"',
            'uvloop; sys_platform != "win32"',
            'backport; python_version < "3.11"',
        ],
    )
    f.add_wheel("app", "1.0", requires=["num>=1"])
    f.add_wheel("lib", "1.5", requires=["core>=1,<3"], extras={"fast": ["speedup>=1", "num>=1.2"]})
    f.add_wheel("lib", "1.0", requires=["core>=1"])
    for v in ("1.0", "2.0", "2.5", "3.0"):
        f.add_wheel("core", v, requires_python=">=3.8")
    f.add_wheel("speedup", "1.1", requires=["core>=2"])
    for v in ("1.0", "1.2", "1.4"):
        for tags in (
            LINUX_ONLY,
            "cp311-cp311-win_amd64",
            "cp311-cp311-macosx_11_0_arm64",
            "cp310-cp310-manylinux_2_17_x86_64",
        ):
            f.add_wheel("num", v, tags=tags)
    f.add_wheel("colorama", "0.4.5")
    f.add_wheel("colorama", "0.4.6")
    f.add_wheel("appnope", "0.1.4")
    f.add_wheel("uvloop", "0.19.0")
    f.add_wheel("backport", "1.0")
    return f


def test_a_follower_gets_what_its_own_resolution_gets(
    graph: IndexFactory, served_index: Server, tmp_path: Path, session_for: Any
) -> None:
    path = write_manifest(
        tmp_path / "p",
        requirements=["app"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS, MACOS, LINUX310],
    )
    lk = session_for(path)
    leader = lk.resolve("linux")
    for name in ("windows", "macos", "linux-py310"):
        followed = lk.follow(name, leader)
        assert followed is not None, name
        assert _shape(followed) == _shape(lk.resolve(name)), name
    windows = {p.name: p for p in lk.follow("windows", leader).pins}
    assert str(windows["colorama"].version) == "0.4.6" and windows["colorama"].via == ("app",)
    assert "uvloop" not in windows and str(windows["num"].version) == "1.4"
    assert windows["num"].candidate.files[0].filename.endswith("win_amd64.whl")


def test_a_leader_version_without_a_file_here_needs_a_search(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, session_for: Any
) -> None:
    index_factory.add_wheel("app", "1.0", requires=["num>=1"])
    index_factory.add_wheel("num", "1.5")
    index_factory.add_wheel("num", "2.0", tags=LINUX_ONLY)
    path = write_manifest(
        tmp_path / "p", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    lk = session_for(path)
    leader = lk.resolve("linux")
    assert {p.name: str(p.version) for p in leader.pins}["num"] == "2.0"
    assert lk.follow("windows", leader) is None
    # the lock resolves that platform instead and aligns the versions, as before
    result = lock(path, tmp_path / "lock-cache")
    assert result.ok and result.differences == ()
    assert pins(read_lock(path, "linux"))["num"] == pins(read_lock(path, "windows"))["num"] == "1.5"


def test_a_later_requirement_that_excludes_a_free_choice_needs_a_search(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, session_for: Any
) -> None:
    """`free` is Windows-only: the walk takes its newest (2.0) for `wa`, then meets `wb`'s
    `free<2`; only a search finds 1.0."""
    f = index_factory
    f.add_wheel("app", "1.0", requires=['wa; sys_platform == "win32"', 'wb; sys_platform == "win32"'])
    f.add_wheel("wa", "1.0", requires=["free"])
    f.add_wheel("wb", "1.0", requires=["free<2"])
    f.add_wheel("free", "1.0")
    f.add_wheel("free", "2.0")
    path = write_manifest(
        tmp_path / "p", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    lk = session_for(path)
    assert lk.follow("windows", lk.resolve("linux")) is None
    lock(path, tmp_path / "lock-cache")
    assert pins(read_lock(path, "windows")) == {"app": "1.0", "wa": "1.0", "wb": "1.0", "free": "1.0"}
    assert pins(read_lock(path, "linux")) == {"app": "1.0"}


def test_own_pins_that_differ_from_the_leaders_are_weighed_by_a_search(
    graph: IndexFactory, served_index: Server, tmp_path: Path, session_for: Any
) -> None:
    path = write_manifest(
        tmp_path / "p", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    lk = session_for(path)
    leader = lk.resolve("linux")
    assert lk.follow("windows", leader, preferred={"num": Version("1.2")}) is None
    same = lk.follow("windows", leader, preferred={"num": Version("1.4"), "colorama": Version("0.4.5")})
    assert same is not None
    # a project the leader does not have keeps this platform's own pin
    assert {p.name: str(p.version) for p in same.pins}["colorama"] == "0.4.5"


def test_a_joint_lock_writes_what_independent_resolutions_write_when_they_agree(
    graph: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """The followers' files equal the files of platforms resolved one by one (same-versions =
    "no"), pins, hashes and `# via` lines alike; only the header's inputs digest differs."""
    platforms = [LINUX, WINDOWS, MACOS, LINUX310]
    joint = write_manifest(
        tmp_path / "joint", requirements=["app"], default_url=served_index.url(), platforms=platforms
    )
    alone = write_manifest(
        tmp_path / "alone",
        requirements=["app"],
        default_url=served_index.url(),
        platforms=platforms,
        same_versions="no",
    )
    lock(joint, tmp_path / "c1")
    lock(alone, tmp_path / "c2")

    def body(path: Path, name: str) -> list[str]:
        return [ln for ln in read_lock(path, name).splitlines() if not ln.startswith("#")]

    for p in platforms:
        assert body(joint, p["name"]) == body(alone, p["name"]), p["name"]
        assert len(body(joint, p["name"])) > 5


def test_the_graph_is_fetched_ahead_of_the_resolver(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, session_for: Any
) -> None:
    """The likely version's dependencies are fetched as soon as its metadata arrives, without
    the resolver asking: a chain a -> b -> c -> d is read to its end from the roots alone (a
    follower's factory does not: it reads what its leader pins)."""
    import time

    from kernodeck.resolve.factory import Factory

    f = index_factory
    f.add_wheel("a", "1.0", requires=["b"])
    f.add_wheel("b", "1.0", requires=["c>=1", 'never; sys_platform == "win32"'])
    f.add_wheel("c", "1.0", requires=["d"])
    f.add_wheel("d", "1.0")
    f.add_wheel("never", "1.0")
    path = write_manifest(tmp_path / "p", requirements=["a"], default_url=served_index.url())
    lk = session_for(path)
    factory = Factory(lk.session, lk.targets["linux"])
    factory.root_requirements()  # looks ahead from the roots; nothing is resolved
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "d" not in factory._projects:
        time.sleep(0.05)
    assert {"a", "b", "c", "d"} <= set(factory._projects)
    assert "never" not in factory._projects  # a marker false on this platform is not followed


def test_followers_read_their_own_files_of_each_version_the_leader_reads_ahead(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, session_for: Any
) -> None:
    """While the leader only looks ahead (nothing resolved, nothing pinned), every version whose
    metadata it prefetches has the follower's own file of that version read too: the Windows
    wheel of `num` 1.4 deep in the graph, not the Linux one, and no other version of it."""
    import time

    from kernodeck.resolve import Follower
    from kernodeck.resolve.factory import Factory

    f = index_factory
    f.add_wheel("top", "1.0", requires=["num>=1"])
    for v in ("1.0", "1.4"):
        for tags in (LINUX_ONLY, "cp311-cp311-win_amd64"):
            f.add_wheel("num", v, tags=tags)
    path = write_manifest(
        tmp_path / "p", requirements=["top"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    lk = session_for(path)
    follower = Follower(lk.session, lk.targets["windows"])
    leader = Factory(lk.session, lk.targets["linux"])
    leader.on_likely = follower.ahead
    leader.root_requirements()  # looks ahead from the roots; nothing is resolved or pinned

    def asked(wheel: str) -> bool:
        return served_index.count(contains=wheel) > 0

    win = "num-1.4-cp311-cp311-win_amd64.whl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not asked(win):
        time.sleep(0.05)
    assert asked(win)
    assert asked("num-1.4-cp311-cp311-manylinux_2_17_x86_64.whl")
    assert not asked("num-1.0-")
