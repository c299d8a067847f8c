"""`kernodeck init` proposes a platform only where the project's own evidence says so, each with a
comment naming it (issue #43): a lock's platform markers AND a locked wheel of every package the
platform needs (uv.lock's dependency graph with its edge markers, pylock's and poetry.lock's package
markers), one platform per torch variant the project routes to, conda's platform lists; a platform
the markers allow but the wheels rule out is named in a comment, and this machine stays with a
comment when the lock does not cover it."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import tomlkit

from kernodeck.cli import main
from kernodeck.formats.condalock import conda_platforms
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest import load_manifest
from kernodeck.manifest.fromenv import EnvAdoption
from kernodeck.manifest.init import HostFacts, starter_document
from tests.fixtures.adopt_project import uv_lock as real_uv_lock
from tests.fixtures.adopt_project import write as _write
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins, with_default_index

pytest_plugins = ["tests.fixtures.index_fixtures"]

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

LINUX = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
ARM_LINUX = HostFacts("3.11", "cpython", "linux", "aarch64", glibc="2.35")
WINDOWS = HostFacts("3.11", "cpython", "windows", "x86_64")

CPU = "https://torch-mirror.example.org/whl/cpu"
CU128 = "https://torch-mirror.example.org/whl/cu128"
PYPI = "https://pypi.example.org/simple"

T_LINUX = "cp311-cp311-manylinux_2_28_x86_64"
T_LINUX_ARM = "cp311-cp311-manylinux_2_28_aarch64"
T_MAC_ARM = "cp311-cp311-macosx_11_0_arm64"
T_WIN = "cp311-cp311-win_amd64"

#: uv's resolution markers of a universal lock that forks on the OS only.
LINUX_DARWIN = "resolution-markers = [\"sys_platform == 'linux'\", \"sys_platform == 'darwin'\"]\n"
NVIDIA_EDGE = "platform_machine == 'x86_64' and sys_platform == 'linux'"


def _init(directory: Path, facts: HostFacts = LINUX) -> tuple[list[tuple[str, str | None]], str]:
    text = tomlkit.dumps(starter_document(directory, facts=facts, git=None))
    (directory / "repro.toml").write_text(text, encoding="utf-8")
    m = load_manifest(directory / "repro.toml")  # the starter validates
    return [(p.name, p.backend) for p in m.platform], text


def _wheels(index: str, name: str, version: str, *tags: str) -> str:
    files = ", ".join(
        f'{{ url = "{index}/{name.replace("-", "_")}-{version.replace("+", "%2B")}-{t}.whl", hash = "sha256:00" }}'
        for t in tags
    )
    return f"wheels = [{files}]\n"


def _pkg(name: str, version: str, index: str, *tags: str, deps: str = "", sdist: bool = False) -> str:
    out = f'[[package]]\nname = "{name}"\nversion = "{version}"\nsource = {{ registry = "{index}" }}\n'
    if deps:
        out += f"dependencies = [{deps}]\n"
    if sdist:
        out += f'sdist = {{ url = "{index}/{name}-{version}.tar.gz", hash = "sha256:00" }}\n'
    return out + (_wheels(index, name, version, *tags) if tags else "") + "\n"


def _root(deps: str, extras: str = "") -> str:
    out = f'[[package]]\nname = "myproj"\nversion = "0.1.0"\nsource = {{ virtual = "." }}\ndependencies = [{deps}]\n'
    return out + (f"\n[package.optional-dependencies]\n{extras}\n" if extras else "\n")


def _uv_lock(header: str, *packages: str) -> str:
    return f'version = 1\nrevision = 2\nrequires-python = ">=3.11"\n{header}\n' + "".join(packages)


#: torch from PyPI with wheels for linux x86_64 and aarch64, macOS arm64 and Windows; the nvidia
#: package it needs only on linux x86_64 ships a linux x86_64 wheel only.
PYPI_TORCH = (
    _pkg(
        "torch",
        "2.7.0",
        PYPI,
        T_LINUX,
        T_LINUX_ARM,
        T_MAC_ARM,
        T_WIN,
        deps=f'{{ name = "nvidia-cublas-cu12", marker = "{NVIDIA_EDGE}" }}, {{ name = "filelock" }}',
    )
    + _pkg("nvidia-cublas-cu12", "12.8.3.14", PYPI, "py3-none-manylinux_2_27_x86_64")
    + _pkg("filelock", "3.18.0", PYPI, "py3-none-any", sdist=True)
    + _pkg("numpy", "2.2.6", PYPI, T_LINUX, T_LINUX_ARM, T_MAC_ARM, T_WIN, sdist=True)
)


def test_uv_lock_markers_and_wheels_propose_only_what_installs(tmp_path: Path) -> None:
    _write(
        tmp_path / "uv.lock",
        _uv_lock(LINUX_DARWIN, _root('{ name = "numpy" }, { name = "torch" }'), PYPI_TORCH),
    )
    platforms, text = _init(tmp_path)
    # linux-aarch64 stays: the nvidia package without an aarch64 wheel is needed on x86_64 only;
    # macos-x86_64 goes: the markers allow it, torch has no wheel; windows: the markers do not allow it
    assert platforms == [("linux-x86_64", None), ("linux-aarch64", None), ("macos-arm64", None)]
    assert (
        "# not proposed: macos-x86_64 (uv.lock: resolution-markers allow it, but torch 2.7.0 has no wheel for it)"
        in text
    )
    assert (
        "# covered by the existing lock (uv.lock: resolution-markers, and a locked wheel of every package it "
        'needs there)\nname = "linux-aarch64"' in text
    )
    assert "windows" not in text
    assert "the first lock may fail here" not in text  # the lock covers this machine


def test_a_package_no_edge_reaches_is_not_needed(tmp_path: Path) -> None:
    # the nvidia package is locked but only reached on linux x86_64; without the edge marker it
    # would be needed everywhere, and only linux x86_64 would be proposed
    edge = '{ name = "nvidia-cublas-cu12" }, { name = "filelock" }'
    everywhere = PYPI_TORCH.replace(
        f'{{ name = "nvidia-cublas-cu12", marker = "{NVIDIA_EDGE}" }}, {{ name = "filelock" }}', edge
    )
    _write(tmp_path / "uv.lock", _uv_lock(LINUX_DARWIN, _root('{ name = "torch" }'), everywhere))
    platforms, text = _init(tmp_path)
    assert platforms == [("linux-x86_64", None)]
    assert (
        "not proposed: linux-aarch64 (uv.lock: resolution-markers allow it, but nvidia-cublas-cu12 12.8.3.14"
        in text
    )
    _write(tmp_path / "uv.lock", _uv_lock(LINUX_DARWIN, _root('{ name = "filelock" }'), everywhere))
    platforms, _ = _init(tmp_path)
    # torch is locked but the project does not reach it: every platform the markers allow
    assert platforms == [
        ("linux-x86_64", None),
        ("linux-aarch64", None),
        ("macos-arm64", None),
        ("macos-x86_64", None),
    ]


def test_an_edge_marker_that_holds_only_under_an_extra_counts(tmp_path: Path) -> None:
    # uv writes conflict extras as `extra == 'extra-7-myproj-train'`: such an edge is followed
    # (an extra the user may pick), unless its platform part rules the platform out
    header = "resolution-markers = [\"sys_platform == 'darwin' and extra == 'extra-7-myproj-train'\", \"sys_platform == 'linux'\"]\n"
    root = _root(
        "{ name = \"torch\", marker = \"sys_platform == 'linux' or extra == 'extra-7-myproj-train'\" }"
    )
    _write(tmp_path / "uv.lock", _uv_lock(header, root, PYPI_TORCH))
    platforms, text = _init(tmp_path)
    assert platforms == [("linux-x86_64", None), ("linux-aarch64", None), ("macos-arm64", None)]
    assert "not proposed: macos-x86_64 (uv.lock: resolution-markers allow it, but torch 2.7.0" in text
    # the edge holds on macOS only with no extra at all: torch is not needed there
    root = _root(
        "{ name = \"torch\", marker = \"sys_platform == 'linux' and extra == 'extra-7-myproj-train'\" }"
    )
    _write(tmp_path / "uv.lock", _uv_lock(header, root, PYPI_TORCH))
    platforms, _ = _init(tmp_path)
    assert ("macos-x86_64", None) in platforms


def _routed_project(directory: Path) -> None:
    _write(
        directory / "pyproject.toml",
        '[project]\nname = "myproj"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["numpy"]\n'
        '[project.optional-dependencies]\ncpu = ["torch>=2.7"]\ncu128 = ["torch>=2.7"]\n'
        '[tool.uv]\nconflicts = [[{ extra = "cpu" }, { extra = "cu128" }]]\n'
        '[tool.uv.sources]\ntorch = [{ index = "pytorch-cpu", extra = "cpu" }, { index = "pytorch-cu128", extra = "cu128" }]\n'
        f'[[tool.uv.index]]\nname = "pytorch-cpu"\nurl = "{CPU}"\nexplicit = true\n'
        f'[[tool.uv.index]]\nname = "pytorch-cu128"\nurl = "{CU128}"\nexplicit = true\n',
    )
    header = (
        "resolution-markers = [\n"
        "    \"sys_platform == 'linux' and extra != 'extra-7-myproj-cpu' and extra == 'extra-7-myproj-cu128'\",\n"
        "    \"sys_platform == 'linux' and extra == 'extra-7-myproj-cpu' and extra != 'extra-7-myproj-cu128'\",\n"
        "    \"sys_platform == 'darwin' and extra == 'extra-7-myproj-cpu' and extra != 'extra-7-myproj-cu128'\",\n"
        "]\n"
        'conflicts = [[{ package = "myproj", extra = "cpu" }, { package = "myproj", extra = "cu128" }]]\n'
    )
    extras = (
        "cpu = [\n"
        f'    {{ name = "torch", version = "2.7.0", source = {{ registry = "{CPU}" }}, marker = "sys_platform == \'darwin\'" }},\n'
        f'    {{ name = "torch", version = "2.7.0+cpu", source = {{ registry = "{CPU}" }}, marker = "sys_platform != \'darwin\'" }},\n'
        "]\n"
        f'cu128 = [{{ name = "torch", version = "2.7.0+cu128", source = {{ registry = "{CU128}" }} }}]\n'
    )
    nvidia = (
        f'{{ name = "nvidia-cublas-cu12", marker = "{NVIDIA_EDGE} and extra == \'extra-7-myproj-cu128\'" }}'
    )
    _write(
        directory / "uv.lock",
        _uv_lock(
            header,
            _root('{ name = "numpy" }', extras),
            _pkg("torch", "2.7.0", CPU, T_MAC_ARM),
            _pkg("torch", "2.7.0+cpu", CPU, T_LINUX, T_LINUX_ARM, T_WIN),
            _pkg("torch", "2.7.0+cu128", CU128, T_LINUX, T_WIN, deps=nvidia),
            _pkg("nvidia-cublas-cu12", "12.8.3.14", PYPI, "py3-none-manylinux_2_27_x86_64"),
            _pkg("numpy", "2.2.6", PYPI, T_LINUX, T_LINUX_ARM, T_MAC_ARM, T_WIN, sdist=True),
        ),
    )


def test_one_platform_per_variant_each_checked_against_its_own_torch(tmp_path: Path) -> None:
    _routed_project(tmp_path)
    platforms, text = _init(tmp_path)
    assert platforms == [
        ("linux-x86_64-cpu", "cpu"),
        ("linux-x86_64-cu128", "cu128"),
        ("linux-aarch64-cpu", "cpu"),  # torch 2.7.0+cpu has an aarch64 wheel, +cu128 has none
        ("macos-arm64-cpu", "cpu"),  # macOS runs no CUDA build; the cpu index's macOS torch installs
    ]
    assert (
        "# not proposed: linux-aarch64-cu128 (uv.lock: resolution-markers allow it, but torch 2.7.0+cu128 has "
        "no wheel for it)" in text
    )
    assert (
        "# not proposed: macos-x86_64-cpu (uv.lock: resolution-markers allow it, but torch 2.7.0 has no wheel "
        "for it)" in text
    )
    assert "windows" not in text  # the markers name no Windows
    m = load_manifest(tmp_path / "repro.toml")
    # the extras conflict ([tool.uv] conflicts): each variant platform, this machine's or proposed
    # from the lock, selects its own
    assert m.packages.extras == []
    assert [(p.name, p.extras) for p in m.platform] == [
        ("linux-x86_64-cpu", ["cpu"]),
        ("linux-x86_64-cu128", ["cu128"]),
        ("linux-aarch64-cpu", ["cpu"]),
        ("macos-arm64-cpu", ["cpu"]),
    ]


def test_the_host_stays_with_a_comment_when_the_lock_does_not_cover_it(tmp_path: Path) -> None:
    _routed_project(tmp_path)
    platforms, text = _init(tmp_path, ARM_LINUX)
    assert platforms[:2] == [("linux-aarch64-cpu", "cpu"), ("linux-aarch64-cu128", "cu128")]
    assert (
        "# this machine, the project's cu128 variant; uv.lock covers no linux-aarch64 wheel for torch "
        "2.7.0+cu128: the first lock may fail here" in text
    )
    assert "this machine, the project's cpu variant; uv.lock" not in text  # its cpu torch installs
    assert ("linux-x86_64-cu128", "cu128") in platforms
    _write(tmp_path / "uv.lock", _uv_lock(LINUX_DARWIN, _root('{ name = "torch" }'), PYPI_TORCH))
    (tmp_path / "pyproject.toml").unlink()
    platforms, text = _init(tmp_path, WINDOWS)
    assert platforms[0] == ("windows-x86_64", None)
    assert (
        "# this machine; uv.lock's resolution-markers do not hold on windows-x86_64: the first lock may fail here"
        in text
    )


def test_pylock_environments_and_wheels(tmp_path: Path) -> None:
    _write(
        tmp_path / "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "test"\n'
        "environments = [\"sys_platform == 'linux'\", \"sys_platform == 'darwin'\"]\n"
        '[[packages]]\nname = "torch"\nversion = "2.7.0"\n'
        f'wheels = [{{ name = "torch-2.7.0-{T_LINUX}.whl" }}, {{ name = "torch-2.7.0-{T_MAC_ARM}.whl" }}]\n'
        '[[packages]]\nname = "nvidia-cublas-cu12"\nversion = "12.8.3.14"\n'
        f'marker = "{NVIDIA_EDGE}"\n'
        'wheels = [{ name = "nvidia_cublas_cu12-12.8.3.14-py3-none-manylinux_2_27_x86_64.whl" }]\n',
    )
    platforms, text = _init(tmp_path)
    assert platforms == [("linux-x86_64", None), ("macos-arm64", None)]
    for name in ("linux-aarch64", "macos-x86_64"):
        assert (
            f"# not proposed: {name} (pylock.toml: environments allow it, but torch 2.7.0 has no wheel for it)"
            in text
        )


def test_poetry_lock_files_for_four_platforms_propose_all_four(tmp_path: Path) -> None:
    files = ", ".join(
        f'{{file = "torch-2.7.0-{t}.whl", hash = "sha256:00"}}'
        for t in (T_LINUX, T_LINUX_ARM, T_MAC_ARM, T_WIN)
    )
    _write(
        tmp_path / "poetry.lock",
        f'[[package]]\nname = "torch"\nversion = "2.7.0"\nfiles = [{files}]\n\n'
        '[[package]]\nname = "pywin32"\nversion = "310"\nmarkers = "sys_platform == \\"win32\\""\n'
        f'files = [{{file = "pywin32-310-{T_WIN}.whl", hash = "sha256:00"}}]\n',
    )
    platforms, text = _init(tmp_path)
    assert platforms == [
        ("linux-x86_64", None),
        ("linux-aarch64", None),
        ("macos-arm64", None),
        ("windows-x86_64", None),
    ]  # pywin32's Windows-only wheel does not count where its markers do not hold
    assert (
        "covered by the existing lock (poetry.lock: a locked wheel of every package it needs there)" in text
    )


def test_conda_lock_and_explicit_files(tmp_path: Path) -> None:
    _write(
        tmp_path / "conda-lock.yml",
        "version: 1\nmetadata:\n  content_hash:\n    linux-64: abc\n  channels:\n  - url: conda-forge\n"
        "  platforms:\n  - linux-64\n  - osx-arm64\n  - win-64\n  sources:\n  - environment.yml\n"
        "package:\n- name: python\n  platform: linux-aarch64\n",
    )
    _write(
        tmp_path / "conda-linux-aarch64.lock",
        "# Generated by conda-lock.\n# platform: linux-aarch64\n@EXPLICIT\nhttps://conda.example.org/python.conda\n",
    )
    _write(tmp_path / "notes.lock", "# platform: osx-64\nnot an explicit file\n")
    platforms, text = _init(tmp_path)
    assert platforms == [
        ("linux-x86_64", None),
        ("macos-arm64", None),
        ("windows-x86_64", None),
        ("linux-aarch64", None),
    ]
    assert "# covered by the existing lock (conda-lock.yml: metadata.platforms)" in text
    assert "# covered by the existing lock (conda-linux-aarch64.lock: platform linux-aarch64)" in text
    assert [c.evidence for c in conda_platforms(tmp_path)] == [
        "conda-lock.yml: metadata.platforms",
        "conda-linux-aarch64.lock: platform linux-aarch64",
    ]


def test_an_environment_files_platforms_with_its_cuda_variant(tmp_path: Path) -> None:
    _write(
        tmp_path / "environment.yml",
        "name: x\nchannels: [pytorch, nvidia]\nplatforms: [linux-64, linux-aarch64, osx-arm64]\n"
        "dependencies:\n  - python=3.11\n  - pytorch=2.5\n  - pytorch-cuda=12.4\n",
    )
    platforms, text = _init(tmp_path)
    # macOS runs no CUDA build of the project's only variant: not proposed
    assert platforms == [("linux-x86_64-cu124", "cu124"), ("linux-aarch64-cu124", "cu124")]
    assert "# named by the project's conda file (environment.yml: platforms)" in text
    assert (
        "# not proposed: macos-arm64 (environment.yml: platforms names it, but macos runs no cu124 build)"
        in text
    )
    _write(
        tmp_path / "environment.yml",
        "name: x\nplatforms:\n  - osx-64\n  - osx-arm64 # CI\ndependencies:\n  - rich\n",
    )
    platforms, text = _init(tmp_path)
    assert platforms == [("linux-x86_64", None), ("macos-x86_64", None), ("macos-arm64", None)]
    assert "# this machine; environment.yml's platforms name no linux-x86_64\n" in text
    _write(tmp_path / "conda-osx-arm64.lock", "# platform: osx-arm64\n@EXPLICIT\n")
    _write(tmp_path / "conda-linux-64.lock", "# platform: linux-64\n@EXPLICIT\n")
    _, text = _init(tmp_path)
    assert "name no linux-x86_64" not in text  # one explicit file locks this machine's platform
    _, text = _init(tmp_path, ARM_LINUX)
    assert (
        "# this machine; conda-linux-64.lock locks no linux-aarch64; conda-osx-arm64.lock locks no linux-aarch64; "
        "environment.yml's platforms name no linux-aarch64\n" in text
    )


def test_a_real_uv_lock_of_routed_variants_and_a_first_lock_of_every_proposed_platform(
    tmp_path: Path, pytorch_index: IndexFactory, served_index: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`uv lock` itself writes the lock (conflicting extras, one torch per registry); every
    platform init proposes then locks on the same loopback index, and those it leaves out are the
    ones that have no torch wheel there."""
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    proj = tmp_path / "proj"
    base = served_index.pytorch_base
    _write(
        proj / "pyproject.toml",
        f'[project]\nname = "myproj"\nversion = "0.1.0"\nrequires-python = "=={PY}.*"\ndependencies = ["filelock"]\n'
        '[project.optional-dependencies]\ncpu = ["torch>=2.6"]\ncu126 = ["torch>=2.6"]\n'
        '[tool.uv]\nconflicts = [[{ extra = "cpu" }, { extra = "cu126" }]]\n'
        '[tool.uv.sources]\ntorch = [{ index = "pytorch-cpu", extra = "cpu" }, { index = "pytorch-cu126", extra = "cu126" }]\n'
        f'[[tool.uv.index]]\nname = "pytorch-cpu"\nurl = "{base}/cpu"\nexplicit = true\n'
        f'[[tool.uv.index]]\nname = "pytorch-cu126"\nurl = "{base}/cu126"\nexplicit = true\n',
    )
    lock = real_uv_lock(proj, served_index.url(), tmp_path)
    assert "extra == 'extra-6-myproj-cpu'" in lock and "2.6.0%2Bcpu" in lock
    facts = dataclasses.replace(LINUX, python_version=PY)
    platforms, text = _init(proj, facts)
    assert platforms == [
        ("linux-x86_64-cpu", "cpu"),
        ("linux-x86_64-cu126", "cu126"),
        ("linux-aarch64-cpu", "cpu"),
        ("macos-arm64-cpu", "cpu"),
        # uv's lock has a fork on the extras alone, which holds on Windows: both builds have a wheel
        ("windows-x86_64-cpu", "cpu"),
        ("windows-x86_64-cu126", "cu126"),
    ]
    assert (
        "not proposed: linux-aarch64-cu126 (uv.lock: resolution-markers allow it, but torch 2.6.0+cu126"
        in text
    )
    assert "not proposed: macos-x86_64-cpu (uv.lock: resolution-markers allow it, but torch 2.6.0 has" in text
    path = proj / "repro.toml"
    with_default_index(path, served_index.url())  # PyPI's part, served on loopback
    assert main(["lock", str(path), "-q"]) == 0
    torch = {name: pins((proj / requirements_filename(name)).read_text())["torch"] for name, _ in platforms}
    assert torch == {
        "linux-x86_64-cpu": "2.6.0+cpu",
        "linux-x86_64-cu126": "2.6.0+cu126",
        "linux-aarch64-cpu": "2.6.0+cpu",
        "macos-arm64-cpu": "2.6.0",
        "windows-x86_64-cpu": "2.6.0+cpu",
        "windows-x86_64-cu126": "2.6.0+cu126",
    }


