"""The check runner: argv expansion, environment, logs, first error line, timeouts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from kernodeck.checks import run_check, steps
from kernodeck.checks.runner import (
    LOG_DIR,
    expand_argv,
    fresh_out,
    make_base,
    run_command,
    target_env,
)
from kernodeck.errors import UsageError
from kernodeck.manifest import Manifest, loads_manifest
from kernodeck.manifest.schema import Determinism
from kernodeck.report import Status
from kernodeck.support.firsterror import first_error as first_error_line

PY = sys.executable

HEAD = """
schema-version = 1
[reference]
name = "t"
id = "1"
[python]
version = "3.11"
[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"
"""


def manifest(extra: str) -> Manifest:
    return loads_manifest(HEAD + extra)


NOISY_TRACEBACK = """\
/venv/lib/python3.11/site-packages/x/__init__.py:12: UserWarning: something is deprecated
  warnings.warn(
Traceback (most recent call last):
  File "/app/run.py", line 3, in <module>
    import flash_attn
  File "/venv/flash_attn/__init__.py", line 1, in <module>
    from . import _C
ImportError: libcudart.so.12: cannot open shared object file: No such file or directory

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/run.py", line 5, in <module>
    raise RuntimeError("fallback failed")
RuntimeError: fallback failed
Exception ignored in atexit callback: <function _exit at 0x7f>
wandb: Waiting for W&B process to finish... (failed 1).
"""


def test_first_error_line_is_the_first_traceback_exception_not_the_last_noise() -> None:
    line = first_error_line(NOISY_TRACEBACK)
    assert line == "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "loading...\nRuntimeError: CUDA error: no kernel image\nmore\n",
            "RuntimeError: CUDA error: no kernel image",
        ),
        ("warming up\nerror: the input folder is empty\nbye\n", "error: the input folder is empty"),
        ("Fatal Python error: Segmentation fault\n\nThread 0x1\n", "Fatal Python error: Segmentation fault"),
        ("torch.OutOfMemoryError: CUDA out of memory\n", "torch.OutOfMemoryError: CUDA out of memory"),
        ('Traceback (most recent call last):\n  File "x", line 1\nAssertionError\n', "AssertionError"),
        ("UserWarning: careful\nall good\n", None),
        ("", None),
    ],
)
def test_first_error_line_cases(text: str, expected: str | None) -> None:
    assert first_error_line(text) == expected


def test_expand_argv_target_python_and_out(tmp_path: Path) -> None:
    argv = expand_argv(
        ["python", "-m", "app", "--out", "{out}", "--py={python}"], "/env/bin/python", tmp_path
    )
    assert argv == ["/env/bin/python", "-m", "app", "--out", str(tmp_path), "--py=/env/bin/python"]
    assert expand_argv(["bash", "run.sh"], "/env/bin/python", tmp_path)[0] == "bash"


def test_target_env_applies_determinism_then_check_env(tmp_path: Path) -> None:
    det = Determinism(
        seed=7, deterministic_algorithms=True, float32_matmul_precision="high", env={"PYTHONHASHSEED": "0"}
    )
    env, added = target_env(
        "/env/bin/python",
        base={"PATH": "/usr/bin", "KEEP": "1"},
        determinism=det,
        extra={"X": "y"},
        out=tmp_path,
    )
    assert env["KEEP"] == "1"
    assert added["KERNODECK_SEED"] == "7"
    assert added["PYTHONHASHSEED"] == "0"  # the table's env wins over the seed default
    assert added["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert added["KERNODECK_DETERMINISTIC_ALGORITHMS"] == "1"
    assert added["KERNODECK_FLOAT32_MATMUL_PRECISION"] == "high"
    assert added["X"] == "y"
    assert env["PATH"].split(os.pathsep)[0] == "/env/bin"


def test_fresh_out_replaces_its_own_folder_and_refuses_a_foreign_one(tmp_path: Path) -> None:
    out = fresh_out(tmp_path, "c")
    (out / "old.txt").write_text("x")
    out = fresh_out(tmp_path, "c")
    assert not (out / "old.txt").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("x")
    with pytest.raises(UsageError, match="not made by kernodeck"):
        fresh_out(tmp_path, "mine")
    assert (tmp_path / "mine" / "precious.txt").exists()


CRASH = """\
import sys
print("warming up", file=sys.stderr)
try:
    open("/nonexistent/data.bin")
except OSError as e:
    raise RuntimeError("could not read data") from e
"""


def test_crash_reports_exit_code_and_first_error_and_keeps_the_log(tmp_path: Path) -> None:
    (tmp_path / "crash.py").write_text(CRASH)
    m = manifest(
        '[[check]]\nname = "crash"\nrun = ["python", "crash.py"]\n[[check.output]]\npath = "x.npy"\n'
    )
    result, step = run_check(m.check[0], m, tmp_path, PY, base=make_base(tmp_path / "out"))
    assert not result.ok and result.returncode == 1
    assert step.status is Status.FAILED
    assert result.first_error is not None and result.first_error.startswith("FileNotFoundError: [Errno 2]")
    assert "crash: exit code 1: FileNotFoundError" in (step.error or "")
    log = (tmp_path / "out" / "crash" / LOG_DIR / "stderr.log").read_text()
    assert "RuntimeError: could not read data" in log  # the full log is kept
    # through steps(): the outputs are skipped, not judged
    out = steps(m, tmp_path, PY, out_dir=tmp_path / "out")
    assert [s.status for s in out] == [Status.FAILED, Status.SKIPPED]


SLOW = """\
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("Traceback-free noise", file=sys.stderr, flush=True)
time.sleep(60)
"""


def test_timeout_kills_the_command_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    m = manifest('[[check]]\nname = "slow"\ntimeout = 1\nrun = ["python", "slow.py"]\n')
    out = steps(m, tmp_path, PY, out_dir=tmp_path / "out")
    assert out[0].status is Status.FAILED
    assert out[0].error is not None and "slow: timed out after 1 s" in out[0].error


def test_run_command_missing_program(tmp_path: Path) -> None:
    r = run_command(["/nonexistent/python"], cwd=tmp_path, env=dict(os.environ), timeout=5, out=tmp_path)
    assert not r.ok and r.returncode == 127 and "cannot start" in (r.first_error or "")


ENV_APP = """\
import json, os, pathlib
keys = ("KERNODECK_SEED", "PYTHONHASHSEED", "FROM_CHECK")
data = {k: os.environ.get(k) for k in keys}
data["cwd"] = os.getcwd()
pathlib.Path(os.environ["KERNODECK_OUT"], "env.json").write_text(json.dumps(data))
"""


def test_command_runs_in_manifest_folder_with_determinism_and_check_env(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(ENV_APP)
    m = manifest(
        "[determinism]\nseed = 42\n"
        '[[check]]\nname = "env"\nrun = ["python", "app.py"]\nenv = { FROM_CHECK = "yes" }\n'
        '[[check.output]]\npath = "env.json"\nkey = "KERNODECK_SEED"\nequals = ["42"]\n'
    )
    out = steps(m, tmp_path, PY, out_dir=tmp_path / "out")
    assert [s.status for s in out] == [Status.PASSED] * 3, [s.error for s in out]
    data = json.loads((tmp_path / "out" / "env" / "env.json").read_text())
    assert data == {
        "KERNODECK_SEED": "42",
        "PYTHONHASHSEED": "42",
        "FROM_CHECK": "yes",
        "cwd": str(tmp_path.resolve()),
    }
    assert out[0].details["env"]["KERNODECK_SEED"] == "42"


def test_no_checks_declared_is_a_skipped_step(tmp_path: Path) -> None:
    out = steps(manifest(""), tmp_path, PY)
    assert [s.status for s in out] == [Status.SKIPPED]


def test_unknown_check_name_is_a_usage_error(tmp_path: Path) -> None:
    m = manifest('[[check]]\nname = "a"\nrun = ["python", "-V"]\n')
    with pytest.raises(UsageError, match="no check named 'b'"):
        steps(m, tmp_path, PY, names=["b"])
