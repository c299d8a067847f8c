"""The produced files install with real pip and real uv into fresh venvs from the test index, and
pip refuses them when one artifact on the index is swapped."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.lock.orchestrate import lock_manifest
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import read_lock, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

pytestmark = pytest.mark.slow

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
UV = Path(sys.executable).with_name("uv")
HOST_LINUX_X86 = sys.platform == "linux" and platform.machine() == "x86_64"
HOST = {"name": "host", "os": "linux", "arch": "x86_64", "glibc": "2.17"}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def _pip_install(python: Path, req: Path, index_url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--isolated",
            "--no-cache-dir",
            "--require-hashes",
            "--no-deps",
            "-r",
            str(req),
            "--index-url",
            index_url,
        ],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=300,
    )


@pytest.fixture
def locked(index_factory: IndexFactory, served_index: Server, tmp_path: Path) -> Path:
    f = index_factory
    f.add_wheel(
        "app", "1.0", requires=["dep>=1", 'winonly; sys_platform == "win32"'], extras={"x": ["extra-dep"]}
    )
    f.add_wheel("dep", "1.0")
    f.add_wheel("dep", "2.0", tags="cp311-cp311-win_amd64")
    f.add_wheel("extra-dep", "3.0")
    f.add_wheel("winonly", "1.0")
    path = write_manifest(
        tmp_path / "proj",
        requirements=["app[x]"],
        default_url=served_index.url(),
        platforms=[HOST],
        python=PY,
    )
    lock_manifest(path, cache_dir=tmp_path / "cache")
    return path.parent / "requirements-rebuild-host.txt"


@pytest.mark.skipif(not HOST_LINUX_X86, reason="installs wheels locked for linux x86_64")
def test_pip_installs_the_lock(locked: Path, served_index: Server, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv-pip")
    r = _pip_install(python, locked, served_index.url(), tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = subprocess.run(
        [
            str(python),
            "-c",
            "import app, dep, extra_dep; print(app.__version__, dep.__version__, extra_dep.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["1.0", "1.0", "3.0"]


@pytest.mark.skipif(not HOST_LINUX_X86 or not UV.exists(), reason="needs uv and a linux x86_64 host")
def test_uv_installs_the_lock(locked: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv-uv")
    r = subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "--no-config",
            "--require-hashes",
            "-r",
            str(locked),
            "--python",
            str(python),
        ],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = subprocess.run(
        [str(python), "-c", "import app, dep; print(dep.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "1.0"


@pytest.mark.skipif(not HOST_LINUX_X86, reason="installs wheels locked for linux x86_64")
def test_pip_refuses_a_swapped_artifact(
    locked: Path, index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    index_factory.tamper("dep-1.0-py3-none-any.whl")
    python = _venv(tmp_path / "venv-bad")
    r = _pip_install(python, locked, served_index.url(), tmp_path)
    assert r.returncode != 0
    assert "DO NOT MATCH THE HASHES" in r.stdout + r.stderr
    site = list((tmp_path / "venv-bad").glob("lib/python*/site-packages"))
    assert site and not list(site[0].glob("dep*"))


@pytest.mark.skipif(
    not HOST_LINUX_X86 or PY not in ("3.10", "3.11", "3.12"), reason="imitation torch is cp310-cp312 x86_64"
)
def test_pip_installs_the_torch_imitation(index_factory: IndexFactory, tmp_path: Path) -> None:
    index_factory.pytorch(backends=("cpu",))
    with index_factory.serve() as srv:
        path = write_manifest(
            tmp_path / "proj",
            requirements=["torch==2.6.*"],
            default_url=srv.url(),
            platforms=[{"name": "cpu", "os": "linux", "arch": "x86_64", "backend": "cpu"}],
            pytorch_index=srv.pytorch_base,
            python=PY,
        )
        lock_manifest(path, cache_dir=tmp_path / "cache")
        libc, ver = platform.libc_ver()
        if libc != "glibc" or tuple(int(x) for x in ver.split(".")[:2]) < (2, 28):
            pytest.skip("the imitation torch wheels need glibc >= 2.28")
        python = _venv(tmp_path / "venv-torch")
        req = path.parent / "requirements-rebuild-cpu.txt"
        r = _pip_install(python, req, srv.url(), tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr + read_lock(path, "cpu")
        out = subprocess.run(
            [str(python), "-c", "import torch.version as v; print(v.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == "2.6.0+cpu"
