from __future__ import annotations

import io
from pathlib import Path

import pytest

from kernodeck.render.terminal import render_report as render
from kernodeck.report import Report, Step


def _report() -> Report:
    r = Report(
        kind="verify", manifest="repro.toml", reference_id="2026-12-02.1", platform="linux-x86_64-cu126"
    )
    r.add(
        Step.passed("interpreter", "version", expected="3.11", observed="3.11.7"),
        Step.failed(
            "device",
            "accelerator",
            'CUDA_VISIBLE_DEVICES="" hides every GPU',
            hint="unset CUDA_VISIBLE_DEVICES",
        ),
        Step.skipped("device", "compute", "no usable cuda device"),
        Step.warning(
            "packages", "unlocked", "1 installed distribution is not in the lock: tqdm", required=False
        ),
    )
    return r


def test_human_report_tables_and_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    buf = io.StringIO()
    render(_report(), buf)
    text = buf.getvalue()
    assert "\x1b[" not in text  # not a terminal: no colours
    for layer in ("interpreter", "device", "packages"):
        assert f"\n{layer}" in text
    assert "hint: unset CUDA_VISIBLE_DEVICES" in " ".join(text.split())
    summary = text.strip().splitlines()[-2:]
    assert summary == [
        "FAILED: 1 failed, 1 warning, 1 passed, 1 skipped",
        'first failure: device/accelerator: CUDA_VISIBLE_DEVICES="" hides every GPU',
    ]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_when_asked_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    buf = io.StringIO()
    render(_report(), buf, color=True)
    assert "\x1b[" in buf.getvalue()
    tty = _Tty()
    render(_report(), tty)  # auto: a terminal gets colours ...
    assert "\x1b[" in tty.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    render(_report(), tty)  # ... but not with NO_COLOR set
    assert "\x1b[" not in tty.getvalue()


def test_json_round_trip_atomic(tmp_path: Path) -> None:
    r = _report()
    r.write_json(tmp_path / "out" / "report.json")
    assert Report.from_json((tmp_path / "out" / "report.json").read_text()) == r
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["report.json"]


def test_the_platform_reason_is_part_of_the_json_report(tmp_path: Path) -> None:
    report = Report(platform="linux-x86_64-cpu", platform_reason="named with --platform")
    report.write_json(tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text()
    assert '"platform_reason": "named with --platform"' in text
    assert Report.from_json(text) == report
    # a report written before the field existed still reads, without a reason
    old = text.replace('  "platform_reason": "named with --platform",\n', "")
    assert old != text and Report.from_json(old).platform_reason is None
