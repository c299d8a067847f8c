"""The first error of a traceback or stderr (kernodeck.support.firsterror), on real and recorded output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.checks.runner import run_command
from kernodeck.probe.runner import parse_torch_output
from kernodeck.support.firsterror import first_error

TIMEOUT = 60


def _stderr(tmp_path: Path, source: str, *args: str) -> str:
    (tmp_path / "main.py").write_text(source)
    p = subprocess.run(
        [sys.executable, *args, "main.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert p.returncode != 0, p.stderr
    return p.stderr


CHAINED = """\
import warnings
warnings.warn("something is deprecated")
try:
    import module_that_is_not_there
except ImportError:
    raise RuntimeError("fallback failed")
"""

CAUSED = """\
def load():
    raise KeyError("model.safetensors")
try:
    load()
except KeyError as e:
    raise OSError("could not load the checkpoint") from e
"""


def test_chained_exceptions_name_the_root_cause(tmp_path: Path) -> None:
    err = _stderr(tmp_path, CHAINED)
    assert "During handling of the above exception" in err and "RuntimeError: fallback failed" in err
    assert first_error(err) == "ModuleNotFoundError: No module named 'module_that_is_not_there'"
    err = _stderr(tmp_path, CAUSED)
    assert "direct cause of the following exception" in err
    assert first_error(err) == "KeyError: 'model.safetensors'"


def test_syntax_errors_in_the_script_and_in_an_imported_module(tmp_path: Path) -> None:
    err = _stderr(tmp_path, "def f(:\n    pass\n")
    assert "Traceback" not in err  # the script itself: no traceback header
    assert first_error(err) == "SyntaxError: invalid syntax"
    (tmp_path / "broken.py").write_text("x = (1,\n")
    err = _stderr(tmp_path, "import broken\n")
    assert err.startswith("Traceback")
    assert (first_error(err) or "").startswith("SyntaxError: '(' was never closed")


def test_a_segfault_names_the_fatal_error(tmp_path: Path) -> None:
    err = _stderr(tmp_path, "import ctypes\nctypes.string_at(0)\n", "-X", "faulthandler")
    assert first_error(err) == "Fatal Python error: Segmentation fault"


def test_keyboard_interrupt_and_system_exit_with_a_message(tmp_path: Path) -> None:
    assert first_error(_stderr(tmp_path, "raise KeyboardInterrupt\n")) == "KeyboardInterrupt"
    err = _stderr(tmp_path, "import sys\nsys.exit('the input folder is empty')\n")
    assert first_error(err) is None
    assert first_error(err, fallback=True) == "the input folder is empty"


# Recorded from torch runs (paths shortened): what a CUDA failure prints.
CUDA_NO_KERNEL = """\
/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:235: UserWarning:
NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.
  warnings.warn(
Traceback (most recent call last):
  File "/app/train.py", line 41, in <module>
    y = model(x.cuda())
        ^^^^^^^^^^^^^^
RuntimeError: CUDA error: no kernel image is available for execution on the device
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

"""

CUDA_OOM_WITH_WANDB = """\
wandb: Tracking run with wandb version 0.19.1
Traceback (most recent call last):
  File "/app/train.py", line 88, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB
wandb: Waiting for W&B process to finish... (failed 1).
Exception ignored in atexit callback: <function _exit at 0x7f>
"""

CXX_TERMINATE = """\
terminate called after throwing an instance of 'c10::Error'
  what():  CUDA driver error: initialization error
Exception raised from getDevice at ../c10/cuda/CUDAFunctions.cpp:120 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in /venv/lib/libc10.so)
"""

NCCL = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/app/ddp.py", line 12, in <module>
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            CUDA_NO_KERNEL,
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        ),
        (
            CUDA_OOM_WITH_WANDB,
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB",
        ),
        (CXX_TERMINATE, "c10::Error: CUDA driver error: initialization error"),
        (
            NCCL,
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error",
        ),
        (
            "terminate called after throwing an instance of 'std::bad_alloc'\n",
            "terminate called after throwing an instance of 'std::bad_alloc'",
        ),
        ("UserWarning: careful\nall good\n", None),
        ("", None),
    ],
)
def test_recorded_failures(text: str, expected: str | None) -> None:
    assert first_error(text) == expected


def test_fallback_is_the_last_line_only_when_nothing_names_an_error() -> None:
    assert first_error("starting\nsomething went sideways\n\n", fallback=True) == "something went sideways"
    assert first_error(CUDA_NO_KERNEL, fallback=True) == first_error(CUDA_NO_KERNEL)
    assert first_error("\n\n", fallback=True) is None


def test_the_probe_and_the_checks_name_the_same_first_error(tmp_path: Path) -> None:
    err = _stderr(tmp_path, CHAINED)
    root_cause = "ModuleNotFoundError: No module named 'module_that_is_not_there'"
    torch = parse_torch_output("", err, 1)
    assert (
        torch.status == "crashed"
        and torch.error == f"import torch crashed (exited with status 1): {root_cause}"
    )
    out = tmp_path / "out"
    result = run_command(
        [sys.executable, "main.py"], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=TIMEOUT, out=out
    )
    assert result.first_error == root_cause
