"""rebuild's procedure as a table of named stages (`rebuild.STAGES`): what a failing stage skips
and why, refusals, stages that do not apply, and the exit code from typed results only."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.handover import rebuild
from kernodeck.handover import sums as bundlesums
from kernodeck.handover.rebuild import (
    STAGE_ORDER,
    STAGES,
    RebuildPlan,
    Stage,
    StageResult,
    _Run,
    plan_rebuild,
    run_rebuild,
)
from kernodeck.layers import Layer
from kernodeck.report import Report, Status, Step
from tests.fixtures.fresh_lock import stamp_lock

MANIFEST = """schema-version = 1
[reference]
name = "tiny"
id = "2026-01-01.1"
[python]
version = "{py}"
[[platform]]
name = "here"
os = "linux"
arch = "x86_64"
"""

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _plan(tmp_path: Path, py: str = PY, bundle: bool = False) -> RebuildPlan:
    proj = tmp_path / "proj"
    proj.mkdir(parents=True)
    (proj / "repro.toml").write_text(MANIFEST.format(py=py))
    (proj / "requirements-rebuild-here.txt").write_text("# empty lock\n")
    stamp_lock(proj / "repro.toml", "here")
    if bundle:
        files = {p.name: p.read_bytes() for p in proj.iterdir()}
        (proj / bundlesums.NAME).write_text(bundlesums.render(files))
    return plan_rebuild(proj, dest=tmp_path / "v", platform="here")


def _steps(report: Report) -> list[tuple[str, str, str | None]]:
    return [(s.name, s.status.value, s.error if s.status is Status.SKIPPED else None) for s in report.steps]


def test_the_table_names_every_stage_in_order_and_skips_only_later_ones() -> None:
    assert tuple(s.name for s in STAGES) == STAGE_ORDER
    for i, stage in enumerate(STAGES):
        assert set(stage.skips) <= set(STAGE_ORDER[i + 1 :]), stage.name
        assert bool(stage.skips) == bool(stage.why_skipped), stage.name
    # a broken contract and a failed inventory are reported without skipping what follows
    by_name = {s.name: s for s in STAGES}
    assert by_name["contract"].skips == () and by_name["inventory"].skips == ()
    assert by_name["install"].skips == ("project", "contract", "inventory", "verify")
    assert by_name["project"].skips == () and not by_name["project"].required  # a warning at most


def _canned(name: str, status: Status, refused: str | None = None) -> Stage:
    def run(_: object) -> StageResult:
        step = Step(
            layer=Layer.REBUILD, name=name, status=status, error=None if status is Status.PASSED else "boom"
        )
        return StageResult([step], failed=status is Status.FAILED, refused=refused)

    return Stage(name, run)


def test_a_failing_stage_skips_what_it_names_and_the_rest_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = (
        Stage("a", _canned("a", Status.PASSED).run),
        Stage("b", _canned("b", Status.FAILED).run, skips=("c",), why_skipped="b failed"),
        Stage("c", _canned("c", Status.PASSED).run),
        Stage("d", _canned("d", Status.PASSED).run, applies=lambda plan: False),
        Stage("e", _canned("e", Status.PASSED).run, label="e with {installer}"),
    )
    monkeypatch.setattr(rebuild, "STAGES", table)
    lines: list[str] = []
    report = run_rebuild(_plan(tmp_path), environ={"PATH": ""}, log=lines.append).report
    assert _steps(report) == [
        ("a", "passed", None),
        ("b", "failed", None),
        ("c", "skipped", "b failed"),
        ("e", "passed", None),
    ]
    assert lines == ["rebuild: a ...", "rebuild: b ...", "rebuild: e with pip ..."]
    assert report.exit_code == 1 and report.refused is None


def test_a_refusal_and_a_stage_not_needed_for_the_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    optional = Stage("x", _canned("x", Status.FAILED).run, required=False)
    monkeypatch.setattr(rebuild, "STAGES", (optional,))
    report = run_rebuild(_plan(tmp_path), environ={"PATH": ""}).report
    assert report.steps[0].status is Status.FAILED and not report.steps[0].required
    assert report.exit_code == 0
    monkeypatch.setattr(
        rebuild, "STAGES", (Stage("y", _canned("y", Status.FAILED, refused="bad input").run),)
    )
    report = run_rebuild(_plan(tmp_path / "2"), environ={"PATH": ""}).report
    assert report.refused == "bad input" and report.exit_code == 2


def test_a_refused_interpreter_skips_every_later_stage_verify_included(tmp_path: Path) -> None:
    plan = _plan(tmp_path, py="3.9")
    report = run_rebuild(plan, environ={"PATH": ""}, verify=None).report
    why = "no suitable interpreter; nothing was created"
    applying = [s.name for s in rebuild.STAGES if s.applies(plan)]
    assert "project" not in applying  # the plan's manifest reads no pyproject.toml
    assert _steps(report)[0] == ("lock", "passed", None)  # the lock is checked first
    assert _steps(report)[2:] == [(name, "skipped", why) for name in STAGE_ORDER[3:] if name in applying]
    assert report.steps[1].name == "interpreter" and report.steps[1].status is Status.FAILED
    assert report.exit_code == 2 and not plan.dest.exists()


def test_a_tampered_bundle_skips_everything_after_the_bundle_stage(tmp_path: Path) -> None:
    plan = _plan(tmp_path, bundle=True)
    assert plan.bundle_sums is not None
    (plan.manifest_path.parent / "requirements-rebuild-here.txt").write_text("alpha==1.0\n")
    report = run_rebuild(plan, environ={"PATH": ""}).report
    assert report.steps[0].name == "bundle" and report.steps[0].status is Status.FAILED
    why = "the bundle does not match BUNDLE.sha256 (or its signature); nothing was created"
    # (the project stage never applies to a bundle)
    assert _steps(report)[1:] == [(name, "skipped", why) for name in STAGE_ORDER[1:] if name != "project"]
    assert report.exit_code == 1 and not plan.dest.exists()


def test_without_a_bundle_the_bundle_stage_does_not_appear(tmp_path: Path) -> None:
    report = run_rebuild(_plan(tmp_path, py="3.9"), environ={"PATH": ""}).report
    assert "bundle" not in [s.name for s in report.steps]


def _pip_version_only(
    monkeypatch: pytest.MonkeyPatch, returncode: int, stdout: str, stderr: str = ""
) -> None:
    """The real `pip-version` stage alone, its command answered as given."""
    monkeypatch.setattr(rebuild, "STAGES", tuple(s for s in STAGES if s.name == "pip-version"))
    monkeypatch.setattr(rebuild, "_run", lambda argv, env, *a, **k: _Run(returncode, stdout, stderr, 0.0))


def test_pip_version_is_a_typed_field_of_the_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pip_version_only(monkeypatch, 0, "pip 24.3.1 from /somewhere/site-packages/pip (python 3.11)\n")
    result = run_rebuild(_plan(tmp_path), environ={"PATH": ""})
    assert result.pip_version == "pip 24.3.1 (python 3.11)"
    assert [(s.name, s.observed) for s in result.report.steps] == [
        ("pip-version", "pip 24.3.1 (python 3.11)")
    ]
    assert result.exit_code == 0


def test_no_pip_version_when_the_stage_fails_or_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pip_version_only(monkeypatch, 1, "", "No module named pip")
    result = run_rebuild(_plan(tmp_path), environ={"PATH": ""})
    assert result.pip_version is None and result.exit_code == 1
    monkeypatch.undo()
    skipped = run_rebuild(_plan(tmp_path / "2", py="3.9"), environ={"PATH": ""})  # refused interpreter
    assert skipped.pip_version is None and skipped.exit_code == 2


def test_the_command_line_finds_no_step_by_name() -> None:
    """Exit codes and the lines printed beside a report come from typed results only."""
    commands = Path(rebuild.__file__).parent / "commands"
    for path in sorted(commands.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert ".name ==" not in text and "s.name for s in report.steps" not in text, path.name


def test_the_command_prints_pip_version_from_the_typed_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pip_version_only(monkeypatch, 0, "pip 24.3.1 from /somewhere/site-packages/pip (python 3.11)\n")
    plan = _plan(tmp_path)
    argv = ["rebuild", str(plan.manifest_path), "--dest", str(tmp_path / "v2"), "--platform", "here"]
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 0, res.output
    assert "pip --version: pip 24.3.1 (python 3.11)" in res.output
    _pip_version_only(monkeypatch, 1, "", "No module named pip")
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 1 and "pip --version" not in res.output


# What `python -m venv` printed for a --dest in a folder the user may not write (Python 3.11, a
# second user on the development machine), and on Debian without the venv package.
VENV_REFUSED = "Error: [Errno 13] Permission denied: '{dest}'\n"
VENV_NO_ENSUREPIP = (
    "The virtual environment was not created successfully because ensurepip is not\n"
    "available.  On Debian/Ubuntu systems, you need to install the python3-venv\npackage"
    " using the following command.\n\n    apt install python3.11-venv\n"
)


@pytest.mark.parametrize(
    ("output", "hint"),
    [
        (VENV_REFUSED, "this user may not write in {folder}: pass a --dest folder you may write"),
        (VENV_NO_ENSUREPIP, "on Debian/Ubuntu install pythonX.Y-venv; or pass another --python"),
    ],
)
def test_a_venv_that_cannot_be_made_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, hint: str
) -> None:
    """A --dest the user may not write is not a missing venv package: the hint names the folder."""
    plan = _plan(tmp_path)
    table = tuple(s for s in STAGES if s.name in ("interpreter", "venv"))
    monkeypatch.setattr(rebuild, "STAGES", table)
    text = output.format(dest=plan.dest)
    monkeypatch.setattr(rebuild, "_run", lambda argv, env, *a, **k: _Run(1, "", text, 0.0))
    report = run_rebuild(plan, environ=dict(os.environ)).report
    venv = next(s for s in report.steps if s.name == "venv")
    assert venv.status is Status.FAILED and venv.hint == hint.format(folder=tmp_path)