def test_a_lock_without_markers_names_no_platform_it_leaves_out(tmp_path: Path) -> None:
    # wheel tags alone: the platforms without a wheel were never allowed, so no comment names them
    lock = _uv_lock("", _root('{ name = "torch" }'), PYPI_TORCH)
    _write(tmp_path / "uv.lock", lock)
    platforms, text = _init(tmp_path)
    assert platforms == [
        ("linux-x86_64", None),
        ("linux-aarch64", None),
        ("macos-arm64", None),
        ("windows-x86_64", None),
    ]
    assert "not proposed" not in text
    assert "# covered by the existing lock (uv.lock: a locked wheel of every package it needs there)" in text
    platforms, text = _init(tmp_path, HostFacts("3.11", "cpython", "macos", "x86_64", macos="14.0"))
    assert platforms[0] == ("macos-x86_64", None)
    assert (
        "# this machine; uv.lock covers no macos-x86_64 wheel for torch 2.7.0: the first lock may fail here"
        in text
    )


def test_pylock_variants_by_index_and_extras_markers(tmp_path: Path) -> None:
    # PEP 751 writes the variant's extra as `'cpu' in extras` and each package's `index`
    _routed_project(tmp_path)
    (tmp_path / "uv.lock").unlink()

    def torch(version: str, index: str, marker: str, *tags: str) -> str:
        wheels = ", ".join(f'{{ name = "torch-{version}-{t}.whl" }}' for t in tags)
        return (
            f'[[packages]]\nname = "torch"\nversion = "{version}"\nindex = "{index}"\nmarker = "{marker}"\n'
            f"wheels = [{wheels}]\n"
        )

    _write(
        tmp_path / "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "test"\nextras = ["cpu", "cu128"]\n'
        "environments = [\"sys_platform == 'linux'\", \"sys_platform == 'darwin'\"]\n"
        + torch("2.7.0+cpu", CPU, "sys_platform != 'darwin' and 'cpu' in extras", T_LINUX, T_LINUX_ARM)
        + torch("2.7.0", CPU, "sys_platform == 'darwin' and 'cpu' in extras", T_MAC_ARM)
        + torch("2.7.0+cu128", CU128, "'cu128' in extras", T_LINUX),
    )
    platforms, text = _init(tmp_path)
    assert platforms == [
        ("linux-x86_64-cpu", "cpu"),
        ("linux-x86_64-cu128", "cu128"),
        ("linux-aarch64-cpu", "cpu"),
        ("macos-arm64-cpu", "cpu"),
    ]
    assert (
        "# not proposed: linux-aarch64-cu128 (pylock.toml: environments allow it, but torch 2.7.0+cu128"
        in text
    )
    assert "# not proposed: macos-x86_64-cpu (pylock.toml: environments allow it, but torch 2.7.0 has" in text


