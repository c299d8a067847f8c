"""The HTML diagnosis: one self-contained page, charts from the series the reports store, the
diff page of two reports; `kernodeck report` and `--html`."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.errors import UsageError
from kernodeck.layers.causes import StepKind
from kernodeck.render.html import diff_html, html_report, package_rows
from kernodeck.report import Report, Status, Step
from tests.fixtures.render_projects import SHA_A, check_project, long_report, resume_project

PY = sys.executable


def run_check(tmp_path: Path, name: str, make: Callable[..., Path], **kw: float) -> tuple[Report, Path, Path]:
    manifest = make(tmp_path / name, **kw)
    js, page = tmp_path / f"{name}.json", tmp_path / f"{name}.html"
    code = main(
        [
            *("check", str(manifest), "--python", PY, "--out", str(tmp_path / f"out-{name}")),
            *("--json", str(js), "--html", str(page)),
        ]
    )
    report = Report.from_json(js.read_text())
    assert code == (0 if report.ok else 1)
    return report, js, page


def assert_self_contained(page: str) -> None:
    # nothing the browser would fetch: no src/href to a URL, no CSS import or url() but fragments
    assert not re.search(r"""(?:src|href|action|poster|data)\s*=\s*["']?(?!#)[a-z]+:""", page, re.I)
    assert not re.search(r"""\bsrc\s*=""", page, re.I)
    assert "@import" not in page and "@font-face" not in page
    assert all(u.startswith("#") for u in re.findall(r"url\(\s*['\"]?([^)'\"]*)", page))
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_resume_report_stores_the_series_and_the_page_draws_it(tmp_path: Path) -> None:
    report, js, page = run_check(tmp_path, "resume", resume_project)
    traj = next(s for s in report.steps if s.name == "trajectory loss")
    assert traj.status is Status.FAILED and traj.details["first-outside"] == 216
    assert traj.kind is StepKind.TRAJECTORY and traj.details["metric"] == "loss"  # declared, not parsed
    series = json.loads(js.read_text())["steps"][-1]["details"]["series"]
    assert series["step"][:2] == [201, 202] and len(series["value"]) == len(series["reference"]) == 40
    assert traj.details["atol"] == 0.001 and traj.details["rtol"] == 0.002
    text = page.read_text()
    assert_self_contained(text)
    assert text.count("<svg") == 1 and 'id="chart-trajectory-0"' in text
    assert "first outside: step 216" in text and "tolerance (atol 0.001 + rtol 0.002" in text
    # the first screen's order: verdict, first failure, badges, charts, then the layers
    order = [text.index(k) for k in ('id="verdict"', 'id="first-failure"', 'id="layers"', 'id="charts"')]
    assert order == sorted(order) and order[-1] < text.index('id="layer-resume"')


def test_passing_resume_has_no_point_outside(tmp_path: Path) -> None:
    report, _, page = run_check(tmp_path, "resume-ok", resume_project, drift=0.0)
    traj = next(s for s in report.steps if s.name == "trajectory loss")
    assert traj.status is Status.PASSED and traj.details["first-outside"] is None
    assert "first outside" not in page.read_text() and "<svg" in page.read_text()


def test_array_outputs_store_per_row_metrics_and_thresholds(tmp_path: Path) -> None:
    report, _, page = run_check(tmp_path, "check", check_project)
    steps = {s.name: s for s in report.steps}
    tol = steps["scores/scores.npy: vs reference"].details
    assert tol["rows"]["row"] == list(range(8)) and tol["atol"] == 0.001
    assert [e > lim for e, lim in zip(tol["rows"]["abs-error"], tol["rows"]["limit"], strict=True)] == [
        False
    ] * 5 + [True] * 3
    cos = steps["scores/scores.npy: cosine-min"].details
    assert (
        cos["cosine-min"] == 0.9999
        and [c < 0.9999 for c in cos["rows"]["cosine"]] == [False] * 5 + [True] * 3
    )
    text = page.read_text()
    assert_self_contained(text)
    assert text.count("<svg") == 2 and "absolute error per row" in text and "cosine per row" in text
    # failures first within a layer
    rows = re.findall(r'<tr class="(\w+)"><td class="status">', text.split('id="layer-application"')[1])
    assert rows[:2] == ["failed", "failed"] and set(rows[2:6]) == {"passed"}


