"""`[determinism]` checked in the process verify or require() looks at, as facts the fleet compares
(kernodeck.layers.determinism)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernodeck.api import require, verify
from kernodeck.determinism import apply
from kernodeck.errors import CheckFailed
from kernodeck.fleet.facts import digest, layer_facts
from kernodeck.layers.causes import StepCause
from kernodeck.probe.runner import FakeProbe
from kernodeck.report import Report, Status
from tests.fixtures.verify_project import load, project, step

PLATFORM = "linux-x86_64-cpu"


def _declare(tmp_path: Path, table: str) -> tuple[Path, dict[str, Any]]:
    facts = load("cpu_linux")
    manifest = project(tmp_path, facts, PLATFORM)
    manifest.write_text(manifest.read_text() + f"\n[determinism]\n{table}\n")
    return manifest, facts


def _verify_with_hashseed(tmp_path: Path, value: str | None) -> Report:
    manifest, facts = _declare(tmp_path, 'env = { PYTHONHASHSEED = "0" }')
    facts["env"]["PYTHONHASHSEED"] = value
    return verify(manifest, probe=FakeProbe(facts), cache_dir=tmp_path / "cache", only=["system"])


def test_a_declared_variable_is_checked_in_the_probed_process(tmp_path: Path) -> None:
    ok = _verify_with_hashseed(tmp_path, "0")
    assert step(ok, "system", "determinism:env:PYTHONHASHSEED").status is Status.PASSED
    bad = _verify_with_hashseed(tmp_path, "7")
    s = step(bad, "system", "determinism:env:PYTHONHASHSEED")
    assert s.status is Status.FAILED and not bad.ok
    assert s.details["cause"] == StepCause.DETERMINISM_ENV
    assert "PYTHONHASHSEED=7" in (s.error or "") and "PYTHONHASHSEED=0" in (s.error or "")
    unset = _verify_with_hashseed(tmp_path, None)
    assert "PYTHONHASHSEED is not set" in (
        step(unset, "system", "determinism:env:PYTHONHASHSEED").error or ""
    )


def test_fleet_ranks_with_another_hashseed_differ(tmp_path: Path) -> None:
    for rank in "012":
        (tmp_path / rank).mkdir()
    rank0 = layer_facts(_verify_with_hashseed(tmp_path / "0", "0"))
    rank1 = layer_facts(_verify_with_hashseed(tmp_path / "1", "7"))
    same = layer_facts(_verify_with_hashseed(tmp_path / "2", "0"))
    assert digest(rank0["system"]) != digest(rank1["system"])
    assert digest(rank0["system"]) == digest(same["system"])


@pytest.mark.slow
def test_require_sees_the_calling_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real probe, started by require() from this process: it sees this process's variables."""
    manifest, _ = _declare(tmp_path, 'env = { PYTHONHASHSEED = "0" }')
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    with pytest.raises(CheckFailed) as info:
        require(manifest, only=["system"])
    assert info.value.report is not None
    assert step(info.value.report, "system", "determinism:env:PYTHONHASHSEED").observed == "PYTHONHASHSEED=7"
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    ok = require(manifest, only=["system"])
    assert step(ok, "system", "determinism:env:PYTHONHASHSEED").status is Status.PASSED


@pytest.fixture
def torch_defaults() -> Iterator[Any]:
    torch = pytest.importorskip("torch")
    yield torch
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic = False
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")


def test_torch_settings_are_checked_in_the_application_process(tmp_path: Path, torch_defaults: Any) -> None:
    manifest, facts = _declare(
        tmp_path, 'seed = 1234\ndeterministic-algorithms = true\nfloat32-matmul-precision = "high"'
    )
    torch_defaults.manual_seed(99)
    with pytest.raises(CheckFailed) as info:
        require(manifest, probe=FakeProbe(facts), cache_dir=tmp_path / "cache", only=["backend"])
    report = info.value.report
    assert report is not None
    det = step(report, "backend", "determinism:deterministic-algorithms")
    assert det.status is Status.FAILED and (det.expected, det.observed) == (True, False)
    assert "kernodeck.determinism.apply" in (det.hint or "")
    assert step(report, "backend", "determinism:seed").observed == 99
    apply(manifest)  # what the script does first
    ok = require(manifest, probe=FakeProbe(facts), cache_dir=tmp_path / "cache", only=["backend"])
    assert {s.name: s.status for s in ok.steps if s.name.startswith("determinism:")} == {
        "determinism:seed": Status.PASSED,
        "determinism:deterministic-algorithms": Status.PASSED,
        "determinism:float32-matmul-precision": Status.PASSED,
    }


def test_verify_does_not_claim_torch_settings_of_a_fresh_process(tmp_path: Path) -> None:
    manifest, facts = _declare(tmp_path, "deterministic-algorithms = true")
    report = verify(manifest, probe=FakeProbe(facts), cache_dir=tmp_path / "cache", only=["backend"])
    s = step(report, "backend", "determinism:deterministic-algorithms")
    assert s.status is Status.SKIPPED and "not observed" in (s.error or "")
    assert s.details["cause"] == StepCause.NOT_THE_APPLICATION_PROCESS
