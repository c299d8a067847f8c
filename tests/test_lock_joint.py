"""Joint resolution, `[packages] same-versions`: one public version per package on every platform
that has it when such a version exists (prefer, the default), a failure when not (require), or each
platform on its own (no). Local labels of the torch family may differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, MACOS, WINDOWS, pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

LINUX_ONLY = "cp311-cp311-manylinux_2_17_x86_64"
WINDOWS_ONLY = "cp311-cp311-win_amd64"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))


def _read(path: Path, platform: str) -> str:
    return (path.parent / requirements_filename(platform)).read_text(encoding="utf-8")


@pytest.fixture
def newest_lacks_a_wheel(index_factory: IndexFactory) -> IndexFactory:
    """num 2.0 has a wheel for Linux only; 1.5 and 1.0 for every platform; app needs num."""
    f = index_factory
    f.add_wheel("app", "1.0", requires=["num>=1"])
    f.add_wheel("num", "1.0")
    f.add_wheel("num", "1.5")
    f.add_wheel("num", "2.0", tags=LINUX_ONLY)
    f.add_wheel("plain", "3.0")
    return f


def test_prefer_takes_the_newest_common_release_everywhere(
    newest_lacks_a_wheel: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_manifest(
        tmp_path / "p",
        requirements=["app", "plain"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS, MACOS],
    )
    result = lock_manifest(path)
    assert result.ok and result.differences == ()
    for platform in ("linux", "windows", "macos"):
        assert pins(_read(path, platform)) == {"app": "1.0", "num": "1.5", "plain": "3.0"}
    assert "here," not in _read(path, "linux")
    # what Linux gave up to match the others is said (the files stay as any later lock writes them)
    (held,) = result.held
    assert (held.name, held.platform, str(held.alone), str(held.version)) == ("num", "linux", "2.0", "1.5")
    assert held.matches == ("macos", "windows")
    assert "to match" not in _read(path, "linux")
    # a second lock keeps the common version (minimal churn does not undo it)
    assert main(["lock", str(path), "--check"]) == 0
    # --upgrade holds it back again, and says so on stderr and in --json
    capsys.readouterr()
    assert main(["lock", str(path), "--upgrade", "--json", str(tmp_path / "lock.json")]) == 0
    err = capsys.readouterr().err
    assert "1 package(s) held back on a platform to match the others" in err
    assert "  num 1.5 on linux (on its own: 2.0), to match macos, windows\n" in err
    assert json.loads((tmp_path / "lock.json").read_text())["held"] == [
        {
            "package": "num",
            "platform": "linux",
            "alone": "2.0",
            "version": "1.5",
            "matches": ["macos", "windows"],
        }
    ]


def test_no_gives_per_platform_pins(
    newest_lacks_a_wheel: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    path = write_manifest(
        tmp_path / "p",
        requirements=["app", "plain"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS, MACOS],
        same_versions="no",
    )
    result = lock_manifest(path)
    assert result.ok and result.differences == ()
    assert pins(_read(path, "linux"))["num"] == "2.0"
    assert pins(_read(path, "windows"))["num"] == "1.5"
    assert pins(_read(path, "macos"))["num"] == "1.5"


@pytest.fixture
def no_common_release(index_factory: IndexFactory) -> IndexFactory:
    """num 1.0 only for Windows, num 2.0 only for Linux: no version both can install."""
    f = index_factory
    f.add_wheel("num", "1.0", tags=WINDOWS_ONLY)
    f.add_wheel("num", "2.0", tags=LINUX_ONLY)
    f.add_wheel("plain", "3.0")
    return f


def test_prefer_reports_a_difference_that_remains(
    no_common_release: IndexFactory, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_manifest(
        tmp_path / "p",
        requirements=["num", "plain"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
    )
    out = tmp_path / "lock.json"
    assert main(["lock", str(path), "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert "1 package(s) differ across platforms:" in err
    assert "num: 2.0 on linux; 1.0 on windows: " in err
    linux, windows = _read(path, "linux"), _read(path, "windows")
    assert pins(linux)["num"] == "2.0" and pins(windows)["num"] == "1.0"
    assert "\n# num 2.0 here, 1.0 on windows: " in linux
    assert "\n# num 1.0 here, 2.0 on linux: " in windows
    assert "plain" not in [line.split()[1] for line in linux.splitlines() if line.startswith("# num")]
    doc = json.loads(out.read_text())
    assert doc["differences"][0]["package"] == "num"
    assert doc["differences"][0]["versions"] == {"linux": "2.0", "windows": "1.0"}
    # the reason is what was established: no version has files for both (not "none found in N rounds")
    assert (
        doc["differences"][0]["reason"]
        == "no version of num has files for all of linux, windows (linux: 2.0; windows: 1.0)"
    )
    # the replayed lock reports the same difference
    capsys.readouterr()
    assert main(["lock", str(path)]) == 0
    assert "num: 2.0 on linux; 1.0 on windows: " in capsys.readouterr().err


def test_require_fails_naming_package_and_platforms(
    no_common_release: IndexFactory, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_manifest(
        tmp_path / "p",
        requirements=["num; sys_platform != 'darwin'", "plain"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS, MACOS],
        same_versions="require",
    )
    assert main(["lock", str(path)]) == 1
    err = capsys.readouterr().err
    assert "error: cannot lock platform linux: num: 2.0 on linux; 1.0 on windows" in err
    assert "error: cannot lock platform windows: num: 2.0 on linux; 1.0 on windows" in err
    assert 'same-versions = "require"' in err
    assert not (path.parent / requirements_filename("linux")).exists()
    assert not (path.parent / requirements_filename("windows")).exists()
    assert pins(_read(path, "macos")) == {"plain": "3.0"}  # not involved: written


def test_require_passes_when_versions_can_be_aligned(
    newest_lacks_a_wheel: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    path = write_manifest(
        tmp_path / "p",
        requirements=["app"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
        same_versions="require",
    )
    assert lock_manifest(path).ok
    assert pins(_read(path, "linux"))["num"] == pins(_read(path, "windows"))["num"] == "1.5"


def test_torch_local_labels_may_differ_public_versions_may_not(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    f = index_factory
    for backend in ("cpu", "cu126"):
        f.add_wheel("torch", f"2.6.0+{backend}", index=backend)
        f.add_wheel(
            "torch",
            f"2.7.0+{backend}",
            index=backend,
            tags=LINUX_ONLY if backend == "cu126" else "py3-none-any",
        )
    f.add_wheel("torch", "2.7.0", tags="cp311-none-macosx_11_0_arm64")
    f.add_wheel("torch", "2.6.0", tags="cp311-none-macosx_11_0_arm64")
    cpu = {"name": "cpu", "os": "linux", "arch": "x86_64", "backend": "cpu"}
    gpu = {"name": "gpu", "os": "linux", "arch": "x86_64", "backend": "cu126", "glibc": "2.5"}
    path = write_manifest(
        tmp_path / "p",
        requirements=["torch"],
        default_url=served_index.url(),
        platforms=[cpu, gpu, MACOS],
        pytorch_index=served_index.pytorch_base,
    )
    result = lock_manifest(path)
    assert result.ok and result.differences == ()
    # 2.7.0+cu126 needs glibc 2.17 and the gpu platform has 2.5: every platform takes 2.6.0
    assert pins(_read(path, "cpu")) == {"torch": "2.6.0+cpu"}
    assert pins(_read(path, "gpu")) == {"torch": "2.6.0+cu126"}
    assert pins(_read(path, "macos")) == {"torch": "2.6.0"}
    # each platform on its own, the newest of each differs
    path.write_text(
        path.read_text().replace("[[packages.index]]", 'same-versions = "no"\n\n[[packages.index]]', 1)
    )
    lock_manifest(path, output_dir=tmp_path / "alone", upgrade=True)
    assert pins((tmp_path / "alone" / requirements_filename("cpu")).read_text()) == {"torch": "2.7.0+cpu"}
    assert pins((tmp_path / "alone" / requirements_filename("gpu")).read_text()) == {"torch": "2.6.0+cu126"}


def test_a_platform_that_cannot_go_down_lifts_the_others(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    """windows keeps num 1.0 from its existing file; linux has no 1.0 wheel, so windows moves up."""
    f = index_factory
    f.add_wheel("num", "1.0", tags=WINDOWS_ONLY)
    f.add_wheel("num", "2.0")
    path = write_manifest(
        tmp_path / "p", requirements=["num"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )
    (path.parent / requirements_filename("windows")).write_text("num==1.0\n", encoding="utf-8")
    alone = lock_manifest(path, ["windows"])  # on its own, the existing pin is kept
    assert alone.ok and pins(_read(path, "windows")) == {"num": "1.0"}
    result = lock_manifest(path)
    assert result.ok and result.differences == ()
    assert pins(_read(path, "linux")) == pins(_read(path, "windows")) == {"num": "2.0"}


def test_platforms_held_to_one_are_said_once_per_package() -> None:
    """Linux, Windows and Apple-silicon macOS all held at the last torch built for Intel macOS:
    one line per package naming the platform that holds them, not one per platform naming all."""
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from kernodeck.resolve.joint import Held, describe_held

    everyone = ("linux", "mac-arm", "mac-intel", "windows")
    held = [
        Held(canonicalize_name(name), p, Version(alone), Version(now), tuple(q for q in everyone if q != p))
        for name, now, alone in (("torch", "2.2.2", "2.15.0"), ("numpy", "2.2.6", "2.4.6"))
        for p in ("linux", "mac-arm", "windows")
    ]
    held.append(
        Held(canonicalize_name("scipy"), "linux", Version("1.15.0"), Version("1.14.0"), ("mac-intel",))
    )
    held.append(
        Held(canonicalize_name("scipy"), "windows", Version("1.15.1"), Version("1.14.0"), ("mac-intel",))
    )
    assert describe_held(held) == [
        "torch 2.2.2 on linux, mac-arm, windows (on their own: 2.15.0), to match mac-intel",
        "numpy 2.2.6 on linux, mac-arm, windows (on their own: 2.4.6), to match mac-intel",
        "scipy 1.14.0 on linux, windows (on their own: linux 1.15.0, windows 1.15.1), to match mac-intel",
    ]
