"""`kernodeck init` declares the platforms an existing lock covers beside the host's: uv.lock's
supported or resolution markers AND the wheels each platform needs, else its wheel tags (real
uv.lock files made by `uv lock` against the local index), pylock.toml's environments or wheel
tags, poetry.lock's files, and Kernodeck's own `requirements-rebuild-<platform>.txt` files.
(The rule in detail, variants and conda files: tests/test_init_platform_evidence.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tomlkit

from kernodeck.manifest import load_manifest
from kernodeck.manifest.init import HostFacts, starter_document
from tests.fixtures.adopt_project import uv_lock as _uv_lock
from tests.fixtures.adopt_project import write as _write
from tests.fixtures.index_factory import IndexFactory, Server

pytest_plugins = ["tests.fixtures.index_fixtures"]

LINUX = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"


def _platforms(proj: Path, facts: HostFacts = LINUX) -> list[tuple[str, str | None]]:
    (proj / "repro.toml").write_text(tomlkit.dumps(starter_document(proj, facts=facts, git=None)))
    m = load_manifest(proj / "repro.toml")  # the starter validates with the added platforms
    return [(p.name, p.backend) for p in m.platform]


def test_real_uv_lock_with_environments_adds_the_platforms_it_supports(
    tmp_path: Path, index_factory: IndexFactory, served_index: Server
) -> None:
    index_factory.add_wheel("app", "1.0")
    proj = tmp_path / "proj"
    _write(
        proj / "pyproject.toml",
        f'[project]\nname = "proj"\nversion = "1"\nrequires-python = ">={PY}"\ndependencies = ["app"]\n'
        "[tool.uv]\nenvironments = [\"sys_platform == 'linux'\", "
        "\"sys_platform == 'darwin' and platform_machine == 'arm64'\"]\n",
    )
    lock = _uv_lock(proj, served_index.url(), tmp_path)
    assert "supported-markers" in lock, lock
    assert _platforms(proj) == [("linux-x86_64", None), ("linux-aarch64", None), ("macos-arm64", None)]
    assert (
        "covered by the existing lock (uv.lock: supported-markers, and a locked wheel of every package "
        "it needs there)" in (proj / "repro.toml").read_text()
    )


def test_real_universal_uv_lock_adds_the_platforms_its_wheels_install_on(
    tmp_path: Path, index_factory: IndexFactory, served_index: Server
) -> None:
    index_factory.add_wheel("native", "1.0", tags=f"{CP}-{CP}-manylinux_2_17_x86_64")
    index_factory.add_wheel("native", "1.0", tags=f"{CP}-{CP}-macosx_11_0_arm64")
    index_factory.add_wheel("pure", "1.0")
    proj = tmp_path / "proj"
    _write(
        proj / "pyproject.toml",
        f'[project]\nname = "proj"\nversion = "1"\nrequires-python = "=={PY}.*"\n'
        'dependencies = ["native", "pure"]\n',
    )
    lock = _uv_lock(proj, served_index.url(), tmp_path)
    assert "macosx_11_0_arm64" in lock and "resolution-markers" not in lock
    assert _platforms(proj) == [("linux-x86_64", None), ("macos-arm64", None)]


def test_uv_lock_forked_on_the_python_version_only_is_no_platform_evidence(tmp_path: Path) -> None:
    _write(
        tmp_path / "uv.lock",
        'version = 1\nrequires-python = ">=3.10"\n'
        "resolution-markers = [\"python_full_version >= '3.12'\", \"python_full_version < '3.12'\"]\n"
        '[[package]]\nname = "rich"\nversion = "13.7.1"\n',
    )
    assert _platforms(tmp_path) == [("linux-x86_64", None)]
    _write(
        tmp_path / "uv.lock",
        'version = 1\nrequires-python = ">=3.10"\n'
        "resolution-markers = [\"sys_platform == 'darwin'\", \"sys_platform == 'win32'\"]\n",
    )
    assert _platforms(tmp_path) == [
        ("linux-x86_64", None),
        ("macos-arm64", None),
        ("macos-x86_64", None),
        ("windows-x86_64", None),
    ]


def test_a_pure_python_lock_adds_no_platform(tmp_path: Path) -> None:
    _write(
        tmp_path / "poetry.lock",
        '[[package]]\nname = "rich"\nversion = "13.7.1"\nfiles = [\n'
        '  {file = "rich-13.7.1-py3-none-any.whl", hash = "sha256:00"},\n'
        '  {file = "rich-13.7.1.tar.gz", hash = "sha256:00"},\n]\n',
    )
    assert _platforms(tmp_path) == [("linux-x86_64", None)]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "pylock.toml",
            'lock-version = "1.0"\ncreated-by = "test"\n'
            "environments = [\"sys_platform == 'win32'\", \"sys_platform == 'linux' and platform_machine == 'aarch64'\"]\n",
            [("linux-x86_64", None), ("linux-aarch64", None), ("windows-x86_64", None)],
        ),
        (
            "pylock.toml",
            'lock-version = "1.0"\ncreated-by = "test"\n[[packages]]\nname = "native"\nversion = "1.0"\n'
            "wheels = [\n"
            f'  {{name = "native-1.0-{CP}-{CP}-win_amd64.whl", hashes = {{sha256 = "00"}}}},\n'
            f'  {{name = "native-1.0-{CP}-abi3-manylinux_2_28_aarch64.whl", hashes = {{sha256 = "00"}}}},\n'
            "]\n",
            [("linux-x86_64", None), ("linux-aarch64", None), ("windows-x86_64", None)],
        ),
        (
            "poetry.lock",
            '[[package]]\nname = "native"\nversion = "1.0"\nfiles = [\n'
            f'  {{file = "native-1.0-{CP}-{CP}-macosx_10_9_x86_64.whl", hash = "sha256:00"}},\n'
            f'  {{file = "native-1.0-{CP}-{CP}-macosx_11_0_arm64.whl", hash = "sha256:00"}},\n'
            "]\n"
            '[[package]]\nname = "other"\nversion = "2.0"\nfiles = [\n'
            f'  {{file = "other-2.0-{CP}-{CP}-macosx_11_0_arm64.whl", hash = "sha256:00"}},\n'
            f'  {{file = "other-2.0-{CP}-{CP}-manylinux2014_x86_64.whl", hash = "sha256:00"}},\n'
            "]\n",
            # only macos-arm64 has a wheel of both; the host is declared anyway
            [("linux-x86_64", None), ("macos-arm64", None)],
        ),
    ],
)
def test_pylock_and_poetry_lock_platforms(
    tmp_path: Path, name: str, text: str, expected: list[tuple[str, str | None]]
) -> None:
    _write(tmp_path / name, text)
    assert _platforms(tmp_path) == expected


def test_kernodeck_lock_files_add_their_platforms_with_backends(tmp_path: Path) -> None:
    _write(tmp_path / "requirements-rebuild-linux-aarch64-cpu.txt", "# a lock\n")
    _write(tmp_path / "requirements-rebuild-linux-x86_64.txt", "# the host's own\n")
    _write(tmp_path / "requirements-rebuild-not-a-platform.txt", "# unknown os: ignored\n")
    assert _platforms(tmp_path) == [("linux-x86_64", None), ("linux-aarch64-cpu", "cpu")]
    assert "requirements-rebuild-linux-aarch64-cpu.txt" in (tmp_path / "repro.toml").read_text()
