"""The cause of a failed install names the index that failed and what pip could not get, never
merely the first index pip lists."""

from __future__ import annotations

from kernodeck.handover.installer_errors import installer_cause

PIP_OUTPUT = """\
Looking in indexes: https://pypi.example/simple, https://torch.example/whl/cpu
Collecting numpy==2.1.0 (from -r requirements.txt (line 3))
  Using cached numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection \
broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f00>: Failed \
to establish a new connection: [Errno 111] Connection refused')': /whl/cpu/torch/
ERROR: Could not find a version that satisfies the requirement torch==2.6.0+cpu (from versions: none)
ERROR: No matching distribution found for torch==2.6.0+cpu
"""


def test_the_failing_index_and_the_requirement_are_named() -> None:
    cause = installer_cause(PIP_OUTPUT, requirements="requirements-rebuild-linux.txt", platform="linux")
    assert cause.kind == "connection"
    assert "(https://torch.example/whl/cpu/torch/)" in cause.error
    assert "pypi.example" not in cause.error
    assert "it could not get torch==2.6.0+cpu" in cause.error


def test_a_retry_path_under_no_listed_index_names_no_url() -> None:
    out = PIP_OUTPUT.replace("/whl/cpu/torch/", "/other/torch/")
    cause = installer_cause(out)
    assert cause.kind == "connection" and "https://" not in cause.error
