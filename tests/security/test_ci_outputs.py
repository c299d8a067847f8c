"""Hostile text from a checked program in the CI outputs of a report: GitHub Actions workflow
commands, control characters, Markdown markup, and concurrent writers of the step summary.

The GitHub runner's parsing of the log is `tests.fixtures.runner_commands`.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from kernodeck.render import OutputOptions, emit
from kernodeck.render.github import commands_stopped, github_annotations, github_outputs
from kernodeck.render.html import html_report
from kernodeck.render.junit import junit_xml
from kernodeck.render.markdown import markdown_summary
from kernodeck.render.terminal import render_report
from kernodeck.report import Report, Step
from tests.fixtures.runner_commands import runner_commands

SRC = Path(__file__).resolve().parents[2] / "src"

#: What a checked program's stderr can hold to take over the log.
FORGED = "".join(
    (
        "Traceback: boom\n",
        "        ::add-mask::the-next-line\n",
        "::error file=app.py,line=1::forged annotation\n",
        "nothing to see ##[warning]forged mid-line\n",
        "cr\r::set-output name=ok::true\n",
        "  ::ENDGROUP::\n",
        "x " * 21,  # the next word starts a wrapped line at a width of 60
        "::add-mask::wrapped-onto-its-own-line ##[group]wrapped",
    )
)
CONTROL = (
    "esc\x1b[2J\x1b]0;title\x07 nul\x00 bel\x07 del\x7f csi\x9b1m bidi\u202eevil\u2028next \x1b[31mred\x1b[0m"
)


def hostile_report() -> Report:
    r = Report(kind="check", manifest="/work/::error::in-a-path/repro.toml", reference_id="##[endgroup]1")
    r.add(
        Step.failed("application", "::warning::from-a-manifest", FORGED, hint="##[add-mask]hint"),
        Step.failed("application", "control", CONTROL, expected=CONTROL, observed=CONTROL),
        Step.failed("application", "optional ##[error]x", "::notice::n", required=False),
        Step.passed("application", "fine", observed="::add-mask::passed-value"),
    )
    return r


def _emit_under_github(report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: object) -> str:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.setenv("COLUMNS", "60")  # narrow: long values wrap
    out = io.StringIO()
    emit(report, OutputOptions(color="never", **kw), out)  # type: ignore[arg-type]
    return out.getvalue()


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_no_forged_workflow_command_survives_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verbose: bool
) -> None:
    log = _emit_under_github(hostile_report(), tmp_path, monkeypatch, verbose=verbose)
    commands, stopped = runner_commands(log)
    assert [c.name for c in commands] == ["error", "error", "warning", "stop-commands"]
    assert not stopped  # commands are back on after the report
    first = commands[0]
    assert first.props == {"title": "kernodeck check: application/::warning::from-a-manifest"}
    assert first.data.startswith("Traceback: boom\n        ::add-mask::the-next-line\n")
    assert first.data.endswith("hint: ##[add-mask]hint")
    # the report itself holds the forged text; without the stop the runner would act on it
    inner = log.split("\n", len(commands))[-1]
    forged, _ = runner_commands(inner)
    assert {"add-mask", "error", "warning", "endgroup"} <= {c.name.lower() for c in forged}
    wrapped = [ln for ln in log.splitlines() if ln.lstrip().startswith("::add-mask::wrapped")]
    assert (
        wrapped or not verbose
    )  # wrapping put it at a line start (-v shows every line): only the stop keeps it inert


def test_stop_token_is_new_for_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    tokens = set()
    for _ in range(3):
        out = io.StringIO()
        with commands_stopped(out):
            out.write("text\n")
        first, _, last = out.getvalue().splitlines()
        token = first.removeprefix("::stop-commands::")
        assert last == f"::{token}::" and re.fullmatch(r"kernodeck-[0-9a-f]{32}", token)
        tokens.add(token)
    assert len(tokens) == 3
    monkeypatch.delenv("GITHUB_ACTIONS")
    out = io.StringIO()
    with commands_stopped(out):
        out.write("text\n")
    assert out.getvalue() == "text\n"  # elsewhere nothing is added


def test_annotation_properties_and_data_are_escaped_as_the_toolkit_does() -> None:
    r = Report(kind="verify")
    r.add(Step.failed("data", "a:b,c%d\r\ne", "100%\r\n::x::y", hint="h,i:j"))
    (line,) = github_annotations(r)
    assert line == (
        "::error title=kernodeck verify%3A data/a%3Ab%2Cc%25d\\x0d%0Ae::100%25\\x0d%0A::x::y%0Ahint: h,i:j"
    )
    (cmd,), _ = runner_commands(line)
    assert cmd.props["title"] == "kernodeck verify: data/a:b,c%d\\x0d\ne"
    assert cmd.data == "100%\\x0d\n::x::y\nhint: h,i:j"


# --- control characters ------------------------------------------------------------------------

#: Controls that must never reach an output raw (a newline and a tab may).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2028\u2029\u2066-\u2069]")


def _control_report() -> Report:
    r = Report(kind="check", manifest="repro\x1b[2J.toml")
    r.add(Step.failed("application", "ctl\x07name", CONTROL, hint="\x1b]8;;https://x\x07link"))
    return r


def test_control_characters_are_visible_in_every_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _control_report()
    log = _emit_under_github(report, tmp_path, monkeypatch, verbose=True)
    outputs = {
        "terminal and annotations": log,
        "markdown": markdown_summary(report),
        "step summary": (tmp_path / "summary.md").read_text(),
        "junit": junit_xml(report),
        "html": html_report(report, charts_optional=True),
    }
    for name, text in outputs.items():
        assert not RAW_CONTROL.search(text.replace("\r\n", "\n")), name
        assert "\\x1b[2J" in text and "\\x00" in text and "\\x07" in text, name  # visible, not dropped
        assert "\\u202e" in text and "\\x9b" in text, name
        assert "red" in text and "\\x1b[31m" not in text, name  # a colour code only styles: dropped


def test_terminal_colours_are_kernodecks_own(tmp_path: Path) -> None:
    out = io.StringIO()
    render_report(_control_report(), out, color="always", verbose=True)
    ours = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # the renderer's own colours only
    assert "\x1b" not in ours and "\\x1b[2J" in ours


# --- Markdown markup ---------------------------------------------------------------------------

MARKUP = (
    '<img src="https://images.invalid/track.png"> <script>alert(1)</script> '
    "[click](javascript:alert(1)) ![pixel](https://images.invalid/p.png) <https://x.invalid> "
    "&lt;b&gt; [ref]: javascript:alert(2) | a pipe"
)


def test_markdown_summary_renders_app_text_as_text() -> None:
    r = Report(kind="check", manifest="<b>bold</b>.toml")
    r.add(
        Step.failed("application", "name <i>x</i> [l](javascript:y)", MARKUP, hint=MARKUP),
        Step.failed("application", "second", MARKUP),
    )
    md = markdown_summary(r)
    page = MarkdownIt("commonmark").enable("table").render(md)
    for bad in ("<img", "<script", "<a ", "href=", "<b>", "<i>", "<br />\n<img"):
        assert bad not in page, bad
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # shown, not run
    assert "[click](javascript:alert(1))" in page and "&amp;lt;b&amp;gt;" in page
    rows = [ln for ln in md.split("### Failed steps")[1].splitlines() if ln.startswith("| application |")]
    assert len(rows) == 2 and all(row.count(" | ") == 3 for row in rows)  # a pipe stays in its cell


# --- the step summary file ---------------------------------------------------------------------

WRITER = """
import os, sys, time
from pathlib import Path
from kernodeck.render.github import github_outputs
from kernodeck.report import Report, Step
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
r = Report(kind="check", manifest=f"writer-{sys.argv[1]}.toml")
r.add(Step.failed("application", "a", "x" * 20000))
github_outputs(r, open(os.devnull, "w"), env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": sys.argv[3]})
"""


def test_ten_concurrent_runs_keep_every_summary(tmp_path: Path) -> None:
    summary, go = tmp_path / "summary.md", tmp_path / "go"
    summary.write_text("an earlier step\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(i), str(go), str(summary)], env=env)
        for i in range(10)
    ]
    time.sleep(0.5)  # most are waiting now: they append at once
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * 10
    text = summary.read_text()
    assert text.startswith("an earlier step\n")
    assert sorted(re.findall(r"writer-(\d)\.toml", text)) == [str(i) for i in range(10)]
    assert text.count("## ❌ kernodeck check: FAILED") == 10
    assert text.count("x" * 20000) == 20  # each whole (its first failure and its row), none torn


def test_a_symlinked_summary_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real" / "summary.md"
    real.parent.mkdir()
    real.write_text("before\n")
    link = tmp_path / "summary.md"
    link.symlink_to(real)
    github_outputs(
        hostile_report(), io.StringIO(), env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(link)}
    )
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert real.read_text().startswith("before\n\n## ❌ kernodeck check: FAILED")


def test_diff_under_github_actions_is_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernodeck.cli import main

    paths = []
    for side, value in (("a", "1.0"), ("b", "::add-mask::x\n##[error]forged\x1b[2J")):
        r = Report(kind="verify")
        r.add(Step.passed("data", "data:train", observed=value))
        paths.append(tmp_path / f"{side}.json")
        r.write_json(paths[-1])
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert main(["diff", str(paths[0]), str(paths[1]), "--color", "never"]) == 1
    log = capsys.readouterr().out
    commands, stopped = runner_commands(log)
    assert [c.name for c in commands] == ["stop-commands"] and not stopped
    assert "::add-mask::x" in log and "\\x1b[2J" in log and "\x1b" not in log


def test_an_error_quoting_hostile_text_is_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernodeck.cli import main

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    name = tmp_path / "r\n::add-mask::x\x1b[2J.json"  # a path the error quotes
    assert main(["report", str(name)]) == 2
    err = capsys.readouterr().err
    commands, stopped = runner_commands(err)
    assert [c.name for c in commands] == ["stop-commands"] and not stopped
    assert "\n::add-mask::x\\x1b[2J.json" in err and "\x1b" not in err
