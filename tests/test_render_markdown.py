"""`--markdown FILE`, and under GitHub Actions the `::error` annotations and the step summary."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.render.github import github_annotations, github_outputs
from kernodeck.render.markdown import markdown_summary
from kernodeck.report import Report, Step
from tests.fixtures.render_projects import SHA_A, check_project, long_report
from tests.fixtures.verify_project import WRONG_PINS, five_wrong_pins

PY = sys.executable


def test_markdown_summary_of_a_failing_report() -> None:
    md = markdown_summary(long_report())
    lines = md.splitlines()
    assert lines[0] == "## ❌ kernodeck verify: FAILED"
    assert "**2 failed, 1 warning, 2 passed, 1 skipped**" in lines
    assert "| packages | ❌ failed | 1 | 1 | 1 | 0 |" in lines
    assert "| interpreter | ✅ passed | 1 | 0 | 0 | 0 |" in lines
    assert "| device | ❌ failed | 0 | 1 | 0 | 1 |" in lines
    first = next(ln for ln in lines if ln.startswith("**First failure:**"))
    assert "`packages/numpy 1.26.4: installed files`" in first and SHA_A[:12] in first and SHA_A not in md
    failed = lines[lines.index("### Failed steps") :]
    rows = [ln for ln in failed if ln.startswith("| packages |") or ln.startswith("| device |")]
    assert len(rows) == 2 and "hides every GPU" in rows[1] and "unset CUDA_VISIBLE_DEVICES" in rows[1]
    for row in rows:  # one table row a step: no raw newline or pipe breaks it
        assert row.count(" | ") == 3


def test_annotations_escape_what_github_would_misread() -> None:
    r = Report(kind="check")
    r.add(
        Step.failed("application", "a: b, c", "100% off\nsecond line", hint="do x"),
        Step.failed("application", "optional", "meh", required=False),
        Step.passed("application", "fine"),
    )
    assert github_annotations(r) == [
        "::error title=kernodeck check%3A application/a%3A b%2C c::100%25 off%0Asecond line%0Ahint: do x",
        "::warning title=kernodeck check%3A application/optional::meh",
    ]


def test_github_outputs_only_under_github_actions(tmp_path: Path) -> None:
    import io

    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    out = io.StringIO()
    github_outputs(long_report(), out, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert out.getvalue() == "" and summary.read_text() == "earlier step\n"
    github_outputs(long_report(), out, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert out.getvalue().splitlines()[0].startswith("::error title=kernodeck verify%3A packages/numpy")
    text = summary.read_text()
    assert text.startswith("earlier step\n\n## ❌ kernodeck verify: FAILED")  # appended, not replaced


def test_check_cli_under_github_actions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = check_project(tmp_path / "p")
    summary, md = tmp_path / "step-summary.md", tmp_path / "report.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code = main(
        [
            *("check", str(manifest), "--python", PY),
            *("--out", str(tmp_path / "out"), "--markdown", str(md)),
        ]
    )
    assert code == 1
    out = capsys.readouterr().out.splitlines()
    errors = [ln for ln in out if ln.startswith("::error ")]
    assert len(errors) == 2 and "scores/scores.npy%3A vs reference::scores.npy: vs reference" in errors[0]
    # the human report sits between ::stop-commands::TOKEN and ::TOKEN::, its summary last
    stop = next(ln for ln in out if ln.startswith("::stop-commands::"))
    assert out[-1] == f"::{stop.removeprefix('::stop-commands::')}::"
    assert out[-2].startswith("first failure: application/scores/scores.npy: vs reference")
    assert re.fullmatch(r"FAILED: 2 failed, 4 passed in \d+\.\d\ds", out[-3]), out[-3]  # the run's duration
    assert summary.read_text() == md.read_text()
    assert "| application | ❌ failed | 4 | 2 | 0 | 0 |" in md.read_text()


def test_markdown_names_the_platform_and_why() -> None:
    report = Report(platform="linux-x86_64-cpu", platform_reason="named with --platform")
    assert "platform: `linux-x86_64-cpu` (named with --platform)" in markdown_summary(report)
    assert "(named" not in markdown_summary(report.model_copy(update={"platform_reason": None}))


def test_a_shared_hint_is_written_once_in_markdown_and_annotations(tmp_path: Path) -> None:
    report = five_wrong_pins(tmp_path)
    report.seconds = 1.5
    md = markdown_summary(report)
    assert "**5 failed, 3 passed** in 1.50s" in md.splitlines()
    hint = "--require-hashes -r requirements-rebuild-linux-x86_64-cpu.txt"
    table = md[md.index("### Failed steps") : md.index("### Hints")]
    assert table.count("hint 1 below") == 5 and hint not in table
    hints = md[md.index("### Hints") :].splitlines()
    (item,) = [ln for ln in hints if ln.startswith("1. ")]
    assert hint in item and all(f"`packages/pin:{n}`" in item for n in WRONG_PINS)
    notes = github_annotations(report)
    assert len(notes) == 5 and sum(hint in n for n in notes) == 1
    assert all(n.endswith("%0Ahint: as for packages/pin:filelock") for n in notes[1:])
