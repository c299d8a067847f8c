"""Verify on a CPU-only machine with a GPU platform and the reverse: which broken link is named; NO_COLOR handling."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kernodeck.render.terminal import render_report as render
from kernodeck.report import Report, Status, Step
from tests.fixtures.verify_project import GPU_SYSTEM, load, project, run, step


def test_gpu_platform_on_a_cpu_machine_names_both_broken_links(tmp_path: Path) -> None:
    """CPU torch on a machine without any GPU driver: the device step must not suggest that
    installing the GPU build of torch is enough."""
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    assert not report.ok
    acc = step(report, "device", "accelerator")
    assert acc.status is Status.FAILED and acc.details["cause"] == "cpu-only-build"
    assert "no NVIDIA driver" in acc.error
    assert "driver" in acc.hint
    assert step(report, "device", "compute").status is Status.SKIPPED
    assert step(report, "system", "nvidia-driver").details["cause"] == "no-driver"


def test_cpu_torch_on_a_gpu_machine_does_not_blame_the_driver(tmp_path: Path) -> None:
    facts = load("h100_cpu_torch")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    acc = step(run(tmp_path, facts, platform="linux-x86_64-cu126"), "device", "accelerator")
    assert acc.details["cause"] == "cpu-only-build" and "driver" not in acc.error


def _report() -> Report:
    r = Report(kind="verify")
    r.add(Step.failed("device", "accelerator", "no GPU"))
    return r


def test_an_empty_no_color_does_not_turn_colours_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # https://no-color.org: only a non-empty NO_COLOR disables colour
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("NO_COLOR", "")
    buf = Tty()
    render(_report(), buf)
    assert "\x1b[" in buf.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    buf = Tty()
    render(_report(), buf)
    assert "\x1b[" not in buf.getvalue()
