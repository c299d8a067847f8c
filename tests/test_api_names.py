"""`kernodeck.verify(path)` and `kernodeck.require(path)` stay callable after the `kernodeck.verify`
subpackage has been imported (the import system sets the package attribute to the subpackage)."""

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
    import kernodeck.verify.run  # sets kernodeck.verify to the subpackage
    import kernodeck.verify.packages
    call("after")
    from kernodeck.verify import run_verify, select_platform  # the subpackage still works as one
    print("names", callable(run_verify), callable(select_platform), callable(kernodeck.require))
    """
)


def test_kernodeck_verify_is_callable_before_and_after_the_subpackage_is_imported(tmp_path: Path) -> None:
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
