"""A verify run's steps are timed and a layer not run lists the steps it reports when it runs
(`kernodeck.layers.run.timed`, `planned_names`), so JUnit counts stay stable across outcomes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from kernodeck.api import verify
from kernodeck.diff import diff_reports
from kernodeck.layers.run import timed
from kernodeck.probe.facts import Facts
from kernodeck.probe.runner import FakeProbe, ProbeFailed, ProbeRequest
from kernodeck.render.junit import junit_xml
from kernodeck.report import Report, Status, Step
from tests.fixtures.verify_project import GPU_SYSTEM, load, project, run


class BrokenProbe(FakeProbe):
    """The environment probe fails: the interpreter did not start."""

    def collect(self, request: ProbeRequest) -> Facts:
        raise ProbeFailed("the environment probe under /fixture/bin/python exited with 127")


def names(report: Report) -> list[tuple[str, str]]:
    """(layer, step) of every step, per-device steps left out (they need the probe's devices)."""
    return [(str(s.layer), s.name) for s in report.steps if not s.name.startswith("arch:")]


CASES = [("cpu_linux", "linux-x86_64-cpu", ""), ("h100_cu126", "linux-x86_64-cu126", GPU_SYSTEM)]


@pytest.mark.parametrize(("fixture", "platform", "system"), CASES)
def test_a_failed_probe_lists_the_same_steps_as_a_passing_run(
    tmp_path: Path, fixture: str, platform: str, system: str
) -> None:
    facts = load(fixture)
    project(tmp_path, facts, platform, system=system)
    passing = run(tmp_path, facts)
    assert passing.ok, passing.summary()
    broken = verify(
        tmp_path / "repro.toml", probe=BrokenProbe(facts), platform=platform, cache_dir=tmp_path / "cache"
    )
    assert not broken.ok
    assert names(broken) == names(passing)
    states = {(str(s.layer), s.name): s.status for s in broken.steps}
    assert states.pop(("interpreter", "probe")) is Status.FAILED
    assert set(states.values()) == {Status.SKIPPED}
    assert all("exited with 127" in (s.error or "") for s in broken.steps)
    # the JUnit counts are the same whatever the outcome
    counts = [
        int(ET.fromstring(junit_xml(r).split("\n", 1)[1]).get("tests", "-1")) for r in (passing, broken)
    ]
    assert counts[0] - sum(s.name.startswith("arch:") for s in passing.steps) == counts[1]


def _wrong_env(facts: dict[str, Any]) -> dict[str, Any]:
    keep = ("pip", "setuptools")
    facts["distributions"] = [d for d in facts["distributions"] if d["name"] in keep]
    return facts


def test_the_wrong_environment_lists_every_later_step_skipped(tmp_path: Path) -> None:
    facts = load("h100_cu126")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    passing = run(tmp_path, facts)
    wrong = run(tmp_path, _wrong_env(load("h100_cu126")))
    assert wrong.notices and not wrong.ok
    after = {"contract", "system", "backend", "device"}
    later = [n for n in names(wrong) if n[0] in after]
    assert later == [n for n in names(passing) if n[0] in after]
    assert all(s.status is Status.SKIPPED for s in wrong.steps if str(s.layer) in after)


def test_every_step_of_a_verify_run_has_a_time_and_the_run_its_duration(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    report = run(tmp_path, facts)
    assert all(s.seconds is not None and s.seconds >= 0 for s in report.steps)
    assert report.seconds is not None and report.seconds >= 0
    assert report.summary().startswith(f"OK: {len(report.steps)} passed in ")
    # a measurement: two runs of the same environment compare equal
    again = run(tmp_path, facts)
    again.seconds = (report.seconds or 0) + 5
    assert diff_reports(report, again).identical


def test_a_step_keeps_its_own_time_and_the_others_share_the_rest_of_the_layers() -> None:
    steps = [
        Step.passed("application", "scores", seconds=1.5),
        Step.passed("application", "tokens"),
        Step.failed("application", "loss", "diverged"),
    ]
    timed(steps, 2.5)
    assert [s.seconds for s in steps] == [1.5, 0.5, 0.5]
    # a layer faster than its steps' own times claims no negative share
    fast = [Step.passed("resume", "resume", seconds=3.0), Step.passed("resume", "checkpoint")]
    timed(fast, 1.0)
    assert [s.seconds for s in fast] == [3.0, 0.0]


def test_the_torch_probe_stages_time_the_steps_that_report_them(tmp_path: Path) -> None:
    facts = load("h100_cu126")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts)
    seconds = {(str(s.layer), s.name): s.seconds for s in report.steps}
    assert seconds[("backend", "torch-import")] == facts["torch"]["import_seconds"] == 1.84
    assert seconds[("device", "compute")] == facts["torch"]["compute"]["seconds"] == 0.000118
