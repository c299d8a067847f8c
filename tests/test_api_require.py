"""require(): the environment by default, the application and resume checks only when asked;
CheckFailed typed, worded like the CLI and ending with the first failure's hint; the same typed
keywords as verify()."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

import kernodeck
from kernodeck.api import require, verify
from kernodeck.errors import CheckFailed, UsageError
from kernodeck.probe.runner import FakeProbe
from kernodeck.render.terminal import summary_text
from kernodeck.report import Status
from tests.fixtures.verify_project import load, project

PLATFORM = "linux-x86_64-cpu"

CHECKS = """
[[check]]
name = "sample"
run = ["python", "-c", "import pathlib; pathlib.Path('ran-sample').touch(); raise SystemExit(3)"]
timeout = 60

[[check]]
name = "other"
run = ["python", "-c", "import pathlib; pathlib.Path('ran-other').touch()"]
timeout = 60
"""


def _project(tmp_path: Path) -> FakeProbe:
    facts = load("cpu_linux")
    manifest = project(tmp_path, facts, PLATFORM)
    manifest.write_text(manifest.read_text() + CHECKS)
    return FakeProbe(facts, python=sys.executable)


def test_require_checks_the_environment_and_runs_no_check_by_default(tmp_path: Path) -> None:
    probe = _project(tmp_path)
    report = require(tmp_path / "repro.toml", probe=probe, cache_dir=tmp_path / "cache")
    assert report.ok, report.summary()
    assert not (tmp_path / "ran-sample").exists() and not (tmp_path / "ran-other").exists()
    assert {str(s.layer) for s in report.steps} >= {"interpreter", "packages", "contract", "system"}
    assert not [s for s in report.steps if s.layer in ("application", "resume")]
    assert any("not run: sample, other" in n and "checks=True" in n for n in report.notices)


def test_require_runs_the_checks_asked_for(tmp_path: Path) -> None:
    probe = _project(tmp_path)
    ok = require(tmp_path / "repro.toml", probe=probe, cache_dir=tmp_path / "cache", checks=["other"])
    assert (tmp_path / "ran-other").exists() and not (tmp_path / "ran-sample").exists()
    assert [s.name for s in ok.steps if s.layer == "application"] == ["other: run"]
    with pytest.raises(CheckFailed) as info:
        require(tmp_path / "repro.toml", probe=probe, cache_dir=tmp_path / "cache", checks=True)
    assert (tmp_path / "ran-sample").exists()
    assert info.value.report is not None
    assert "application/sample: run" in info.value.message
    with pytest.raises(UsageError, match="'nope' is not a check") as bad:
        require(tmp_path / "repro.toml", probe=probe, cache_dir=tmp_path / "cache", checks=["nope"])
    assert bad.value.hint == "declared: sample, other"


def test_verify_runs_every_check_as_the_cli_does(tmp_path: Path) -> None:
    probe = _project(tmp_path)
    report = verify(tmp_path / "repro.toml", probe=probe, cache_dir=tmp_path / "cache")
    assert {s.name for s in report.steps if s.layer == "application"} == {"sample: run", "other: run"}
    assert not report.notices


def test_check_failed_is_typed_worded_as_the_cli_and_ends_with_the_hint(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    manifest = project(tmp_path, facts, PLATFORM)
    manifest.write_text(manifest.read_text().replace('"numpy>=2"', '"numpy<2"'))
    assert kernodeck.CheckFailed is CheckFailed
    with pytest.raises(kernodeck.CheckFailed) as info:
        require(manifest, probe=FakeProbe(facts), cache_dir=tmp_path / "cache")
    err = info.value
    assert err.report is not None and not err.report.ok
    first = next(s for s in err.report.steps if s.status is Status.FAILED)
    assert first.hint and err.hint == first.hint
    assert str(err).rstrip().endswith(f"hint: {first.hint}")
    assert err.message == summary_text(err.report) == err.report.summary()
    # the CLI's words: its summary line (render.terminal.summary_text) is this one
    assert re.match(
        r"FAILED: 1 failed, 15 passed in [0-9.]+s; first failure: packages/requirement:numpy: ", err.message
    )
    annotations = inspect.get_annotations(CheckFailed)
    assert set(annotations) >= {"report", "hint"}


def test_require_and_verify_take_the_same_typed_keywords() -> None:
    v = inspect.signature(verify).parameters
    r = inspect.signature(require).parameters
    assert set(r) - set(v) == {"fleet", "fleet_timeout", "log_to"}
    for name, p in v.items():
        assert r[name].annotation == p.annotation and r[name].kind == p.kind, name
    assert v["checks"].default is True and r["checks"].default is False
