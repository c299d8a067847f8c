"""`--junit FILE`: JUnit XML that validates against the schema the CI tools accept, counts equal
to the report's."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import xmlschema

from kernodeck.cli import main
from kernodeck.render.junit import junit_xml, write_junit
from kernodeck.report import Report, Status, Step
from tests.fixtures.fresh_lock import stamp_lock
from tests.fixtures.render_projects import ANSI, SHA_A, SHA_B, check_project, long_report, resume_project

SCHEMA = xmlschema.XMLSchema(Path(__file__).parent / "schemas" / "junit.xsd")
PY = sys.executable


def assert_matches(report: Report, path: Path) -> ET.Element:
    SCHEMA.validate(str(path))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    c = report.counts()
    assert int(root.get("tests", "-1")) == len(report.steps)
    assert int(root.get("failures", "-1")) == c["failed"]
    assert int(root.get("skipped", "-1")) == c["skipped"]
    suites = root.findall("testsuite")
    layers = list(dict.fromkeys(str(s.layer) for s in report.steps))
    assert [s.get("name") for s in suites] == layers
    for suite in suites:
        steps = [s for s in report.steps if str(s.layer) == suite.get("name")]
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [s.name for s in steps]
        assert int(suite.get("tests", "-1")) == len(steps)
        assert int(suite.get("failures", "-1")) == sum(s.status is Status.FAILED for s in steps)
        assert int(suite.get("skipped", "-1")) == sum(s.status is Status.SKIPPED for s in steps)
        for case, step in zip(cases, steps, strict=True):
            failure, skipped = case.find("failure"), case.find("skipped")
            assert (failure is not None) == (step.status is Status.FAILED)
            assert (skipped is not None) == (step.status is Status.SKIPPED)
            if failure is not None:
                assert failure.get("message") == ANSI.sub("", step.error or "")
    assert sum(len(s.findall("testcase/skipped")) for s in suites) == c["skipped"]
    return root


def test_junit_of_a_failing_report_validates_with_the_report_counts(tmp_path: Path) -> None:
    report = long_report()
    report.add(Step.failed("device", "control chars", "pip said \x1b[31mno\x1b[0m", seconds=1.25))
    write_junit(report, tmp_path / "out" / "junit.xml")
    root = assert_matches(report, tmp_path / "out" / "junit.xml")
    text = (tmp_path / "out" / "junit.xml").read_text()
    # the details keep whole hashes, the hint and the step's details
    failure = root.find("testsuite[@name='packages']/testcase/failure")
    assert failure is not None and failure.text is not None
    assert f"expected: {SHA_A}" in failure.text and f"observed: {SHA_B}" in failure.text
    assert "hint: reinstall from the lock" in failure.text and "files: 812" in failure.text
    warning = root.find("testsuite[@name='packages']/testcase[@name='unlocked']/system-out")
    assert warning is not None and (warning.text or "").startswith("warning: ")
    assert "\x1b" not in text and 'message="pip said no"' in text
    assert junit_xml(report) == text  # repeatable: no timestamps


def test_junit_of_an_ok_report(tmp_path: Path) -> None:
    report = Report(kind="doctor")
    report.add(Step.passed("interpreter", "python", observed="cpython 3.11.7"))
    (tmp_path / "j.xml").write_text(junit_xml(report))
    root = assert_matches(report, tmp_path / "j.xml")
    assert root.get("failures") == "0"


def test_check_and_resume_write_junit_from_the_cli(tmp_path: Path) -> None:
    for name, make in (("check", check_project), ("resume", resume_project)):
        manifest = make(tmp_path / name)
        junit, js = tmp_path / f"{name}.xml", tmp_path / f"{name}.json"
        code = main(
            [
                *("check", str(manifest), "--python", PY),
                *("--out", str(tmp_path / f"out-{name}"), "--json", str(js), "--junit", str(junit)),
            ]
        )
        assert code == 1
        report = Report.from_json(js.read_text())
        assert not report.ok
        assert_matches(report, junit)


def test_rebuild_writes_junit_and_markdown_for_a_refused_interpreter(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kernodeck.cli import cli

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "tiny"\nid = "1"\n[python]\nversion = "3.9"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    (proj / "requirements-rebuild-linux-x86_64.txt").write_text("--only-binary :all:\n")
    stamp_lock(proj / "repro.toml", "linux-x86_64")
    junit, md, js = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "r.json"
    res = CliRunner().invoke(
        cli,
        [
            *("rebuild", str(proj), "--dest", str(tmp_path / "v"), "--python", PY, "--no-compute"),
            *("--json", str(js), "--junit", str(junit), "--markdown", str(md)),
        ],
    )
    assert res.exit_code == 2, res.output
    report = Report.from_json(js.read_text())
    root = assert_matches(report, junit)
    assert root.find("testsuite[@name='rebuild']/testcase[@name='interpreter']/failure") is not None
    assert "does not satisfy" in md.read_text() and "| rebuild | ❌ failed |" in md.read_text()


def test_a_long_series_is_summarised_and_read_back_by_a_junit_reader(tmp_path: Path) -> None:
    steps_ = list(range(0, 3000, 10))
    loss = [round(2.0 / (1 + i / 100), 6) for i in steps_]
    report = Report(
        kind="check",
        seconds=3.41,
        steps=[
            Step.passed("application", "scores", seconds=0.25),
            Step.failed(
                "resume",
                "resume",
                "loss leaves the reference's tolerance at step 1200",
                seconds=1.5,
                details={
                    "series": {"step": steps_, "value": loss, "reference": [v * 0.99 for v in loss]},
                    "atol": 0.01,
                    "first-outside": 1200,
                },
            ),
            Step.skipped("application", "tokens", "an earlier layer failed", seconds=0.0),
        ],
    )
    path = tmp_path / "junit.xml"
    write_junit(report, path)
    assert_matches(report, path)
    doc: Any = SCHEMA.to_dict(str(path))  # read back through the schema, as a JUnit consumer does
    assert (doc["@tests"], doc["@failures"], doc["@skipped"]) == ("3", "1", "1")
    cases = {c["@name"]: c for suite in doc["testsuite"] for c in suite["testcase"]}
    assert {n: float(c["@time"]) for n, c in cases.items()} == {"scores": 0.25, "resume": 1.5, "tokens": 0.0}
    (failure,) = cases["resume"]["failure"]
    text = failure["$"]
    assert len(text) < 1000, len(text)  # the 300-point trajectory is described, not dumped
    assert "step: 300 values, first 0, last 2990, min 0, max 2990" in text
    assert "first-outside: 1200" in text and "atol: 0.01" in text
    assert str(loss[150]) not in text
