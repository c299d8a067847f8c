from __future__ import annotations

import platform
import sys

import pytest
from packaging import _manylinux
from packaging.markers import Marker
from packaging.tags import Tag, parse_tag, sys_tags

from kernodeck.manifest.schema import Platform, Python
from kernodeck.targets import Target, manylinux_platforms


def _strs(target: Target) -> list[str]:
    return [str(t) for t in target.tags]


@pytest.mark.skipif(
    sys.platform != "linux" or sys.implementation.name != "cpython" or platform.libc_ver()[0] != "glibc",
    reason="host comparison written for CPython on glibc Linux",
)
def test_host_target_matches_packaging_sys_tags() -> None:
    glibc = "{}.{}".format(*_manylinux._get_glibc_version())
    host = Target.build(
        name="host",
        os="linux",
        arch=platform.machine(),
        python="{}.{}.{}".format(*sys.version_info[:3]),
        glibc=glibc,
    )
    expected = list(sys_tags())
    assert set(host.tags) == set(expected)

    # Same order, except that a native linux_<arch> tag ranks after manylinux for a lock target.
    def not_native(tags: list[Tag]) -> list[Tag]:
        return [t for t in tags if not t.platform.startswith("linux_")]

    assert not_native(list(host.tags)) == not_native(expected)
    from packaging.markers import default_environment

    env = default_environment()
    for key in (
        "os_name",
        "sys_platform",
        "platform_system",
        "platform_machine",
        "python_version",
        "python_full_version",
        "implementation_name",
        "platform_python_implementation",
    ):
        assert host.markers[key] == env[key], key


def test_from_platform_defaults_linux_cu126() -> None:
    t = Target.from_platform(
        Platform(name="linux-x86_64-cu126", os="linux", arch="x86_64", backend="cu126"),
        Python(version="3.11"),
    )
    assert t.python_version == "3.11"
    assert t.python_full_version == "3.11.0"
    assert t.backend is not None and t.backend.name == "cu126"
    assert t.summary() == "cpython 3.11, manylinux_2_28 x86_64, backend cu126"
    tags = _strs(t)
    assert tags[0] == "cp311-cp311-manylinux_2_28_x86_64"
    assert "cp311-cp311-manylinux_2_29_x86_64" not in tags
    assert "cp311-cp311-manylinux2014_x86_64" in tags
    assert "cp311-cp311-manylinux1_x86_64" in tags
    assert "cp39-abi3-manylinux_2_17_x86_64" in tags
    assert tags[-1] == "py30-none-any"
    assert t.tag_rank(parse_tag("cp311-cp311-manylinux_2_28_x86_64")) == 0
    assert t.tag_rank(parse_tag("cp312-cp312-manylinux_2_28_x86_64")) is None
    assert t.tag_rank(parse_tag("cp311-cp311-win_amd64")) is None
    # the best tag of a compressed tag set wins
    r_compressed = t.tag_rank(parse_tag("cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"))
    r_pure = t.tag_rank(parse_tag("py3-none-any"))
    assert r_compressed is not None and r_pure is not None and r_compressed < r_pure
    # native linux tag accepted, after every manylinux tag
    r_native = t.tag_rank(parse_tag("cp311-cp311-linux_x86_64"))
    r_many1 = t.tag_rank(parse_tag("cp311-cp311-manylinux1_x86_64"))
    assert r_native is not None and r_many1 is not None and r_native > r_many1


def test_python_override_and_exact_version() -> None:
    t = Target.from_platform(
        Platform(name="p", os="linux", arch="x86_64", python="3.12.4"), Python(version="3.11")
    )
    assert (t.python_version, t.python_full_version) == ("3.12", "3.12.4")
    assert _strs(t)[0] == "cp312-cp312-manylinux_2_28_x86_64"


def test_macos_arm64_foreign_target() -> None:
    t = Target.from_platform(Platform(name="mac", os="macos", arch="arm64"), Python(version="3.11"))
    tags = _strs(t)
    assert tags[0] == "cp311-cp311-macosx_14_0_arm64"
    assert "cp311-cp311-macosx_11_0_arm64" in tags
    assert "cp311-cp311-macosx_14_0_universal2" in tags
    assert "cp311-cp311-macosx_10_9_universal2" in tags
    assert "cp311-cp311-macosx_15_0_arm64" not in tags
    assert "cp311-cp311-macosx_10_9_x86_64" not in tags
    assert not any("manylinux" in s for s in tags)
    assert t.markers["sys_platform"] == "darwin"
    assert t.markers["platform_machine"] == "arm64"
    assert t.summary() == "cpython 3.11, macos 14.0 arm64"
    # aarch64 is normalised to arm64 on macOS
    t2 = Target.build(name="m", os="macos", arch="aarch64", python="3.11", macos="12.3")
    assert t2.tags[0] == Tag("cp311", "cp311", "macosx_12_0_arm64")


