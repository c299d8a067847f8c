"""After `import torch` crashes, the backend layer says what happened (the import crashed, no
torch distribution names the module), never "torch is not installed"."""

from __future__ import annotations

import json
from pathlib import Path

from kernodeck.api import verify
from kernodeck.probe.runner import FakeProbe

FIXTURES = Path(__file__).parent / "fixtures" / "probes"

MANIFEST = """schema-version = 1
[reference]
name = "t"
id = "1"
[python]
version = "3.11"
[packages]
requirements = ["torch==2.13.0"]
[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"
"""


def test_import_crash_is_not_reported_as_torch_missing(tmp_path: Path) -> None:
    facts = json.loads((FIXTURES / "cpu_linux.json").read_text())
    facts["torch"] = {"status": "crashed", "error": "import torch crashed (killed by SIGSEGV)"}
    facts["torch_files"] = {"installed": False, "importable": True}
    (tmp_path / "repro.toml").write_text(MANIFEST)
    report = verify(tmp_path / "repro.toml", probe=FakeProbe(facts), only=["backend"], use_cache=False)
    steps = {s.name: s for s in report.steps}
    assert "crashed" in (steps["torch-import"].error or "")
    kind = steps["build-kind"]
    assert kind.details["cause"] == "torch-build-unknown"
    assert kind.error is not None and "import torch crashed" in kind.error
    assert kind.error != "torch is not installed"