def test_page_of_a_verify_report_with_packages() -> None:
    r = long_report()
    r.inventory = {
        "distributions": [
            {"name": "numpy", "version": "1.26.4", "installer": "pip"},
            {"name": "torch", "version": "2.13.0+cu126", "installer": "uv"},
        ]
    }
    r.add(Step.failed("packages", "record:torch", "torch: 2 installed files differ from RECORD"))
    rows = {p["name"]: p for p in package_rows(r)}
    assert rows["torch"]["local"] == "cu126" and rows["torch"]["installer"] == "uv"
    assert rows["torch"]["hashes"].startswith("failed: torch: 2 installed files")
    assert rows["numpy"]["local"] == ""
    text = html_report(r)
    assert_self_contained(text)
    assert 'id="package-search"' in text and "<svg" not in text
    assert '<dt>hint</dt><dd class="mono">unset CUDA_VISIBLE_DEVICES</dd>' in text
    first = text[text.index('id="first-failure"') : text.index('id="layers"')]
    assert "numpy 1.26.4: installed files" in first and "hint: reinstall from the lock" in first
    assert f">{SHA_A[:12]}</dd>" in first and f'title="{SHA_A}"' in first  # short, whole on hover
    assert f">{SHA_A}</dd>" in text  # ... and whole in the failure's row
    assert html_report(r) == text  # repeatable


def test_report_command_single_and_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    long_report().write_json(a)
    other = long_report()
    other.steps[0] = Step.passed("interpreter", "version", expected="3.11", observed="3.11.9")
    other.write_json(b)
    assert main(["report", str(a)]) == 0
    assert (tmp_path / "a.html").is_file() and f"wrote {tmp_path / 'a.html'}" in capsys.readouterr().out
    assert main(["report", str(a), str(b), "-o", str(tmp_path / "d.html")]) == 0
    text = (tmp_path / "d.html").read_text()
    assert_self_contained(text)
    changed = re.findall(r'<section class="layer changed" id="layer-([a-z]+)"', text)
    assert changed == ["interpreter"]
    assert "3.11.7" in text and "3.11.9" in text
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert main(["report", str(a), str(b), str(a)]) == 2


def test_diff_page_puts_failures_first_then_changes_and_folds_the_passed_layers() -> None:
    from kernodeck.diff import diff_reports

    a, b = long_report(), long_report()
    b.steps[4] = Step.passed("device", "accelerator", observed="1 GPU")
    text = diff_html(a, b, diff_reports(a, b))
    sections = re.findall(r'<section class="layer ([\w ]+)" id="layer-([a-z]+)"', text)
    # packages failed in both (the same), device failed in A and differs, interpreter passed in both
    assert sections == [("same failed", "packages"), ("changed failed", "device"), ("same", "interpreter")]
    folded = text[text.index('<details class="folded"') :]
    assert folded.startswith(
        '<details class="folded" id="same-layers"><summary>1 layer passed in A and B and the same: interpreter'
    )
    assert 'id="layer-interpreter"' in folded and 'id="layer-device"' not in folded
    assert "<details open" not in text  # folded by default


def test_missing_matplotlib_is_a_usage_error_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a = tmp_path / "a.json"
    long_report().write_json(a)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert main(["report", str(a)]) == 2
    err = capsys.readouterr().err
    assert "[report] extra" in err and "matplotlib>=3.8" in err and "Traceback" not in err
    assert not (tmp_path / "a.html").exists()
    manifest = check_project(tmp_path / "p")
    out = tmp_path / "out"
    code = main(["check", str(manifest), "--python", PY, "--out", str(out), "--html", "x.html"])
    assert code == 2 and not out.exists()  # refused before the run


def test_bundle_page_without_matplotlib_leaves_the_charts_out_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    r = Report(kind="check")
    r.add(
        Step.failed(
            "resume",
            "trajectory loss",
            "diverged",
            details={"series": {"step": [1, 2], "value": [1.0, 2.0], "reference": [1.0, 1.0]}, "atol": 0.1},
        )
    )
    assert "<svg" in html_report(r)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    text = html_report(r, charts_optional=True)
    assert (
        "<svg" not in text and "[report] extra" in text and "matplotlib" in text and "First failure" in text
    )
    with pytest.raises(UsageError, match="matplotlib"):
        html_report(r)


def test_the_page_names_the_platform_and_why() -> None:
    report = Report(platform="linux-x86_64-cpu", platform_reason="matches this <linux> machine")
    page = html_report(report, charts_optional=True)
    assert (
        '<p id="platform">platform: <code>linux-x86_64-cpu</code> (matches this &lt;linux&gt; machine)</p>'
        in page
    )
    assert 'id="platform"' not in html_report(
        report.model_copy(update={"platform_reason": None}), charts_optional=True
    )
