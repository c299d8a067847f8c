"""`kernodeck check --record` and the `check` command: references, fingerprints, refusals, exit codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from kernodeck.checks import steps
from kernodeck.checks.record import record
from kernodeck.cli import main
from kernodeck.errors import UsageError
from kernodeck.manifest import load_manifest
from kernodeck.report import Status

PY = sys.executable

APP = """\
import json, os, sys
from pathlib import Path
import numpy as np
out = Path(sys.argv[1])
scale = float(os.environ.get("APP_SCALE", "1"))
np.save(out / "scores.npy", (np.arange(12, dtype=np.float32).reshape(3, 4) * scale))
(out / "labels.json").write_text(json.dumps(["a", "b", "c"]))
"""

MANIFEST = """\
#:schema ../../schema/repro.schema.json
schema-version = 1   # a comment that must survive

[reference]
name = "rec"
id = "1"

[python]
version = "3.11"

[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"

[[check]]
name = "scores"
run = ["python", "app.py", "{out}"]

[[check.output]]
path = "scores.npy"
finite = true
reference = "reference/scores.npy"
atol = 1e-6   # justified elsewhere

[[check.output]]
path = "labels.json"
equals = ["a", "b", "c"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "repro.toml").write_text(MANIFEST)
    return tmp_path


def test_record_writes_references_and_fingerprints_keeping_comments(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = record(project / "repro.toml", PY, out_dir=project / "out")
    assert rec.ok, [s.error for s in rec.steps]
    assert rec.written == ["reference/scores.npy", "reference/labels.json"]
    text = (project / "repro.toml").read_text()
    assert text.startswith(
        "#:schema ../../schema/repro.schema.json\nschema-version = 1   # a comment that must survive\n"
    )
    assert "atol = 1e-6   # justified elsewhere\n" in text
    m = load_manifest(project / "repro.toml")
    scores, labels = m.check[0].output
    assert scores.shape == [3, 4] and scores.dtype == "float32" and scores.sha256 is not None
    assert labels.sha256 is not None and labels.shape is None  # not an array: no shape written
    assert np.array_equal(np.load(project / "reference" / "scores.npy"), np.arange(12).reshape(3, 4))

    # the recorded reference now passes, and a perturbed run fails on the comparison
    result = steps(m, project, PY, out_dir=project / "out")
    assert all(s.status is Status.PASSED for s in result), [s.error for s in result]
    assert "scores/scores.npy: reference sha256" in [s.name for s in result]
    bad = steps(m, project, PY, out_dir=project / "out", env={**os.environ, "APP_SCALE": "1.001"})
    failed = [s for s in bad if s.status is Status.FAILED]
    assert [s.name for s in failed] == ["scores/scores.npy: vs reference"]
    assert "max abs error 0.011" in (failed[0].error or "")

    # recording a different result again asks for a new reference id
    monkeypatch.setenv("APP_SCALE", "2")
    again = record(project / "repro.toml", PY, out_dir=project / "out")
    warn = [s for s in again.steps if s.status is Status.WARNING]
    assert len(warn) == 1 and "[reference] id is still '1'" in (warn[0].error or "")


def test_record_refuses_a_numeric_comparison_without_tolerance(project: Path) -> None:
    (project / "repro.toml").write_text(MANIFEST.replace("atol = 1e-6   # justified elsewhere\n", ""))
    with pytest.raises(UsageError) as e:
        record(project / "repro.toml", PY, out_dir=project / "out")
    assert "without a tolerance" in e.value.message
    assert e.value.context == [
        "check[0].output[0] (scores/scores.npy vs reference/scores.npy): add `atol` and/or `rtol` "
        "(or `cosine-min`, or `exact = true`)"
    ]
    assert not (project / "out").exists()  # refused before running anything


def test_record_writes_nothing_when_a_criterion_fails(project: Path) -> None:
    (project / "repro.toml").write_text(MANIFEST.replace('equals = ["a", "b", "c"]', 'equals = ["a", "b"]'))
    before = (project / "repro.toml").read_text()
    rec = record(project / "repro.toml", PY, out_dir=project / "out")
    assert not rec.ok and rec.written == []
    assert (project / "repro.toml").read_text() == before
    assert not (project / "reference").exists()


def test_cli_check_exit_codes_and_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = str(project / "repro.toml")
    assert main(["check", manifest, "--python", PY, "--out", str(project / "out"), "--json", "-"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "check"
    failed = [s["name"] for s in report["steps"] if s["status"] == "failed"]
    assert failed == ["scores/scores.npy: reference"]  # no reference recorded yet

    assert main(["check", manifest, "--python", PY, "--record", "--out", str(project / "out")]) == 0
    assert "recorded 2 file(s)" in capsys.readouterr().out
    assert main(["check", manifest, "scores", "--python", PY, "--json", str(project / "r.json")]) == 0
    assert json.loads((project / "r.json").read_text())["steps"][0]["name"] == "scores: run"
    assert main(["check", manifest, "nope"]) == 2
    assert "no check named 'nope'" in capsys.readouterr().err
    assert main(["check", str(project / "missing.toml")]) == 2
