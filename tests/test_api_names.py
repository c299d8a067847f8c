"""`kernodeck.verify(path)` and `kernodeck.require(path)` are plain functions: the verify layers live in
`kernodeck.layers`, so importing them never replaces the API function with a module."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys
    import kernodeck
    from kernodeck.errors import KernodeckError

    def call(label):
        try:
            kernodeck.verify(sys.argv[1])
        except KernodeckError as e:
            print(label, type(e).__name__, str(e).splitlines()[0])

    call("before")
    import kernodeck.layers.run
    import kernodeck.layers.packages
    import inspect
    call("after")
    from kernodeck.layers.run import run_verify, select_platform
    print("names", callable(run_verify), callable(select_platform), callable(kernodeck.require))
    print("function", inspect.isfunction(kernodeck.verify), list(inspect.signature(kernodeck.verify).parameters)[:1])
    """
)


def test_kernodeck_verify_stays_the_api_function_after_the_layers_are_imported(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "repro.toml"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(missing)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    before = [line for line in lines if line.startswith("before ")]
    after = [line for line in lines if line.startswith("after ")]
    assert len(before) == 1 and len(after) == 1, done.stdout
    # the same API function answered both times: the same error about the same missing manifest
    assert before[0].split(" ", 1)[1] == after[0].split(" ", 1)[1]
    assert "repro.toml" in after[0]
    assert "names True True True" in lines
    assert "function True ['path']" in lines, lines
