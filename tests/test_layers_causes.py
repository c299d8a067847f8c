"""Steps and causes are declared: every `details["cause"]` literal in the verify layers and the
checks is a `StepCause`, and the report's JSON Schema (schema/report.schema.json) is generated
from the declared models and committed current."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from kernodeck.layers.causes import StepCause
from kernodeck.manifest.jsonschema import report_schema_dict, report_schema_text
from kernodeck.report import Report, Step
from tests.fixtures.verify_project import GPU_SYSTEM, load, project, run

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*(ROOT / "src/kernodeck/layers").glob("*.py"), *(ROOT / "src/kernodeck/checks").glob("*.py")]


def _cause_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants given as a "cause" key's value, or assigned to a name `cause`."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "cause" and isinstance(v, ast.Constant):
                    out.append((node.lineno, str(v.value)))
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and any(isinstance(t, ast.Name) and t.id == "cause" for t in node.targets)
        ):
            out.append((node.lineno, str(node.value.value)))
    return out


def test_every_cause_literal_is_declared() -> None:
    declared = {c.value for c in StepCause}
    found = {
        f"{path.name}:{line}: {value}"
        for path in SOURCES
        for line, value in _cause_literals(ast.parse(path.read_text()))
        if value not in declared
    }
    assert not found, sorted(found)
    assert len(SOURCES) > 10 and "dirty" in declared


def test_scenario_reports_name_only_declared_causes(tmp_path: Path) -> None:
    declared = {c.value for c in StepCause}
    for fixture, platform in (("cpu_linux", "linux-x86_64-cpu"), ("cu126_no_driver", "linux-x86_64-cu126")):
        facts = load(fixture)
        folder = tmp_path / fixture
        folder.mkdir()
        project(folder, facts, platform, system=GPU_SYSTEM if "cu" in platform else "")
        report = run(folder, facts, platform=platform)
        causes = {s.details["cause"] for s in report.steps if "cause" in s.details}
        assert causes <= declared, causes - declared
    assert "no-driver" in causes


def test_the_committed_report_schema_is_current() -> None:
    assert (ROOT / "schema/report.schema.json").read_text() == report_schema_text(), (
        "regenerate with `make schema`"
    )


def test_the_report_schema_describes_every_field() -> None:
    schema = report_schema_dict()
    step = schema["$defs"]["Step"]["properties"]
    assert set(step) == set(Step.__annotations__) - {"model_config"}
    assert set(schema["properties"]) == {
        "schema" if n == "schema_" else n for n in Report.__annotations__ if n != "model_config"
    }
    assert all(p.get("description") for p in step.values())
    assert "measurements" in step and step["measurements"]["additionalProperties"] == {"type": "number"}
    assert schema["$defs"]["StepCause"]["enum"] == [c.value for c in StepCause]
    assert schema["$defs"]["Layer"]["enum"][0] == "code"
    report = Report()
    report.add(Step.passed("device", "compute", measurements={"ms": 1.5}))
    data = json.loads(report.to_json())
    assert set(data["steps"][0]) <= set(step) and data["schema"] == schema["properties"]["schema"]["const"]
