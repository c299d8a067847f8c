"""REBUILD.md run literally: every command of its steps, line by line, in a clean folder holding
only the bundle, under `env -i PATH=... HOME=... SSL_CERT_FILE=...`, against a loopback index that
serves the project's packages and Kernodeck's own dependencies (repacked from this environment).
The check writes a `.npy`, which only Kernodeck's `checks` extra reads: the bundled Kernodeck must
come with it, from `_kernodeck/requirements.txt`, whose every line is hashed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.handover import selfwheel
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.installed_wheels import repacked_wheel

#: Writes ids.npy by hand (the NPY format), so the rebuilt environment needs no NumPy.
APP = """\
import argparse, json, struct
from pathlib import Path
import alpha
p = argparse.ArgumentParser()
p.add_argument("--out", type=Path, required=True)
a = p.parse_args()
a.out.mkdir(parents=True, exist_ok=True)
header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }"
header += " " * (63 - (10 + len(header)) % 64) + "\\n"
data = struct.pack("<3q", 1, 2, 3)
(a.out / "ids.npy").write_bytes(b"\\x93NUMPY\\x01\\x00" + struct.pack("<H", len(header)) + header.encode() + data)
(a.out / "versions.json").write_text(json.dumps({"versions": [alpha.__version__]}))
"""


def _manifest(index_url: str) -> str:
    return f"""schema-version = 1
[reference]
name = "literal"
id = "2026-02-01.1"
[python]
version = "{sys.version_info.major}.{sys.version_info.minor}"
[packages]
requirements = ["alpha==1.0"]
[[packages.index]]
name = "local"
url = "{index_url}"
default = true
[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"
[[check]]
name = "sample"
run = ["python", "app.py", "--out", "{{out}}"]
timeout = 120
[[check.output]]
path = "ids.npy"
shape = [3]
dtype = "int64"
[[check.output]]
path = "versions.json"
key = "versions"
equals = ["1.0"]
"""


def _steps(md: str) -> list[str]:
    """The command lines of REBUILD.md's numbered steps, in order: every ```sh block except the one
    that only shows what rebuild's stages do (it follows "does what these commands do")."""
    lines: list[str] = []
    for m in re.finditer(r"(?P<before>[^\n]*)\n+```sh\n(?P<body>.*?)\n```", md, re.S):
        if "does what these commands do" in md[max(0, m.start() - 200) : m.start("body")]:
            continue
        lines += [line for line in m["body"].splitlines() if line.strip()]
    return lines


@pytest.mark.slow
def test_rebuild_md_run_literally_in_a_clean_environment_passes_every_step(tmp_path: Path) -> None:
    from kernodeck.lock.orchestrate import lock_manifest

    factory = IndexFactory(tmp_path / "index")
    factory.add_wheel("alpha", "1.0", requires=["beta>=2"])
    factory.add_wheel("beta", "2.0")
    for pin in selfwheel.dependency_pins(["checks"]):
        factory.add_file(repacked_wheel(pin.split("==")[0], tmp_path / "wheels"))
    with factory.serve() as server:
        proj = tmp_path / "author" / "project"
        proj.mkdir(parents=True)
        (proj / "app.py").write_text(APP)
        (proj / "repro.toml").write_text(_manifest(server.url()))
        lock_manifest(proj / "repro.toml")
        out = tmp_path / "author" / "bundle"
        done = subprocess.run(
            [sys.executable, "-m", "kernodeck", "bundle", str(proj / "repro.toml"), str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "_kernodeck/requirements.txt" not in done.stdout + done.stderr  # no hash is missing

        reqs = (out / "_kernodeck" / "requirements.txt").read_text()
        pins = [
            line
            for line in reqs.replace("\\\n", " ").splitlines()
            if line and not line.startswith(("#", "--"))
        ]
        assert pins and all("--hash=sha256:" in line for line in pins), pins
        assert any(line.startswith("numpy==") for line in pins)  # the `checks` extra, for the .npy

        clean = tmp_path / "receiver" / "handover"
        shutil.copytree(out, clean)
        home = tmp_path / "home"
        home.mkdir()
        env = {"PATH": os.environ["PATH"], "HOME": str(home)}
        if os.environ.get("SSL_CERT_FILE"):
            env["SSL_CERT_FILE"] = os.environ["SSL_CERT_FILE"]
        steps = _steps((clean / "REBUILD.md").read_text())
        assert any(s.startswith(".kernodeck/bin/kernodeck rebuild") for s in steps), steps
        for line in steps:
            ran = subprocess.run(
                ["bash", "-c", line],
                cwd=clean,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert ran.returncode == 0, (line, ran.stdout[-3000:], ran.stderr[-3000:])
        check = json.loads((clean / "check-report.json").read_text())
        assert check["steps"] and all(s["status"] == "passed" for s in check["steps"]), check["steps"]
