"""Hostile report data: chart text the chart library would read as math, and report JSON files
that are not what Kernodeck writes (`kernodeck report`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernodeck.cli import main
from kernodeck.report import Report, Step
from tests.fixtures.render_projects import resume_project

PY = sys.executable

#: A metric name matplotlib's math text cannot parse (a group left open in `$...$`).
MATH_METRIC = "lr $10^{-3$ loss"


def test_check_writes_json_and_html_for_a_metric_named_like_math(tmp_path: Path) -> None:
    manifest = resume_project(tmp_path / "p", metric=MATH_METRIC)
    js, page = tmp_path / "r.json", tmp_path / "r.html"
    code = main(
        [
            "check",
            str(manifest),
            "--python",
            PY,
            "--out",
            str(tmp_path / "out"),
            "--json",
            str(js),
            "--html",
            str(page),
        ]
    )
    assert code == 1  # the trajectory drifts out of its band: a failure, not an internal error
    report = Report.from_json(js.read_text())
    step = next(s for s in report.steps if "series" in s.details)
    assert MATH_METRIC in step.name
    html = page.read_text()
    assert html.count("<svg") >= 1 and "chart-note" not in html  # drawn, as plain text
    assert "10^{-3" in html


def _report_json(mutate: Callable[[dict[str, Any]], None]) -> str:
    r = Report(kind="check")
    series = {"step": [1, 2, 3], "value": [1.0, 2.0, 3.5], "reference": [1.0, 2.0, 3.0]}
    r.add(Step.failed("application", "trajectory loss", "outside", details={"series": series, "atol": 0.1}))
    data = json.loads(r.to_json())
    mutate(data)
    return json.dumps(data)


def _details(data: dict[str, Any]) -> dict[str, Any]:
    details: dict[str, Any] = data["steps"][0]["details"]
    return details


def _run_report(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    path = tmp_path / "hostile.json"
    path.write_text(text)
    code = main(["report", str(path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    return code, captured.err, path.with_suffix(".html")


LEFT_OUT = {
    "strings in series": (
        lambda d: _details(d)["series"].update(value=["1.0", "x", "y"]),
        "series.value[0] is not a number",
    ),
    "series of another length": (
        lambda d: _details(d)["series"].update(reference=[1.0]),
        "series.reference has 1 values for 3 points",
    ),
    "a tolerance that is text": (lambda d: _details(d).update(atol="0.1"), "atol is not a finite number"),
    "rows that are a mapping": (
        lambda d: _details(d).update(series=None, rows={"row": [1, 2], "abs-error": {"a": 1}}),
        "rows.abs-error is not a list",
    ),
    "rows of lists": (
        lambda d: _details(d).update(series=None, rows={"row": [[1], [2]], "cosine": [1, 1]}),
        "rows.row[0] is not a number",
    ),
    "limits of another length": (
        lambda d: _details(d).update(
            series=None, rows={"row": [1, 2], "abs-error": [0.1, 0.2], "limit": [1]}
        ),
        "rows.limit has 1 values for 2 rows",
    ),
}


@pytest.mark.parametrize("case", list(LEFT_OUT), ids=list(LEFT_OUT))
def test_chart_data_that_cannot_be_drawn_is_left_out_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    mutate, why = LEFT_OUT[case]
    code, err, page = _run_report(tmp_path, _report_json(mutate), capsys)
    assert code == 0, err
    html = page.read_text()
    assert f"the chart of application/trajectory loss was left out: {why}." in html
    assert "<svg" not in html and "outside" in html  # the rest of the page is there


def test_non_finite_numbers_are_gaps_in_the_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def mutate(d: dict[str, Any]) -> None:
        _details(d)["series"].update(
            value=[float("nan"), float("inf"), 1.0], reference=[float("-inf"), 2.0, 3.0]
        )

    code, err, page = _run_report(tmp_path, _report_json(mutate), capsys)  # JSON's NaN and Infinity
    assert code == 0, err
    html = page.read_text()
    assert "<svg" in html and "chart-note" not in html


DEEP = 100_000

NOT_A_REPORT = {
    "deeply nested details": (
        '{"kind": "check", "steps": [{"layer": "application", "name": "a", "status": "failed", "details": {"d": '
        + "[" * DEEP
        + "]" * DEEP
        + "}}]}",
        "nested too deeply to read",
    ),
    "steps that are text": (
        _report_json(lambda d: d.update(steps="many")),
        "steps: Input should be a valid list",
    ),
    "a step that is a list": (
        _report_json(lambda d: d["steps"].append(["x"])),
        "steps.1: Input should be a valid dictionary",
    ),
    "a status that is not one": (
        _report_json(lambda d: d["steps"][0].update(status="secret-token-value")),
        "steps.0.status: Input should be",
    ),
    "not JSON": ("{'kind': 'check'}", "Expecting property name enclosed in double quotes"),
    "not text": ("\udcff", "codec can't decode"),
}


@pytest.mark.parametrize("case", list(NOT_A_REPORT), ids=list(NOT_A_REPORT))
def test_a_file_that_is_not_a_report_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    text, why = NOT_A_REPORT[case]
    path = tmp_path / "hostile.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    code = main(["report", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{path} is not a kernodeck report: " in err and why in err
    assert "secret-token-value" not in err  # the file's values are not quoted
    assert not path.with_suffix(".html").exists()
