"""Every claim joint resolution makes is true: a difference is kept only when no common version
exists (or its reason says exactly what else was established), checked by brute force against
small indexes; every platform held back from its own best version is listed in `held`, whichever
platform leads."""

from __future__ import annotations

import json
import random
from itertools import product
from pathlib import Path

import pytest
from packaging.version import Version

from kernodeck.cli import main
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, MACOS, WINDOWS, pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

TAGS = {
    "linux": "cp311-cp311-manylinux_2_17_x86_64",
    "windows": "cp311-cp311-win_amd64",
    "macos": "cp311-none-macosx_11_0_arm64",
}
MARKERS = {"linux": "linux", "windows": "win32", "macos": "darwin"}
PLATFORMS = [LINUX, WINDOWS, MACOS]
NUM = ["1.0", "2.0", "3.0", "4.0"]
APP = ["1.0", "2.0"]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))


def _read(path: Path, platform: str) -> str:
    return (path.parent / requirements_filename(platform)).read_text(encoding="utf-8")


def _publish(f: IndexFactory, seed: int) -> tuple[dict[str, set[str]], dict[tuple[str, str], str | None]]:
    """A random small world: which platforms have a wheel of each num version, and the upper
    bound each app version puts on num on each platform (None: no bound)."""
    rng = random.Random(seed)
    files: dict[str, set[str]] = {}
    for v in NUM:
        have = {p for p in TAGS if rng.random() < 0.6} or {rng.choice(sorted(TAGS))}
        files[v] = have
        for p in sorted(have):
            f.add_wheel("num", v, tags=TAGS[p])
    bounds: dict[tuple[str, str], str | None] = {}
    for a in APP:
        requires = []
        for p in sorted(TAGS):
            bound = rng.choice([None, *NUM[:3]])
            bounds[(a, p)] = bound
            if bound is not None:
                requires.append(f"num<={bound}; sys_platform == '{MARKERS[p]}'")
        f.add_wheel("app", a, requires=requires)
    return files, bounds


def _feasible(
    files: dict[str, set[str]], bounds: dict[tuple[str, str], str | None], platform: str
) -> set[tuple[str, str]]:
    """Every (app, num) a platform can install: by enumeration."""
    return {
        (a, v)
        for a, v in product(APP, NUM)
        if platform in files[v]
        and (bounds[(a, platform)] is None or Version(v) <= Version(bounds[(a, platform)]))  # type: ignore[arg-type]
    }


@pytest.mark.parametrize("seed", range(6))
def test_a_difference_is_kept_only_when_the_brute_force_finds_no_common_version(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, seed: int
) -> None:
    files, bounds = _publish(index_factory, seed)
    feasible = {p: _feasible(files, bounds, p) for p in TAGS}
    path = write_manifest(
        tmp_path / "p", requirements=["app", "num"], default_url=served_index.url(), platforms=PLATFORMS
    )
    result = lock_manifest(path)
    if any(not feasible[p] for p in TAGS):  # some platform cannot be locked at all
        assert result.failed
        return
    assert result.ok, [f.message() for f in result.failed]
    locked = {p: pins(_read(path, p)) for p in TAGS}
    for p in TAGS:  # each file is one of the enumerated solutions of its platform
        assert (locked[p]["app"], locked[p]["num"]) in feasible[p]
    differs = {str(d.name): d for d in result.differences}
    for pkg, position in (("app", 0), ("num", 1)):
        # a common version of pkg exists iff some version is in a solution of every platform
        common = set.intersection(*({s[position] for s in feasible[p]} for p in TAGS))
        if pkg not in differs:
            assert len({locked[p][pkg] for p in TAGS}) == 1
            continue
        reason = differs[pkg].reason
        assert "rounds" not in reason, reason
        if common:  # it exists: the reason must say why it was not taken, never that none exists
            assert "but not together with the versions aligned for" in reason, (reason, common)
        else:
            assert "but not together" not in reason and "older not tried" not in reason, reason


def test_a_follower_held_back_from_its_own_newest_version_is_listed(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Windows leads and has num 1.5 at most; Linux, following it, would take 2.0 on its own.
    The walk used to take 1.5 on Linux without a word: `held` was empty."""
    f = index_factory
    f.add_wheel("num", "1.0")
    f.add_wheel("num", "1.5")
    f.add_wheel("num", "2.0", tags=TAGS["linux"])
    path = write_manifest(
        tmp_path / "p",
        requirements=["num"],
        default_url=served_index.url(),
        platforms=[WINDOWS, MACOS, LINUX],
    )
    out = tmp_path / "lock.json"
    assert main(["lock", str(path), "--upgrade", "--json", str(out)]) == 0
    assert {p: pins(_read(path, p))["num"] for p in ("linux", "windows", "macos")} == dict.fromkeys(
        ("linux", "windows", "macos"), "1.5"
    )
    assert "  num 1.5 on linux (on its own: 2.0), to match macos, windows\n" in capsys.readouterr().err
    assert json.loads(out.read_text())["held"] == [
        {
            "package": "num",
            "platform": "linux",
            "alone": "2.0",
            "version": "1.5",
            "matches": ["macos", "windows"],
        }
    ]


def test_a_common_version_between_the_two_tried_is_found(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """Windows keeps num 1.0 from its file and cannot go up to 3.0; Linux has no 1.0: the rounds
    alone gave up, though 2.0 installs on both."""
    f = index_factory
    f.add_wheel("num", "1.0", tags=TAGS["windows"])
    f.add_wheel("num", "2.0")
    f.add_wheel("num", "3.0", tags=TAGS["linux"])
    path = write_manifest(
        tmp_path / "p", requirements=["num"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    (path.parent / requirements_filename("windows")).write_text("num==1.0\n", encoding="utf-8")
    result = lock_manifest(path)
    assert result.ok and result.differences == ()
    assert pins(_read(path, "linux")) == pins(_read(path, "windows")) == {"num": "2.0"}