def test_macos_x86_64_includes_old_releases() -> None:
    t = Target.build(name="m", os="macos", arch="x86_64", python="3.10", macos="13.0")
    tags = _strs(t)
    assert "cp310-cp310-macosx_10_9_x86_64" in tags
    assert "cp310-cp310-macosx_10_9_intel" in tags
    assert t.markers["platform_machine"] == "x86_64"


def test_windows() -> None:
    t = Target.build(name="w", os="windows", arch="x86_64", python="3.11")
    assert _strs(t)[:3] == ["cp311-cp311-win_amd64", "cp311-abi3-win_amd64", "cp311-none-win_amd64"]
    assert t.markers["sys_platform"] == "win32"
    assert t.markers["platform_machine"] == "AMD64"
    assert t.markers["os_name"] == "nt"
    assert t.summary() == "cpython 3.11, windows AMD64"
    arm = Target.build(name="wa", os="windows", arch="arm64", python="3.12")
    assert arm.tags[0] == Tag("cp312", "cp312", "win_arm64")
    assert arm.markers["platform_machine"] == "ARM64"


def test_musl() -> None:
    t = Target.build(name="alpine", os="linux", arch="x86_64", python="3.11", musl="1.2")
    tags = _strs(t)
    assert tags[:3] == [
        "cp311-cp311-musllinux_1_2_x86_64",
        "cp311-cp311-musllinux_1_1_x86_64",
        "cp311-cp311-musllinux_1_0_x86_64",
    ]
    assert not any("manylinux" in s for s in tags)
    assert t.summary() == "cpython 3.11, musllinux_1_2 x86_64"


def test_linux_aarch64_and_arm64_alias() -> None:
    a = Target.build(name="a", os="linux", arch="aarch64", python="3.11")
    b = Target.build(name="b", os="linux", arch="arm64", python="3.11")
    assert a.tags == b.tags
    assert a.tags[0] == Tag("cp311", "cp311", "manylinux_2_28_aarch64")
    assert a.markers["platform_machine"] == "aarch64"
    assert b.markers["platform_machine"] == "aarch64"
    tags = _strs(a)
    assert "cp311-cp311-manylinux2014_aarch64" in tags
    assert "cp311-cp311-manylinux_2_16_aarch64" not in tags
    assert "cp311-cp311-manylinux1_aarch64" not in tags


def test_manylinux_platform_list() -> None:
    plats = manylinux_platforms("x86_64", "2.28")
    assert plats[0] == "manylinux_2_28_x86_64"
    assert plats.index("manylinux2014_x86_64") == plats.index("manylinux_2_17_x86_64") + 1
    assert plats[-2:] == ["manylinux_2_5_x86_64", "manylinux1_x86_64"]


def test_pypy_target() -> None:
    t = Target.build(name="pp", os="linux", arch="x86_64", python="3.10", implementation="pypy")
    assert t.tags[0] == Tag("pp310", "pypy310_pp73", "manylinux_2_28_x86_64")
    assert Tag("pp3", "none", "any") in t.tags
    assert t.markers["platform_python_implementation"] == "PyPy"


def test_marker_evaluation_per_target() -> None:
    linux = Target.build(name="l", os="linux", arch="x86_64", python="3.11")
    mac = Target.build(name="m", os="macos", arch="arm64", python="3.11")
    win = Target.build(name="w", os="windows", arch="x86_64", python="3.12")
    cuda = 'platform_system == "Linux" and platform_machine == "x86_64"'
    assert linux.evaluate_marker(cuda)
    assert not mac.evaluate_marker(cuda)
    assert not win.evaluate_marker(Marker(cuda))
    assert win.evaluate_marker('python_version >= "3.12" and os_name == "nt"')
    assert not linux.evaluate_marker('python_full_version >= "3.11.1"')  # 3.11 means 3.11.0
    assert linux.evaluate_marker(None)
    extra = 'extra == "test" and sys_platform == "linux"'
    assert not linux.evaluate_marker(extra)
    assert linux.evaluate_marker(extra, extras=["test"])
    assert linux.evaluate_marker(extra, extras=["docs", "test"])
    assert not mac.evaluate_marker(extra, extras=["test"])


def test_platform_marker_overrides() -> None:
    t = Target.from_platform(
        Platform(name="l", os="linux", arch="x86_64", markers={"platform_release": "6.8.0"}),
        Python(version="3.11"),
    )
    assert t.markers["platform_release"] == "6.8.0"
    assert t.evaluate_marker('platform_release >= "6"')


def test_target_is_hashable_and_comparable() -> None:
    a = Target.build(name="l", os="linux", arch="x86_64", python="3.11")
    b = Target.build(name="l", os="linux", arch="x86_64", python="3.11")
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1


def test_unknown_combination_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported platform"):
        Target.build(name="x", os="windows", arch="s390x", python="3.11")
