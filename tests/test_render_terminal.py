"""The terminal report: compact, wrapped at the width without cutting words or hashes, summary last."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.diff import diff_reports
from kernodeck.render.terminal import diff_lines, render_report, report_lines, short_hashes, summary_lines
from kernodeck.report import Report, Status, Step
from tests.fixtures.render_projects import ANSI, SHA_A, SHA_B, WHEEL, long_report
from tests.fixtures.verify_project import WRONG_PINS, five_wrong_pins


def render_text(report: Report, **kw: Any) -> str:
    buf = io.StringIO()
    render_report(report, buf, width=80, **kw)
    return buf.getvalue()


def test_80_columns_no_line_too_long_no_hash_cut_summary_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = render_text(long_report())
    lines = text.rstrip("\n").splitlines()
    assert max(len(ln) for ln in lines) <= 80, "\n".join(ln for ln in lines if len(ln) > 80)
    # every hex run is a whole 12-digit prefix of a real hash: never cut elsewhere, never split
    runs = re.findall(r"[0-9a-f]{12,}", text)
    assert runs and set(runs) <= {SHA_A[:12], SHA_B[:12]}
    assert SHA_A not in text and SHA_B not in text
    # words are not cut: every word of the hint and the error appears whole
    flat = " ".join(text.split())
    assert "(later changes to site-packages are what this check exists to catch)" in flat
    assert f"{WHEEL}: sha256: expected {SHA_A[:12]}, observed {SHA_B[:12]};" in flat
    # the failure expands into expected / observed / error / hint, each on its own line
    failure = lines.index("  ✗ numpy 1.26.4: installed files")
    labels = [ln.split(":")[0].strip() for ln in lines[failure + 1 : failure + 12] if re.match(r" {6}\w", ln)]
    assert labels[:4] == ["expected", "observed", "error", "hint"]
    # layer headings carry the counts; passed steps are one short line
    assert "packages: 1 failed, 1 warning, 1 passed" in lines
    assert "device: 1 failed, 1 skipped" in lines
    assert f"  ✓ torch: sha256  {SHA_A[:12]}" in lines
    # the summary is last, with the first failure and the start of its error, cut between words
    assert lines[-2] == "FAILED: 2 failed, 1 warning, 2 passed, 1 skipped"
    assert lines[-1].startswith("first failure: packages/numpy 1.26.4: installed files: ")
    assert lines[-1].endswith(" …") and lines[-1][:-2] in flat
    assert "\x1b[" not in text


def test_verbose_shows_every_detail_and_full_hashes() -> None:
    text = render_text(long_report(), verbose=True)
    assert SHA_A in text and SHA_B in text
    assert "record:" in text and "812" in text
    assert "expected: 3.11" in text  # passed steps expand too
    assert max(len(ln) for ln in text.splitlines()) <= 80


def test_verbose_names_chart_data_instead_of_printing_it() -> None:
    r = Report(kind="check")
    series = {"step": list(range(400)), "value": [0.5] * 400, "reference": [0.5] * 400}
    r.add(
        Step.passed(
            "resume", "trajectory loss", observed="400 steps", details={"series": series, "atol": 0.1}
        )
    )
    text = render_text(r, verbose=True)
    assert "series:   chart data (in the JSON report; drawn by --html)" in text and "atol:     0.1" in text
    assert len(text.splitlines()) < 12


def test_quiet_folds_passed_steps_into_the_heading() -> None:
    text = render_text(long_report(), quiet=True)
    assert "interpreter: 1 passed" in text and "version" not in text
    assert "torch: sha256" not in text
    assert "✗ numpy 1.26.4: installed files" in text and "hint:" in text


def test_no_color_gives_no_escape_codes_and_always_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = Tty()
    render_report(long_report(), tty, width=80)
    assert "\x1b[" in tty.getvalue()  # a terminal: colours
    monkeypatch.setenv("NO_COLOR", "1")
    tty = Tty()
    render_report(long_report(), tty, width=80)
    assert "\x1b[" not in tty.getvalue()
    never = Tty()
    monkeypatch.delenv("NO_COLOR")
    render_report(long_report(), never, width=80, color="never")
    assert "\x1b[" not in never.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    forced = io.StringIO()
    render_report(long_report(), forced, width=80, color="always")  # the command line wins over NO_COLOR
    coloured = forced.getvalue()
    assert "\x1b[" in coloured
    # colours never change the text or the wrapping
    assert ANSI.sub("", coloured) == render_text(long_report(), color="never")


def test_lines_stay_within_other_widths() -> None:
    for width in (80, 100, 132):
        for ln in report_lines(long_report(), width=width):
            assert len(ln.text) <= width, (width, ln.text)


def test_short_hashes_leave_numbers_and_short_hex_alone() -> None:
    assert short_hashes(f"x {SHA_A}, y") == f"x {SHA_A[:12]}, y"
    assert short_hashes(f"sha256:{SHA_B}") == f"sha256:{SHA_B[:12]}"
    assert short_hashes("1" * 40) == "1" * 40
    assert short_hashes("deadbeef") == "deadbeef"


def test_ascii_stream_gets_ascii_symbols() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    render_report(long_report(), stream, width=80, color="never")
    text = raw.getvalue().decode("ascii")
    assert "  x accelerator" in text and "  + version  3.11.7" in text
    assert "1 ? NVIDIA H100" in text  # what the stream cannot encode is replaced, not fatal


def test_diff_renderer_groups_by_layer_summary_last() -> None:
    a = long_report()
    b = long_report()
    b.steps[1] = Step.passed("packages", "torch: sha256", expected=SHA_A, observed=SHA_B)
    lines = [ln.text for ln in diff_lines(diff_reports(a, b, a_name="a.json", b_name="b.json"), width=80)]
    assert "packages: 1 difference (software)" in lines
    assert f"      B:        {SHA_B[:12]}" in lines
    assert lines[-1].startswith("differs in software")
    assert max(len(ln) for ln in lines) <= 80


def test_cli_options_reach_the_renderer(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    long_report().write_json(a)
    other = long_report()
    other.steps[0] = Step.passed("interpreter", "version", expected="3.11", observed="3.11.9")
    other.write_json(b)
    res = CliRunner().invoke(cli, ["diff", str(a), str(b), "--color", "always"])
    assert res.exit_code == 1 and "\x1b[" in res.output
    assert "interpreter: 1 difference (software)" in ANSI.sub("", res.output)
    res = CliRunner().invoke(cli, ["diff", str(a), str(b), "--color", "never", "-q"])
    assert "\x1b[" not in res.output and "3.11.9" not in res.output
    assert json.loads(CliRunner().invoke(cli, ["diff", str(a), str(b), "--json"]).stdout)["layers"] == [
        "interpreter"
    ]


def test_the_platform_and_its_reason_follow_the_interpreter_line() -> None:
    from kernodeck.report import CheckedInterpreter

    report = Report(
        manifest="repro.toml",
        platform="linux-x86_64-cpu",
        platform_reason="the only platform in the manifest",
        interpreter=CheckedInterpreter(path="/venv/bin/python", source="venv", reason="VIRTUAL_ENV is set"),
        steps=[Step.passed("interpreter", "version", expected="3.11", observed="3.11.9")],
    )
    lines = render_text(report, color=False).splitlines()
    assert lines[:3] == [
        "python: /venv/bin/python (VIRTUAL_ENV is set)",
        "platform: linux-x86_64-cpu (the only platform in the manifest)",
        "kernodeck verify repro.toml on platform linux-x86_64-cpu",
    ]
    # without a reason (a report written before it, or no platform chosen) there is no such line
    plain = render_text(report.model_copy(update={"platform_reason": None}), color=False)
    assert "platform: " not in plain and "on platform linux-x86_64-cpu" in plain


def test_a_hint_five_failed_pins_share_is_printed_once_under_their_names(tmp_path: Path) -> None:
    report = five_wrong_pins(tmp_path)
    hint = next(s.hint for s in report.steps if s.name == "pin:filelock")
    assert hint and all(s.hint == hint for s in report.steps if s.status is Status.FAILED)
    text = "\n".join(ln.text for ln in report_lines(report, width=200))
    assert text.count("--require-hashes") == 1
    grouped = "the same hint for " + ", ".join(f"pin:{n}" for n in WRONG_PINS) + ":"
    assert grouped in text and text.index(grouped) > text.index("pin:sympy\n")
    # a hint only one step gives stays under that step
    single = Report(steps=[Step.failed("device", "accelerator", "no GPU", hint="unset CUDA_VISIBLE_DEVICES")])
    lines = [ln.text for ln in report_lines(single)]
    assert any(ln.strip() == "hint:     unset CUDA_VISIBLE_DEVICES" for ln in lines)
    assert not any("the same hint" in ln for ln in lines)


def test_summary_names_the_first_error_and_the_duration_pytest_style(tmp_path: Path) -> None:
    report = five_wrong_pins(tmp_path)
    report.seconds = 3.414
    error = "filelock 3.16.1 is installed where the lock pins 0.0.1"
    assert report.summary() == (
        f"FAILED: 5 failed, 3 passed in 3.41s; first failure: packages/pin:filelock: {error}"
    )
    assert summary_lines(report, 200) == [
        f"FAILED: 5 failed, 3 passed in 3.41s; first failure: packages/pin:filelock: {error}"
    ]
    # too long for 80 columns: the error keeps its place, on a line of its own
    assert summary_lines(report, 100) == [
        "FAILED: 5 failed, 3 passed in 3.41s",
        f"first failure: packages/pin:filelock: {error}",
    ]
    report.seconds = None  # a report from before durations were measured
    assert summary_lines(report, 200)[0].startswith("FAILED: 5 failed, 3 passed; first failure")
