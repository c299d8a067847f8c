"""The provider's order of work (`kernodeck.resolve.provider`, with the restarts of
`kernodeck.resolve.rounds`): among valid solutions, the lock keeps direct requirements newest
rather than walking one back through many releases to keep another's newest patch release
(the 100-dependency stack's s3fs / boto3 shape, on a loopback index)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, lock, pins, read_lock, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


def _conflict(f: IndexFactory) -> None:
    """`storfs` (decided after `awsclient` alphabetically): every release since 1.0 needs
    `core<2`, only the old 0.1 does not need `core` at all. `awsclient`'s newest patch release
    needs `core>=2`, its older ones accept `core` 1."""
    f.add_wheel("storfs", "0.1", upload_time="2020-01-01T00:00:00Z")
    for minor in range(10):
        f.add_wheel(
            "storfs", f"1.{minor}", requires=["core<2"], upload_time=f"2024-0{1 + minor % 9}-02T00:00:00Z"
        )
    for patch in range(4):
        f.add_wheel("awsclient", f"1.0.{patch}", requires=["core>=1"], upload_time="2024-10-01T00:00:00Z")
    f.add_wheel("awsclient", "1.0.4", requires=["core>=2"], upload_time="2024-10-08T00:00:00Z")
    f.add_wheel("core", "1.0")
    f.add_wheel("core", "2.0")


def test_a_direct_requirement_is_not_walked_back_years_for_anothers_newest_patch(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    _conflict(index_factory)
    path = write_manifest(
        tmp_path / "p",
        requirements=["awsclient", "storfs"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
    )
    result = lock(path, cache)
    want = {"awsclient": "1.0.3", "core": "1.0", "storfs": "1.9"}
    assert pins(read_lock(path, "linux")) == want
    assert pins(read_lock(path, "windows")) == want
    # a restart with storfs decided first, per platform that resolves on its own (joint resolution
    # resolves a follower alone when it would take newer versions alone: one each here)
    assert result.stats is not None and result.stats.restarts in (1, 2)


def test_the_order_of_the_requirements_does_not_change_the_pick(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    _conflict(index_factory)
    path = write_manifest(
        tmp_path / "p", requirements=["storfs", "awsclient"], default_url=served_index.url()
    )
    lock(path, cache)
    assert pins(read_lock(path, "linux")) == {"awsclient": "1.0.3", "core": "1.0", "storfs": "1.9"}


def test_a_requirement_walked_back_by_its_own_constraint_keeps_its_pick(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    """`storfs` walked back because a manifest constraint rules out `core` 1: resolving again
    with it first changes nothing, the lock still takes the old release that does not need `core`."""
    _conflict(index_factory)
    path = write_manifest(
        tmp_path / "p",
        requirements=["awsclient", "storfs"],
        constraints=["core>=2"],
        default_url=served_index.url(),
    )
    result = lock(path, cache)
    assert pins(read_lock(path, "linux")) == {"awsclient": "1.0.4", "core": "2.0", "storfs": "0.1"}
    # resolved again with storfs first, no better: the first solution stands
    assert result.stats is not None and result.stats.restarts == 1


def test_walking_back_patch_releases_decides_nothing_first(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    """`zclient` (decided after `storfs`) walks back eight patch releases to meet `core<2`: one
    release series, so the lock is not started again and `storfs` stays newest."""
    f = index_factory
    f.add_wheel("storfs", "1.0", requires=["core<2"])
    for patch in range(3):
        f.add_wheel("zclient", f"1.0.{patch}", requires=["core>=1"])
    for patch in range(3, 11):
        f.add_wheel("zclient", f"1.0.{patch}", requires=["core>=2"])
    f.add_wheel("core", "1.0")
    f.add_wheel("core", "2.0")
    path = write_manifest(tmp_path / "p", requirements=["storfs", "zclient"], default_url=served_index.url())
    result = lock(path, cache)
    assert pins(read_lock(path, "linux")) == {"core": "1.0", "storfs": "1.0", "zclient": "1.0.2"}
    assert result.stats is not None and result.stats.restarts == 0


def test_the_conflict_through_transitive_projects_decides_the_other_direct_one_later(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, cache: Path
) -> None:
    """The s3fs shape: `storfs` releases need `aiocore` (each `aiocore` needs `core<2`), the
    newest `awsclient` needs `core>=2`, and `fsmain` (a direct requirement too) caps `storfs`'s
    newest: the lock keeps the newest `storfs` that `fsmain` allows and walks `awsclient` back a
    patch release, with `fsmain` left newest."""
    f = index_factory
    f.add_wheel("storfs", "0.1")
    for minor in range(10):
        f.add_wheel("storfs", f"1.{minor}", requires=["aiocore"])
    f.add_wheel("fsmain", "1.0", requires=["storfs<1.9"])
    for minor in range(3):
        f.add_wheel("aiocore", f"2.{minor}", requires=["core<2"])
    for patch in range(4):
        f.add_wheel("awsclient", f"1.0.{patch}", requires=["core>=1"])
    f.add_wheel("awsclient", "1.0.4", requires=["core>=2"])
    f.add_wheel("core", "1.0")
    f.add_wheel("core", "2.0")
    path = write_manifest(
        tmp_path / "p", requirements=["awsclient", "fsmain", "storfs"], default_url=served_index.url()
    )
    result = lock(path, cache)
    assert pins(read_lock(path, "linux")) == {
        "aiocore": "2.2",
        "awsclient": "1.0.3",
        "core": "1.0",
        "fsmain": "1.0",
        "storfs": "1.8",
    }
    assert result.stats is not None and result.stats.restarts == 1
