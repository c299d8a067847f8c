"""The probe's facts and the verify report are declared models (kernodeck.manifest.model), as the
manifest is: checked without pydantic, with the values pydantic gives, and pydantic's word for
anything the checker cannot vouch for. Each case is compared with the pydantic twin built from
the same declarations, so that leaving pydantic changed no value and no JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernodeck.layers import Layer
from kernodeck.manifest.model import _check_model, pydantic_model
from kernodeck.probe.facts import Facts, TorchCompute, TorchFacts
from kernodeck.probe.runner import ProbeFailed, ProbeRequest, RealProbe
from kernodeck.report import Report, Status, Step

PROBES = Path(__file__).parent / "fixtures" / "probes"


@pytest.mark.parametrize("fixture", sorted(p.name for p in PROBES.glob("*.json")))
def test_recorded_facts_are_checked_without_pydantic_and_equal_pydantics(fixture: str) -> None:
    data = json.loads((PROBES / fixture).read_text("utf-8"))
    plain = _check_model(Facts, data, False)  # raises _Fallback where the checker cannot vouch
    twin = pydantic_model(Facts).model_validate(data)
    assert plain.model_dump(mode="json") == twin.model_dump(mode="json")
    assert plain.model_dump() == twin.model_dump()
    assert Facts.model_validate_json((PROBES / fixture).read_text("utf-8")) == plain


def test_defaults_are_fresh_per_instance() -> None:
    a, b = TorchFacts(), TorchFacts()
    a.compute.status = "ok"
    a.warnings.append("w")
    assert b.compute == TorchCompute() and b.warnings == []


def test_facts_pydantic_refuses_are_still_refused() -> None:
    data = json.loads((PROBES / "cpu_linux.json").read_text("utf-8"))
    with pytest.raises(ValidationError, match="unexpected"):
        Facts.model_validate({**data, "unexpected": 1})  # extra="forbid", as before
    with pytest.raises(ValidationError):
        Facts.model_validate_json("{not json")


@pytest.mark.parametrize(
    ("printed", "said"),
    [("{not json", "Invalid JSON"), ('{"probe_version": 1, "surprise": true}', "Field required")],
)
def test_a_probe_that_prints_unreadable_facts_fails_with_pydantics_words(
    tmp_path: Path, printed: str, said: str
) -> None:
    """An interpreter whose probe prints no facts: ProbeFailed, worded by pydantic (imported only
    now), not a traceback."""
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{printed}'\n", encoding="utf-8")
    fake.chmod(0o755)
    with pytest.raises(ProbeFailed, match=f"(?s)printed unreadable facts: .*{said}"):
        RealProbe(str(fake)).collect(ProbeRequest())


def _report() -> Report:
    r = Report(kind="verify", manifest="repro.toml", platform="linux-x86_64", notices=["n"])
    r.add(
        Step.passed("interpreter", "version", expected="3.11", observed="3.11.7", seconds=1),
        Step.failed(
            Layer.PACKAGES,
            "hashes",
            "2 files differ",
            observed={"paths": (Path("a/b.py"), "c"), "layers": {Status.FAILED}, "inf": float("inf")},
            details={"when": 3, "kind": Layer.DATA},
        ),
        Step.skipped("device", "compute", "no usable cuda device", required=False),
    )
    return r


def test_a_report_writes_the_json_pydantic_wrote_and_reads_it_back() -> None:
    report = _report()
    twin = pydantic_model(Report).model_validate(report.model_dump(by_alias=True))
    assert report.to_json() == json.dumps(twin.model_dump(mode="json", by_alias=True), indent=2) + "\n"
    data = json.loads(report.to_json())
    assert data["schema"] == "kernodeck-report/1" and data["steps"][0]["seconds"] == 1.0
    assert data["steps"][1]["observed"] == {"paths": ["a/b.py", "c"], "layers": ["failed"], "inf": None}
    back = Report.from_json(report.to_json())
    assert back.steps[1].layer is Layer.PACKAGES and back.steps[1].status is Status.FAILED
    assert back.to_json() == report.to_json()
    assert back.model_dump(exclude={"steps", "notices"}) == report.model_dump(exclude={"steps", "notices"})


def test_a_step_with_an_unknown_status_is_refused_in_pydantics_words() -> None:
    with pytest.raises(ValidationError, match="status"):
        Step(layer="packages", name="x", status="nope")  # type: ignore[arg-type]
    assert Step(layer="packages", name="x", status="passed").status is Status.PASSED  # type: ignore[arg-type]


def test_verify_and_require_run_without_importing_pydantic(tmp_path: Path) -> None:
    """A verify of the interpreter and packages layers probes this environment (the facts) and
    writes a JSON report, in a fresh interpreter that never imports pydantic."""
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (tmp_path / "repro.toml").write_text(
        f'schema-version = 1\n[reference]\nname = "s"\nid = "1"\n[python]\nversion = "{py}"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n',
        encoding="utf-8",
    )
    report = tmp_path / "report.json"
    code = (
        "import sys\nfrom kernodeck.cli import main\n"
        f"main(['verify', '--only', 'interpreter', '--json', {str(report)!r}, {str(tmp_path / 'repro.toml')!r}])\n"
        "import kernodeck\n"
        f"kernodeck.require({str(tmp_path / 'repro.toml')!r}, only=['interpreter'])\n"
        "print('PYDANTIC=' + str(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core'))))\n"
        "print('FACTS=' + str('kernodeck.probe.facts' in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "PYDANTIC=[]" in proc.stdout and "FACTS=True" in proc.stdout, proc.stdout
    steps = json.loads(report.read_text("utf-8"))["steps"]
    assert any(s["layer"] == "interpreter" and s["status"] == "passed" for s in steps), steps
