"""Renderers read declared step kinds (`Step.kind`, `kernodeck.layers.causes.StepKind`), never a
step name's pattern; a report written before kinds still renders the same (the kind its names
implied); the resume trajectory declares its metric."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernodeck.layers.causes import StepKind
from kernodeck.render.github import step_label
from kernodeck.render.html import _metric, package_rows, trajectory_svg
from kernodeck.report import Report, Step

ROOT = Path(__file__).resolve().parents[1]
READERS = [*(ROOT / "src/kernodeck/render").glob("*.py"), ROOT / "src/kernodeck/fleet/compare.py"]
#: What reading a step name as a pattern looks like.
_NAME_METHODS = {
    "startswith",
    "endswith",
    "removeprefix",
    "removesuffix",
    "partition",
    "rpartition",
    "split",
    "rsplit",
}
_NAME_PREFIXES = ("pin:", "record:", "data:", "check:", "arch:", "determinism:", "device:", "trajectory ")
_STEP_NAMES = {"compute", "records", "records-missing", "revision", "trajectory"}


def _is_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "name"


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
    }


def _step_literal(node: ast.AST, docs: set[int]) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and (node.value in _STEP_NAMES or node.value.startswith(_NAME_PREFIXES))
    )


def name_patterns(source: str) -> list[str]:
    """Where `source` recognises a step by its name: a string method on `.name`, `.name` compared
    with a string, steps keyed by `.name` alone, a step-name literal or prefix."""
    tree = ast.parse(source)
    docs, out = _docstrings(tree), []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _NAME_METHODS and _is_name(node.func.value):
                out.append(f"{line}: .name.{node.func.attr}()")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_name(s) for s in sides) and any(
                isinstance(s, (ast.Constant, ast.JoinedStr)) for s in sides
            ):
                out.append(f"{line}: .name compared with a string")
        elif isinstance(node, ast.DictComp) and _is_name(node.key):
            out.append(f"{line}: steps keyed by .name")
        elif _step_literal(node, docs):
            out.append(f"{line}: step name literal {ast.literal_eval(node)!r}")
    return out


def test_no_renderer_recognises_a_step_by_its_name() -> None:
    found = [f"{p.name}:{hit}" for p in READERS for hit in name_patterns(p.read_text())]
    assert not found, found
    assert len(READERS) >= 6


@pytest.mark.parametrize(
    "code",
    [
        'if step.name.startswith("pin:"): pass',
        'metric = step.name.removeprefix("trajectory ")',
        'ok = s.name == "compute"',
        "steps = {s.name: s for s in report.steps}",
        'pin = steps.get(f"pin:{key}")',
    ],
)
def test_the_check_sees_each_pattern(code: str) -> None:
    assert name_patterns(code)


def _legacy(report: Report) -> Report:
    """The report as a version before step kinds wrote it: no `kind`, no `package`/`metric`."""
    data = json.loads(report.to_json())
    for step in data["steps"]:
        step.pop("kind")
        for key in ("package", "metric"):
            step["details"].pop(key, None)
    return Report.from_json(json.dumps(data))


def _packages_report() -> Report:
    r = Report(
        inventory={"distributions": [{"name": "Torch_Thing", "version": "2.0+cu1"}, {"name": "numpy"}]}
    )
    r.add(
        Step.failed("packages", "pin:torch-thing", "wrong", details={"cause": "pin-mismatch"}).tagged(
            StepKind.PIN, package="torch-thing"
        )
    )
    r.add(Step.passed("packages", "records", kind=StepKind.RECORDS))
    r.add(Step.passed("data", "data:samples").tagged(StepKind.DATA_FILE))
    series = {"step": [1, 2], "value": [1.0, 2.0], "reference": [1.0, 1.0]}
    r.add(
        Step.failed(
            "resume", "trajectory val_loss", "diverged", details={"series": series, "atol": 0.1}
        ).tagged(StepKind.TRAJECTORY, metric="val_loss")
    )
    return r


def test_a_report_without_kinds_renders_as_one_with_them() -> None:
    new = _packages_report()
    old = _legacy(new)
    assert all(s.kind is None for s in old.steps) and "package" not in old.steps[0].details
    assert [s.what() for s in old.steps] == [s.kind for s in new.steps]
    assert package_rows(old) == package_rows(new)
    torch = package_rows(new)[0]
    assert torch["lock"] == "failed: wrong" and torch["hashes"] == "match RECORD" and torch["local"] == "cu1"
    assert [step_label(s) for s in old.steps] == [step_label(s) for s in new.steps]
    assert (
        step_label(new.steps[2]) == "data:samples" and step_label(new.steps[0]) == "packages/pin:torch-thing"
    )
    assert _metric(old.steps[3]) == _metric(new.steps[3]) == "val_loss"


def test_the_chart_takes_the_metric_from_the_declared_detail() -> None:
    series = {"step": [1, 2], "value": [1.0, 2.0], "reference": [1.0, 1.0]}
    step = Step.failed("resume", "the run's curve", "diverged", details={"series": series, "atol": 0.1})
    step.tagged(StepKind.TRAJECTORY, metric="grad_norm")
    svg = trajectory_svg(step)
    assert svg is not None and "grad_norm" in svg and "curve" not in svg
    unnamed = Step.failed("resume", "trajectory loss", "diverged", details={"series": series, "atol": 0.1})
    assert _metric(unnamed.tagged(StepKind.TRAJECTORY)) == "metric"  # declared kind, no metric: no guess
