"""Per-platform index routing: an index's `platforms = [...]` or a platform's `indexes = [...]`
lets one platform take a package from an index of its own; other platforms never see it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernodeck.cli import main
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

ARM = {"name": "linux-aarch64", "os": "linux", "arch": "aarch64"}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def two_indexes(index_factory: IndexFactory) -> IndexFactory:
    f = index_factory
    f.add_wheel("num", "1.0")
    f.add_wheel("plain", "1.0")
    f.add_wheel("num", "9.0", index="armidx")
    return f


@pytest.mark.parametrize("spelling", ["index-platforms", "platform-indexes"])
def test_one_platform_takes_a_package_from_its_own_index(
    two_indexes: IndexFactory, served_index: Server, tmp_path: Path, spelling: str
) -> None:
    arm_index: dict[str, Any] = {"name": "arm", "url": served_index.url("armidx"), "packages": ["num"]}
    arm: dict[str, Any] = dict(ARM)
    if spelling == "index-platforms":
        arm_index["platforms"] = ["linux-aarch64"]
    else:
        arm["indexes"] = ["arm"]
    path = write_manifest(
        tmp_path / "p",
        requirements=["num", "plain"],
        indexes=[{"name": "default", "url": served_index.url(), "default": True}, arm_index],
        platforms=[LINUX, arm],
        same_versions="no",
    )
    assert lock_manifest(path).ok
    arm_text = (path.parent / requirements_filename("linux-aarch64")).read_text()
    linux_text = (path.parent / requirements_filename("linux")).read_text()
    assert pins(arm_text) == {"num": "9.0", "plain": "1.0"}
    assert pins(linux_text) == {"num": "1.0", "plain": "1.0"}
    assert f"--extra-index-url {served_index.url('armidx')}" in arm_text
    assert served_index.url("armidx") not in linux_text


def test_per_platform_index_mistakes_exit_2(
    served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown = write_manifest(
        tmp_path / "a",
        requirements=["num"],
        indexes=[
            {"name": "default", "url": served_index.url(), "default": True},
            {"name": "arm", "url": served_index.url("armidx"), "platforms": ["nosuch"]},
        ],
        platforms=[LINUX, {**ARM, "indexes": ["nope"]}],
    )
    assert main(["lock", str(unknown)]) == 2
    err = capsys.readouterr().err
    assert "unknown platform 'nosuch'" in err and "unknown index 'nope'" in err
    restricted_default = write_manifest(
        tmp_path / "b",
        requirements=["num"],
        indexes=[{"name": "default", "url": served_index.url(), "default": True, "platforms": ["linux"]}],
        platforms=[LINUX, ARM],
    )
    assert main(["lock", str(restricted_default)]) == 2
    assert "the default index serves every platform" in capsys.readouterr().err


def test_a_package_on_two_platform_indexes_that_never_meet(
    two_indexes: IndexFactory, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two_indexes.add_wheel("num", "5.0", index="x86idx")
    indexes: list[dict[str, Any]] = [
        {"name": "default", "url": served_index.url(), "default": True},
        {
            "name": "arm",
            "url": served_index.url("armidx"),
            "packages": ["num"],
            "platforms": ["linux-aarch64"],
        },
        {"name": "x86", "url": served_index.url("x86idx"), "packages": ["num"], "platforms": ["linux"]},
    ]
    path = write_manifest(
        tmp_path / "p", requirements=["num"], indexes=indexes, platforms=[LINUX, ARM], same_versions="no"
    )
    assert lock_manifest(path).ok
    assert pins((path.parent / requirements_filename("linux")).read_text()) == {"num": "5.0"}
    assert pins((path.parent / requirements_filename("linux-aarch64")).read_text()) == {"num": "9.0"}
    # overlapping platforms: still one owner per package
    indexes[2]["platforms"] = ["linux", "linux-aarch64"]
    clash = write_manifest(tmp_path / "q", requirements=["num"], indexes=indexes, platforms=[LINUX, ARM])
    assert main(["lock", str(clash)]) == 2
    assert "is already pinned to index 'arm'" in capsys.readouterr().err
