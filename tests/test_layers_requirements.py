"""The packages layer checks the manifest's own requirements against what is installed, whatever the
lock's state (kernodeck.layers.requirements), over recorded probe facts."""

from __future__ import annotations

from pathlib import Path

from kernodeck.layers.causes import StepCause
from kernodeck.report import Status
from tests.fixtures.verify_project import load, project, run, step

PLATFORM = "linux-x86_64-cpu"


def _edit(manifest: Path, old: str, new: str) -> None:
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new))


def test_a_pin_edited_in_the_manifest_fails_with_a_stale_lock(tmp_path: Path) -> None:
    facts = load("cpu_linux")  # torch 2.6.0+cpu installed, and locked
    manifest = project(tmp_path, facts, PLATFORM)
    _edit(manifest, '"torch==2.6.*"', '"torch==2.5.1"')
    report = run(tmp_path, facts, only=["packages"])
    assert step(report, "packages", "pins").status is Status.PASSED  # the lock is met ...
    req = step(report, "packages", "requirement:torch")  # ... the manifest is not
    assert req.status is Status.FAILED and not report.ok
    assert req.details["cause"] == StepCause.PIN_MISMATCH
    assert str(StepCause.PIN_MISMATCH) == "pin-mismatch"
    assert "torch 2.6.0+cpu" in (req.error or "") and "torch==2.5.1" in (req.error or "")
    assert (req.expected, req.observed) == ("torch==2.5.1", "2.6.0+cpu")


def test_a_pin_edited_in_the_manifest_fails_without_a_lock(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    manifest = project(tmp_path, facts, PLATFORM)
    (tmp_path / f"requirements-rebuild-{PLATFORM}.txt").unlink()
    _edit(manifest, '"numpy>=2"', '"numpy<2"')
    report = run(tmp_path, facts, only=["packages"])
    assert step(report, "packages", "lockfile").status is Status.FAILED
    req = step(report, "packages", "requirement:numpy")
    assert req.status is Status.FAILED
    assert "numpy 2.2.1" in (req.error or "") and "numpy<2" in (req.error or "")


def test_met_requirements_pass_and_say_how_many(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, PLATFORM)
    report = run(tmp_path, facts, only=["packages"])
    assert report.ok, report.summary()
    met = step(report, "packages", "requirements")
    assert met.status is Status.PASSED and met.observed == "2 of 2 met by what is installed"


def test_requirements_from_a_source_file_are_checked_and_named(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    manifest = project(tmp_path, facts, PLATFORM)
    (tmp_path / "requirements.txt").write_text("sympy==1.12\nfilelock>=3\n")
    _edit(manifest, "[packages]\n", '[packages]\nfrom = ["requirements.txt"]\n')
    report = run(tmp_path, facts, only=["packages"])
    req = step(report, "packages", "requirement:sympy")
    assert req.status is Status.FAILED and req.details["declared-in"] == "requirements.txt"
    assert req.error == "sympy 1.13.1 is installed where requirements.txt requires sympy==1.12"
    assert not [s for s in report.steps if s.name == "requirement:filelock"]


def test_a_missing_declared_project_is_reported_once(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    facts["distributions"] = [d for d in facts["distributions"] if d["name"] != "numpy"]
    project(tmp_path, facts, PLATFORM)  # the lock does not pin numpy either
    report = run(tmp_path, facts, only=["packages"])
    req = step(report, "packages", "requirement:numpy")
    assert req.status is Status.FAILED and req.details["cause"] == "missing"
    # pinned by the lock and missing: the pin's step says it, not a second one
    facts_pinned = load("cpu_linux")
    project(tmp_path, facts_pinned, PLATFORM)
    report = run(tmp_path, facts, only=["packages"])
    assert step(report, "packages", "pin:numpy").status is Status.FAILED
    assert not [s for s in report.steps if s.name == "requirement:numpy"]


def test_a_prerelease_under_prereleases_false_warns(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    for d in facts["distributions"]:
        if d["name"] == "numpy":
            d["version"] = "2.3.0rc1"
    project(tmp_path, facts, PLATFORM)
    report = run(tmp_path, facts, only=["packages"])
    req = step(report, "packages", "requirement:numpy")
    assert req.status is Status.WARNING and not req.required
    assert req.details["cause"] == "prerelease" and "pre-release" in (req.error or "")
    manifest = tmp_path / "repro.toml"
    _edit(manifest, "[packages]\n", "[packages]\nprereleases = true\n")
    report = run(tmp_path, facts, only=["packages"])
    assert not [s for s in report.steps if s.name == "requirement:numpy"]
