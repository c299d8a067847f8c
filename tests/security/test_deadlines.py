"""Every run ends: non-regular files are never read as data or manifest, and a probe or check that
leaves something running (a daemon holding the output pipe, in its own session even) cannot hold
verify past its timeout. Each case runs the CLI in a subprocess bounded by a timeout; the
attacks' own helper processes are killed by their ids afterwards."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernodeck.checks.runner import run_command
from tests.fixtures.installed_env import NAME, Env, build, copy, manifest_text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "mkfifo") or sys.platform == "win32", reason="POSIX only"),
]

ZEROS = "0" * 64


def _kernodeck(
    *args: str, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "KERNODECK_CACHE_DIR": str(cwd / ".cache"), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "kernodeck", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _kill_pid_in(pidfile: Path) -> None:
    """Kill the helper process an attack started (by the id it wrote), if it is still there."""
    for _ in range(50):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.1)
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    return False


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return build(tmp_path_factory.mktemp("deadline-base"))


@pytest.fixture
def env(base: Env, tmp_path: Path) -> Env:
    return copy(base, tmp_path)


def test_manifest_that_is_a_fifo_is_exit_2(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "repro.toml")
    for cmd in (
        ["verify", str(tmp_path)],
        ["lock", str(tmp_path)],
        ["validate", str(tmp_path / "repro.toml")],
    ):
        r = _kernodeck(*cmd, cwd=tmp_path, timeout=60)
        assert r.returncode == 2, (cmd, r.stderr)
        assert "repro.toml" in r.stderr and "FIFO" in r.stderr and "internal error" not in r.stderr


def test_data_path_that_is_a_fifo_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    os.mkfifo(tmp_path / "data" / "pipe")
    (tmp_path / "repro.toml").write_text(
        manifest_text(f'[[data]]\nname = "pipe"\npath = "data/pipe"\nsha256 = "{ZEROS}"\n')
    )
    r = _kernodeck("verify", "--only", "data", cwd=tmp_path, timeout=60)
    assert r.returncode == 1, r.stderr
    said = " ".join(r.stdout.split())  # the report wraps long lines
    assert "data/pipe" in said and "a FIFO, not a regular file" in said


def test_dev_zero_as_external_data_is_an_error_not_an_endless_read(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text(
        manifest_text(f'[[data]]\nname = "zero"\npath = "/dev/zero"\nexternal = true\nsha256 = "{ZEROS}"\n')
    )
    r = _kernodeck("verify", "--only", "data", cwd=tmp_path, timeout=60)
    assert r.returncode == 1, r.stderr
    said = " ".join(r.stdout.split())
    assert "/dev/zero" in said and "a character device, not a regular file" in said


def test_record_listing_a_fifo_does_not_block_the_probe(env: Env) -> None:
    target = env.site / NAME / "sub" / "helpers.py"
    target.unlink()
    os.mkfifo(target)
    r = _kernodeck(
        "verify",
        "--python",
        str(env.python),
        "--only",
        "packages",
        str(env.project),
        cwd=env.project,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    assert f"{NAME}/sub/helpers.py (not a regular file)" in " ".join(r.stdout.split())
    assert stat.S_ISFIFO(target.stat().st_mode)


def _torch_that_forks_a_daemon(site: Path, pidfile: Path) -> None:
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            import os, time
            child = os.fork()
            if child == 0:
                os.setsid()  # out of the probe's process group
                if os.fork():
                    os._exit(0)
                with open({str(pidfile)!r}, "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(60)  # holding the probe's stdout and stderr
                os._exit(0)
            os.waitpid(child, 0)
            __version__ = "2.13.0"
            """
        )
    )


def test_fake_torch_whose_daemon_holds_the_pipe_ends_within_the_torch_timeout(env: Env) -> None:
    pidfile = env.project / "daemon.pid"
    _torch_that_forks_a_daemon(env.site, pidfile)
    try:
        r = _kernodeck(
            "verify",
            "--python",
            str(env.python),
            "--only",
            "backend",
            "--no-compute",
            str(env.project),
            cwd=env.project,
            timeout=45,  # the daemon lives 60 s; before the fix verify waited for it
            env={"KERNODECK_TORCH_TIMEOUT": "10"},
        )
        assert r.returncode in (0, 1), r.stderr
        assert "internal error" not in r.stderr
    finally:
        _kill_pid_in(pidfile)


def test_python_whose_child_keeps_the_pipe_open_does_not_hold_verify(env: Env) -> None:
    pidfile = env.project / "sleeper.pid"
    wrapper = env.project / "python-wrapper"
    wrapper.write_text(
        f'#!/bin/sh\nsetsid sleep 60 </dev/null &\necho $! > {pidfile}\nexec {env.python} "$@"\n'
    )
    wrapper.chmod(0o755)
    try:
        r = _kernodeck(
            "verify",
            "--python",
            str(wrapper),
            "--only",
            "packages",
            str(env.project),
            cwd=env.project,
            timeout=45,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        _kill_pid_in(pidfile)


def test_a_check_that_leaves_a_daemon_behind_has_its_group_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    try:
        result = run_command(
            [sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), timeout=60, out=out
        )
        assert result.returncode == 0 and not result.timed_out
        pid = int(pidfile.read_text())
        for _ in range(100):  # reparented to init, which reaps it in its own time
            if _gone(pid):
                break
            time.sleep(0.1)
        assert _gone(pid)
    finally:
        _kill_pid_in(pidfile)


def test_a_check_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    try:
        result = run_command(
            [sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), timeout=3, out=out
        )
        assert result.timed_out
        pid = int(pidfile.read_text())
        for _ in range(100):
            if _gone(pid):
                break
            time.sleep(0.1)
        assert _gone(pid)
    finally:
        _kill_pid_in(pidfile)


def test_metadata_that_is_a_fifo_does_not_block_the_probe(env: Env) -> None:
    meta = next(env.site.glob(f"{NAME}-*.dist-info")) / "METADATA"
    meta.unlink()
    os.mkfifo(meta)
    r = _kernodeck(
        "verify",
        "--python",
        str(env.python),
        "--only",
        "packages",
        str(env.project),
        cwd=env.project,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    assert f"{NAME} is not installed" in " ".join(r.stdout.split())  # its metadata cannot be read


def test_fingerprint_skips_fifos_in_a_folder_and_refuses_one_named(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"a" * 5000)
    os.mkfifo(folder / "pipe")
    (folder / "zero").symlink_to("/dev/zero")
    code = textwrap.dedent(
        f"""
        from kernodeck.fingerprint import FingerprintCache
        from kernodeck.support.fsio import NotRegularFile
        fp = FingerprintCache().fingerprint({str(folder)!r})
        print(fp.files, fp.size)
        for p in ({str(folder / "pipe")!r}, {str(folder / "zero")!r}):
            try:
                FingerprintCache().fingerprint(p)
            except NotRegularFile as e:
                print(e.strerror)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "1 5000",
        "a FIFO, not a regular file",
        "a character device, not a regular file",
    ]