def test_conda_files_read_only_what_they_say(tmp_path: Path) -> None:
    _write(
        tmp_path / "conda-lock.yml",
        "# conda-lock\nversion: 1\nplatforms: [win-64]\nmetadata:\n  platforms: [linux-64, 'osx-arm64', linux-s390x]\n",
    )
    _write(
        tmp_path / "spec-file.txt",
        "# This file may be used to create an environment\n# platform: osx-64\n@EXPLICIT\n",
    )
    _write(tmp_path / "conda-other.txt", "# platform: win-64\nnumpy\n")  # not explicit: says nothing
    _write(tmp_path / "environment.yml", "name: x\ndependencies:\n  - platforms: a package, not the key\n")
    found = conda_platforms(tmp_path)
    assert [(c.evidence, c.platforms, c.lock) for c in found] == [
        # the top-level `platforms` is not conda-lock's; linux-s390x is no platform Kernodeck names
        ("conda-lock.yml: metadata.platforms", [("linux", "x86_64"), ("macos", "arm64")], True),
        ("spec-file.txt: platform osx-64", [("macos", "x86_64")], True),
    ]


def test_poetry_markers_per_group_and_a_malformed_lock(tmp_path: Path) -> None:
    _write(
        tmp_path / "poetry.lock",
        '[[package]]\nname = "torch"\nversion = "2.7.0"\n'
        f'files = [{{file = "torch-2.7.0-{T_LINUX}.whl", hash = "sha256:00"}}, '
        f'{{file = "torch-2.7.0-{T_MAC_ARM}.whl", hash = "sha256:00"}}]\n\n'
        '[[package]]\nname = "pywin32"\nversion = "310"\n'
        "markers = {main = \"sys_platform == 'win32'\", dev = \"sys_platform == 'cygwin'\"}\n"
        f'files = [{{file = "pywin32-310-{T_WIN}.whl", hash = "sha256:00"}}]\n',
    )
    platforms, _ = _init(tmp_path)
    assert platforms == [
        ("linux-x86_64", None),
        ("macos-arm64", None),
    ]  # pywin32: neither group's marker holds
    # entries of the wrong types say nothing, and init still writes a valid manifest
    _write(
        tmp_path / "uv.lock",
        "version = 1\nresolution-markers = [\"sys_platform == 'linux'\", 3]\n"
        '[[package]]\nname = "myproj"\nversion = "1"\nsource = { virtual = "." }\ndependencies = "torch"\n'
        '[package.dev-dependencies]\ndev = [{ name = 5 }, "torch", { name = "torch", extra = "cpu" }]\n'
        '[[package]]\nname = "torch"\nversion = 2\nwheels = [{ url = 7 }, { url = "torch-2-not-a-wheel.whl" }]\n',
    )
    (tmp_path / "poetry.lock").unlink()
    platforms, text = _init(tmp_path)
    # only the dev group reaches torch (its wheel is no wheel any platform installs): init selects
    # no group, so nothing the lock needs is missing
    assert platforms == [("linux-x86_64", None), ("linux-aarch64", None)]
    assert "the first lock may fail" not in text


