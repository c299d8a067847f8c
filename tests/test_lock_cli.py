"""`kernodeck lock` on the command line: exit codes, --check, --platform, --format, --offline,
--output-dir, and two processes sharing one cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


@pytest.fixture
def project(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    f = index_factory
    f.add_wheel("app", "1.0", requires=["dep>=1", 'winonly; sys_platform == "win32"'])
    f.add_wheel("dep", "1.0")
    f.add_wheel("winonly", "1.0")
    return write_manifest(
        tmp_path / "proj", requirements=["app"], default_url=served_index.url(), platforms=[LINUX, WINDOWS]
    )


def test_lock_writes_every_platform(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lock", str(project)]) == 0
    err = capsys.readouterr().err
    assert "wrote requirements-rebuild-linux.txt: 2 pins, 2 hashes" in err
    assert pins((project.parent / requirements_filename("linux")).read_text()) == {"app": "1.0", "dep": "1.0"}
    assert pins((project.parent / requirements_filename("windows")).read_text()) == {
        "app": "1.0",
        "dep": "1.0",
        "winonly": "1.0",
    }


def test_platform_option_and_quiet(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lock", str(project), "--platform", "windows", "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert (project.parent / requirements_filename("windows")).exists()
    assert not (project.parent / requirements_filename("linux")).exists()


def test_unknown_platform_is_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lock", str(project), "--platform", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown platform 'nope'" in err and "linux, windows" in err


def test_bad_manifest_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "repro.toml"
    bad.write_text("schema-version = 1\n[python]\nversion = 3.11\n")
    assert main(["lock", str(bad)]) == 2
    assert main(["lock", str(tmp_path / "missing.toml")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_check_fresh_stale_and_missing(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    linux = project.parent / requirements_filename("linux")
    assert main(["lock", str(project), "--check"]) == 1  # nothing locked yet
    captured = capsys.readouterr()
    assert "requirements-rebuild-linux.txt: missing" in captured.err
    assert "+app==1.0 \\" in captured.out
    assert not linux.exists()  # --check writes nothing

    assert main(["lock", str(project), "-q"]) == 0
    assert main(["lock", str(project), "--check"]) == 0
    assert "up to date" in capsys.readouterr().err

    before = linux.read_bytes()
    project.write_text(
        project.read_text().replace('requirements = ["app"]', 'requirements = ["app", "dep<2"]')
    )
    assert main(["lock", str(project), "--check", "--platform", "linux"]) == 1
    captured = capsys.readouterr()
    assert "requirements-rebuild-linux.txt: out of date" in captured.err
    assert "-# lock-inputs-sha256:" in captured.out and "+# lock-inputs-sha256:" in captured.out
    assert linux.read_bytes() == before


def test_unsatisfiable_exits_1_and_keeps_files(
    index_factory: IndexFactory, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lock", str(project), "-q"]) == 0
    linux = project.parent / requirements_filename("linux")
    before = linux.read_bytes()
    project.write_text(
        project.read_text().replace('requirements = ["app"]', 'requirements = ["app", "dep>=5"]')
    )
    assert main(["lock", str(project)]) == 1
    err = capsys.readouterr().err
    assert "error: cannot lock platform linux: " in err and "dep>=5" in err
    assert "Traceback" not in err
    assert linux.read_bytes() == before


def test_output_dir_and_pylock(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["lock", str(project), "--output-dir", str(out), "--format", "pylock", "-q"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "pylock.linux.toml",
        "pylock.windows.toml",
        "requirements-rebuild-linux.txt",
        "requirements-rebuild-windows.txt",
    ]
    assert not (project.parent / requirements_filename("linux")).exists()
    # the PEP 751 files a real lock writes are valid for packaging's own model
    from packaging.pylock import Pylock

    from kernodeck.support.tomltext import tomllib

    for name in ("pylock.linux.toml", "pylock.windows.toml"):
        lock = Pylock.from_dict(tomllib.loads((out / name).read_text()))
        assert lock.packages and all(p.wheels for p in lock.packages)


def test_offline_uses_the_cache(
    project: Path, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lock", str(project), "-q"]) == 0
    first = (project.parent / requirements_filename("linux")).read_bytes()
    served_index.reset()
    assert main(["lock", str(project), "--offline", "-q", "--output-dir", str(tmp_path / "off")]) == 0
    assert served_index.requests == []
    assert (tmp_path / "off" / requirements_filename("linux")).read_bytes() == first
    cold = tmp_path / "coldcache"
    assert (
        main(
            ["lock", str(project), "--offline", "--cache-dir", str(cold), "--output-dir", str(tmp_path / "x")]
        )
        == 1
    )
    assert "offline" in capsys.readouterr().err


def test_two_processes_share_one_cache(project: Path, tmp_path: Path) -> None:
    env = {**os.environ, "KERNODECK_CACHE_DIR": str(tmp_path / "shared-cache")}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kernodeck",
                "lock",
                str(project),
                "-q",
                "--output-dir",
                str(tmp_path / f"out{i}"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    for plat in ("linux", "windows"):
        a = (tmp_path / "out0" / requirements_filename(plat)).read_bytes()
        b = (tmp_path / "out1" / requirements_filename(plat)).read_bytes()
        assert a == b
    leftovers = [p for p in (tmp_path / "shared-cache").rglob("*.tmp")]
    assert leftovers == []


def test_a_lock_process_reads_the_index_without_importing_httpx_s_own_cli(project: Path) -> None:
    """httpx imports its command line (rich's syntax highlighting, pygments) and httpcore its
    async backends (anyio) and HTTP/2 stack (h2) when they are installed, as they are here; the
    `kernodeck` process runs none of them, so a lock that reads the index over HTTP imports httpx
    without them (and still writes the lock)."""
    script = (
        "import atexit, sys\n"
        "from kernodeck.cli import run\n"
        "atexit.register(lambda: print('httpx' in sys.modules, callable(sys.modules['httpx'].main),"
        " *(sys.modules.get(m) is not None for m in ('pygments', 'anyio', 'h2'))))\n"
        f"sys.argv = ['kernodeck', 'lock', {str(project)!r}, '-q']\n"
        "run()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KERNODECK_HTTP2"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "False", "False", "False"]
    assert pins((project.parent / requirements_filename("linux")).read_text()) == {"app": "1.0", "dep": "1.0"}
    import importlib.util

    # installed: the check above means something
    assert all(importlib.util.find_spec(m) is not None for m in ("pygments", "anyio", "h2"))
