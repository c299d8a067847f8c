"""How the `kernodeck` command ends (`cli.leave`): what the interpreter does at exit still happens
(threads joined, thread pools stopped, atexit handlers run, temporary folders removed, buffered
output written), in that order, with the command's exit code; only the teardown of every object
is skipped. Each case is a real process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TIMEOUT = 120


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd
    )


def test_threads_pools_atexit_and_buffered_output_all_happen_before_the_exit(tmp_path: Path) -> None:
    code = (
        "import atexit, sys, tempfile, threading, time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from kernodeck.cli import leave\n"
        "kept = tempfile.TemporaryDirectory(dir='.')\n"  # never cleaned up explicitly
        "open('folder', 'w').write(kept.name)\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    print('thread done')\n"
        "threading.Thread(target=late).start()\n"
        "def job():\n"
        "    time.sleep(0.2)\n"
        "    open('pool-job', 'w').write('done')\n"
        "pool = ThreadPoolExecutor(2)\n"  # never shut down: its workers must not hold the exit
        "pool.submit(job)\n"  # still running when leave() is called: it finishes first
        "sys.stdout.write('x' * 200000 + '\\n')\n"  # buffered, never flushed by the script
        "leave(3)\n"
    )
    proc = _run(code, tmp_path)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert (tmp_path / "pool-job").read_text() == "done"
    assert lines.index("thread done") < lines.index("atexit ran")  # joined first, as at exit
    assert "x" * 200000 in lines
    assert not (tmp_path / (tmp_path / "folder").read_text()).exists()
    assert proc.stderr == ""


def test_python_m_kernodeck_ends_with_the_command_s_code_and_message(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text("schema-version = 1\n[python]\nversion = 3\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kernodeck", "validate", "repro.toml"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "repro.toml" in proc.stderr and "Traceback" not in proc.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "kernodeck", "--help"], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert ok.returncode == 0 and "lock" in ok.stdout