def test_what_only_an_extra_or_a_group_needs_rules_no_platform_out(tmp_path: Path) -> None:
    extras = 'gpu = [{ name = "nvidia-cublas-cu12" }]\n'
    root = _root('{ name = "numpy" }', extras) + '[package.dev-dependencies]\ndev = [{ name = "torch" }]\n\n'
    _write(tmp_path / "uv.lock", _uv_lock(LINUX_DARWIN, root, PYPI_TORCH))
    platforms, text = _init(tmp_path)
    # init selects neither the extra gpu (a Linux-x86_64-only package, which would keep aarch64
    # and macOS out) nor the group dev (torch): the manifest it writes locks numpy alone, and
    # only numpy's missing Intel macOS wheel keeps a platform out
    assert platforms == [("linux-x86_64", None), ("linux-aarch64", None), ("macos-arm64", None)]
    assert "nvidia-cublas-cu12" not in text and "torch" not in text
    assert (
        "# not proposed: macos-x86_64 (uv.lock: resolution-markers allow it, but numpy 2.2.6 has only a source distribution for it"
        in text
    )


def test_a_linked_conda_file_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "conda-lock.yml"
    _write(outside, "version: 1\nmetadata:\n  platforms:\n  - osx-arm64\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "conda-lock.yml").symlink_to(outside)
    assert conda_platforms(proj) == []
    (proj / "conda-lock.yml").unlink()
    (proj / "conda-lock.yml").write_text(outside.read_text())
    assert [c.platforms for c in conda_platforms(proj)] == [[("macos", "arm64")]]


def _poetry_pkg(name: str, version: str, *tags: str, sdist: bool = False, deps: str = "") -> str:
    files = [f'{{file = "{name}-{version}-{t}.whl", hash = "sha256:00"}}' for t in tags]
    files += [f'{{file = "{name}-{version}.tar.gz", hash = "sha256:00"}}'] if sdist else []
    out = f'[[package]]\nname = "{name}"\nversion = "{version}"\nfiles = [{", ".join(files)}]\n'
    return out + (f"\n[package.dependencies]\n{deps}\n" if deps else "") + "\n"


POETRY_PYPROJECT = (
    '[tool.poetry]\nname = "proj"\nversion = "0.1.0"\n\n[tool.poetry.dependencies]\npython = "^3.11"\n'
    'lightning = "^2.0"\n\n[tool.poetry.group.dev.dependencies]\npylint = "*"\n\n'
    '[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n'
)


def test_poetry_lock_edges_decide_what_a_platform_needs(tmp_path: Path) -> None:
    """poetry.lock 2.0 writes no package markers: pywin32 is needed only where the edge to it holds
    (`sys_platform == "win32"`), reached from the project's own dependencies (pyproject.toml)."""
    _write(tmp_path / "pyproject.toml", POETRY_PYPROJECT)
    _write(
        tmp_path / "poetry.lock",
        _poetry_pkg(
            "lightning",
            "2.0.8",
            "py3-none-any",
            deps='pywin32 = {version = ">=300", markers = "sys_platform == \\"win32\\""}\nnumpy = "*"',
        )
        + _poetry_pkg("numpy", "1.26.0", T_LINUX, T_LINUX_ARM, T_MAC_ARM, T_WIN)
        + _poetry_pkg("pywin32", "306", T_WIN)
        + _poetry_pkg("pylint", "2.17.5", "py3-none-any"),
    )
    platforms, text = _init(tmp_path)
    assert platforms == [
        ("linux-x86_64", None),
        ("linux-aarch64", None),
        ("macos-arm64", None),
        ("windows-x86_64", None),
    ]
    assert "pywin32" not in text
    # without the project's pyproject.toml every locked package counts: pywin32 keeps Linux out
    (tmp_path / "pyproject.toml").unlink()
    platforms, text = _init(tmp_path)
    assert platforms == [("linux-x86_64", None), ("windows-x86_64", None)]
    assert "poetry.lock covers no linux-x86_64 wheel for pywin32 306" in text


def test_poetry_optional_edges_count_only_through_an_extra_asked_for(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", POETRY_PYPROJECT)
    _write(
        tmp_path / "poetry.lock",
        _poetry_pkg(
            "lightning",
            "2.0.8",
            "py3-none-any",
            deps='winonly = {version = "*", optional = true}\n\n[package.extras]\nwin = ["winonly (>=1)"]',
        )
        + _poetry_pkg("winonly", "1.0", T_WIN)
        + _poetry_pkg("pylint", "2.17.5", "py3-none-any", deps='lazy = "*"')
        + _poetry_pkg("lazy", "1.9.0", T_LINUX, T_MAC_ARM, T_WIN, sdist=True),
    )
    platforms, text = _init(tmp_path)
    # winonly: only lightning[win] needs it, and no edge asks for it; lazy (without a linux-aarch64
    # wheel) only through the group dev, which init does not select
    assert platforms == [
        ("linux-x86_64", None),
        ("linux-aarch64", None),
        ("macos-arm64", None),
        ("macos-x86_64", None),
        ("windows-x86_64", None),
    ]
    assert "winonly" not in text and "lazy" not in text


def test_an_sdist_counts_only_where_allow_sdist_names_it(tmp_path: Path) -> None:
    """A package with wheels (none `any`) needs one on the platform, its sdist notwithstanding (a
    lock takes wheels unless allow-sdist names the project); a package with an sdist only (julius)
    is no evidence, and init proposes it under allow-sdist, naming the lock that builds it."""
    lock = _uv_lock(
        LINUX_DARWIN,
        _root('{ name = "xformers" }, { name = "julius" }, { name = "torch" }'),
        PYPI_TORCH,
        _pkg("xformers", "0.0.33", PYPI, T_LINUX, T_WIN, sdist=True),
        _pkg("julius", "0.2.7", PYPI, sdist=True),
    )
    _write(tmp_path / "uv.lock", lock)
    platforms, text = _init(tmp_path)
    assert platforms == [("linux-x86_64", None)]
    assert (
        "# not proposed: macos-arm64 (uv.lock: resolution-markers allow it, but xformers 0.0.33 has only a "
        "source distribution for it)" in text
    )
    assert 'allow-sdist = ["julius"] # uv.lock locks julius 0.2.7 as a source distribution only' in text
    assert load_manifest(tmp_path / "repro.toml").packages.allow_sdist == ["julius"]
    # xformers 0.0.33 locked as an sdist only in another fork of the lock: allow-sdist names it,
    # and its sdist then builds anywhere, as in the project's own lock
    _write(
        tmp_path / "uv.lock",
        lock.replace('{ name = "xformers" }', '{ name = "xformers", version = "0.0.33" }')
        + _pkg("xformers", "0.0.20", PYPI, sdist=True),
    )
    platforms, text = _init(tmp_path)
    assert platforms == [("linux-x86_64", None), ("linux-aarch64", None), ("macos-arm64", None)]
    assert 'allow-sdist = ["julius", "xformers"] # uv.lock locks julius 0.2.7 and xformers 0.0.20' in text


def test_allow_sdist_from_each_lock_that_names_its_files(tmp_path: Path) -> None:
    """pylock.toml and poetry.lock name their files too; Pipfile.lock names none (hashes only), so
    nothing is proposed from it; an adopted environment, not a lock, proposes nothing."""
    _write(
        tmp_path / "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "Julius"\nversion = "0.2.7"\n'
        'sdist = { name = "julius-0.2.7.tar.gz", hashes = { sha256 = "00" } }\n'
        '[[packages]]\nname = "numpy"\nversion = "2.2.6"\n'
        f'sdist = {{ name = "numpy-2.2.6.tar.gz", hashes = {{ sha256 = "00" }} }}\n'
        f'wheels = [{{ name = "numpy-2.2.6-{T_LINUX}.whl", hashes = {{ sha256 = "00" }} }}]\n',
    )
    text = _init(tmp_path)[1]
    assert 'allow-sdist = ["julius"] # pylock.toml locks Julius 0.2.7 as a source distribution only' in text
    (tmp_path / "pylock.toml").unlink()
    _write(tmp_path / "poetry.lock", _poetry_pkg("julius", "0.2.7", sdist=True))
    text = _init(tmp_path)[1]
    assert 'allow-sdist = ["julius"] # poetry.lock locks julius 0.2.7 as a source distribution only' in text
    env = EnvAdoption("3.11", "cpython", requirements=["julius==0.2.7"])
    adopted = tomlkit.dumps(starter_document(tmp_path, facts=LINUX, git=None, env=env))
    assert "allow-sdist = [] # names that may be locked as source distributions" in adopted
    (tmp_path / "poetry.lock").unlink()
    _write(
        tmp_path / "Pipfile.lock", '{"default": {"julius": {"version": "==0.2.7", "hashes": ["sha256:00"]}}}'
    )
    text = _init(tmp_path)[1]
    assert "allow-sdist = [] # names that may be locked as source distributions" in text


def test_a_pyproject_too_deep_to_read_leaves_poetry_lock_counting_every_package(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n")
    _write(tmp_path / "poetry.lock", _poetry_pkg("pywin32", "306", T_WIN))
    platforms, text = _init(tmp_path)  # init still writes a manifest, and says why pyproject is not used
    assert platforms == [("linux-x86_64", None), ("windows-x86_64", None)]
    assert "# not used: pyproject.toml:1: TOML nested more than" in text
    assert "poetry.lock covers no linux-x86_64 wheel for pywin32 306" in text
