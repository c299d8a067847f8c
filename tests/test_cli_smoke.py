"""The `kernodeck` command end to end, as a user runs it, under whichever interpreter runs the tests
(`make test-pythons` runs this file under Python 3.10 and the newest Python on the machine): --version,
init, validate, lock against a real loopback index, and verify of this interpreter itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kernodeck
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

SRC = Path(__file__).resolve().parent.parent / "src"


def kernodeck_cli(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """The console script beside this interpreter when it is installed there, else `python -m kernodeck`."""
    script = Path(sys.executable).with_name("kernodeck")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "kernodeck"]
    env = {**os.environ, "KERNODECK_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    return subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(index_factory: IndexFactory, served_index: Server, tmp_path: Path) -> Path:
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    index_factory.add_wheel("dep", "2.0")
    return tmp_path / "proj"


def test_version(tmp_path: Path) -> None:
    done = kernodeck_cli("--version", cwd=tmp_path, cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert kernodeck.__version__ in done.stdout


def test_init_validate_lock_verify(project: Path, served_index: Server, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    project.mkdir()
    done = kernodeck_cli("init", str(project), cwd=tmp_path, cache=cache)
    assert done.returncode == 0, done.stderr
    assert (project / "repro.toml").is_file()
    done = kernodeck_cli("validate", str(project / "repro.toml"), cwd=tmp_path, cache=cache)
    assert done.returncode == 0, done.stdout + done.stderr

    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    manifest = write_manifest(
        project, requirements=["app"], default_url=served_index.url(), platforms=[LINUX], python=python
    )
    done = kernodeck_cli("lock", str(manifest), cwd=tmp_path, cache=cache)
    assert done.returncode == 0, done.stderr
    assert pins((project / requirements_filename("linux")).read_text()) == {"app": "1.0", "dep": "2.0"}

    # the interpreter layer of this very interpreter against the manifest's Python version
    done = kernodeck_cli(
        "verify",
        str(manifest),
        "--python",
        sys.executable,
        "--platform",
        "linux",
        "--only",
        "interpreter",
        cwd=tmp_path,
        cache=cache,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "interpreter" in done.stdout

    wrong = write_manifest(project, requirements=["app"], default_url=served_index.url(), python="3.9")
    done = kernodeck_cli(
        "verify", str(wrong), "--platform", "linux", "--only", "interpreter", cwd=tmp_path, cache=cache
    )
    assert done.returncode == 1, done.stdout + done.stderr


def test_bad_manifest_is_exit_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "repro.toml"
    bad.write_text("schema-version = 1\n[python]\nversion = 3.11\n")
    done = kernodeck_cli("validate", str(bad), cwd=tmp_path, cache=tmp_path / "cache")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "repro.toml" in done.stderr + done.stdout
