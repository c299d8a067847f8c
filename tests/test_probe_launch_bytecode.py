"""Probe scripts run as `python -I SCRIPT` would, from bytecode cached beside them per interpreter
version (a script run by path is compiled at every start), and never import from the working
folder (the empty path entry `-c` puts first before Python 3.11)."""

from __future__ import annotations

import importlib.util
import json
import marshal
import os
import struct
import subprocess
import sys
from pathlib import Path

from kernodeck.probe import launch

SHOW = """\
import json, sys
print(json.dumps({"argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0]}))
"""


def _run(script: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [*launch.run_script(sys.executable, script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_runs_like_the_script_with_its_arguments(tmp_path: Path) -> None:
    script = tmp_path / "tool" / "show.py"
    script.parent.mkdir()
    script.write_text(SHOW)
    work = tmp_path / "work"
    work.mkdir()
    (work / "json.py").write_text("raise SystemExit('the working folder was imported from')\n")
    r = _run(script, work, "--flag", "value")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["argv"] == [str(script), "--flag", "value"]
    assert (got["name"], got["file"]) == ("__main__", str(script))
    assert got["path0"] != ""


def test_bytecode_is_cached_beside_the_script_and_used(tmp_path: Path) -> None:
    script = tmp_path / "show.py"
    script.write_text(SHOW)
    assert _run(script, tmp_path).returncode == 0
    cached = Path(importlib.util.cache_from_source(str(script)))
    assert cached.is_file()  # written even where PYTHONDONTWRITEBYTECODE is set: -I ignores it
    # bytecode of other code under the header of this source: what runs is the cached bytecode
    st = os.stat(script)
    code = compile(SHOW.replace('"name"', '"from-cache"'), str(script), "exec")
    header = importlib.util.MAGIC_NUMBER + struct.pack("<III", 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size)
    cached.write_bytes(header + marshal.dumps(code))
    assert '"from-cache"' in _run(script, tmp_path).stdout
    script.write_text(SHOW + "\n")  # the source changed: compiled again, the stale pyc unused
    assert '"name"' in _run(script, tmp_path).stdout


def test_an_error_names_the_script(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("def f():\n    raise RuntimeError('boom')\nf()\n")
    r = _run(script, tmp_path)
    assert r.returncode == 1
    assert f'File "{script}", line 2' in r.stderr and "RuntimeError: boom" in r.stderr
