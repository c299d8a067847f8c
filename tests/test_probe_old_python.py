"""An interpreter too old for the environment probe is named as such, not as its own usage text
("Try `python -h` for more information"). The old interpreters are stand-ins that answer exactly
as Python 2.7 and 3.6 do when started with the probe's command line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernodeck.fingerprint import FingerprintCache
from kernodeck.probe.runner import ProbeFailed, ProbeRequest, RealProbe

PY27 = (
    "Unknown option: -I\n"
    "usage: python2.7 [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
    "Try `python -h' for more information.\n"
)
PY36 = (
    '  File "script.py", line 15\n'
    "    from __future__ import annotations\n"
    "    ^\n"
    "SyntaxError: future feature annotations is not defined\n"
)


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for the interpreter")
@pytest.mark.parametrize(("name", "stderr", "rc"), [("python2.7", PY27, 2), ("python3.6", PY36, 1)])
def test_too_old_interpreter_is_named(tmp_path: Path, name: str, stderr: str, rc: int) -> None:
    fake = tmp_path / name
    said = tmp_path / f"{name}.stderr"
    said.write_text(stderr)
    fake.write_text(f"#!/bin/sh\ncat '{said}' >&2\nexit {rc}\n")
    fake.chmod(0o755)
    probe = RealProbe(fake, cache=FingerprintCache.open(enabled=False), timeout=60)
    with pytest.raises(ProbeFailed) as e:
        probe.collect(ProbeRequest(torch=False, records=False))
    assert "older than Python 3.8" in e.value.message and "python -h" not in e.value.message
    assert str(fake) in e.value.message
