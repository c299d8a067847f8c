"""diff: which layer two reports differ in, and whether that is inputs, software or execution conditions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.diff import diff_reports
from kernodeck.layers import layer_info
from kernodeck.report import Report, Step

SHA_A = "a" * 64
SHA_B = "b" * 64


def _report(
    *,
    data_sha: str = SHA_A,
    numpy: str = "2.1.0",
    driver: str = "560.35.03",
    device: str = "NVIDIA A100-SXM4-40GB",
    cosine: float = 1.0,
    seconds: float = 1.0,
) -> Report:
    r = Report(reference_id="2026-12-02.1", platform="linux-x86_64-cu126")
    r.add(
        Step.passed("code", "revision", expected="9f1c" * 10, observed="9f1c" * 10, seconds=seconds),
        Step.passed("data", "samples", expected=SHA_A, observed=data_sha, seconds=seconds * 2)
        if data_sha == SHA_A
        else Step.failed("data", "samples", "sha256 differs", expected=SHA_A, observed=data_sha),
        Step.passed("interpreter", "python", expected="3.11", observed="3.11.7"),
        Step.passed("packages", "numpy", expected="2.1.0", observed=numpy),
        Step.passed("contract", "pip-check", observed="No broken requirements found."),
        Step.passed("system", "nvidia-driver", expected=">=560.28", observed=driver),
        Step.passed("backend", "torch", observed={"version": "2.6.0+cu126", "cuda": "12.6"}),
        Step.passed("device", "gpu", observed={"name": device, "seconds": seconds}),
        Step.passed("application", "embeddings: cosine-min", expected=0.9999, observed=cosine),
    )
    r.inventory = {
        "distributions": [{"name": "numpy", "version": numpy}, {"name": "torch", "version": "2.6.0+cu126"}],
        "system": {"nvidia_driver": {"version": driver, "source": "proc"}},
        "torch": {"version": "2.6.0+cu126", "cuda": "12.6"},
    }
    return r


def _write(tmp_path: Path, name: str, report: Report) -> Path:
    p = tmp_path / name
    report.write_json(p)
    return p


def test_identical_reports_ignore_timings() -> None:
    result = diff_reports(_report(seconds=1.0), _report(seconds=7.5))
    assert result.identical
    assert result.first_layer is None
    assert "identical" in result.summary


def test_only_a_data_fingerprint_says_inputs() -> None:
    result = diff_reports(_report(), _report(data_sha=SHA_B))
    assert result.causes == ["inputs"]
    assert result.first_layer == "data"
    assert "inputs" in result.summary and "software" not in result.summary
    assert [d.item for d in result.groups["data"]] == ["step samples"]


def test_only_a_package_version_says_software() -> None:
    result = diff_reports(_report(), _report(numpy="2.2.0"))
    assert result.causes == ["software"]
    assert result.first_layer == "packages"
    assert "software" in result.summary
    assert set(result.groups) == {"packages"}
    assert "inventory distributions.numpy.version" in [d.item for d in result.groups["packages"]]


@pytest.mark.parametrize("change", [{"driver": "570.86.10"}, {"device": "NVIDIA H100 80GB HBM3"}])
def test_only_driver_or_device_says_execution_conditions(change: dict[str, Any]) -> None:
    result = diff_reports(_report(), _report(**change))
    assert result.causes == ["execution conditions"]
    assert "execution conditions" in result.summary
    assert set(result.groups) == {"system and backend"}
    assert result.first_layer in ("system", "device")


def test_several_layers_name_the_first_and_warn() -> None:
    result = diff_reports(_report(), _report(numpy="2.2.0", driver="570.86.10", data_sha=SHA_B, cosine=0.98))
    assert result.causes == ["inputs", "software", "execution conditions"]
    assert result.first_layer == "data"
    assert "one layer at a time" in result.summary
    assert list(result.groups) == ["data", "packages", "system and backend", "results"]


def test_only_results_differ() -> None:
    result = diff_reports(_report(), _report(cosine=0.9991))
    assert result.causes == []
    assert result.first_layer == "application"
    assert result.summary.startswith("only results differ")


def test_missing_step_and_reference_id_note() -> None:
    a, b = _report(), _report()
    b.steps = [s for s in b.steps if s.layer != "contract"]
    b.reference_id = "2026-12-03.1"
    result = diff_reports(a, b)
    assert any(d.what == "only in A" and d.layer == "contract" for d in result.groups["packages"])
    assert result.notes and "2026-12-03.1" in result.notes[0]


def test_layer_table() -> None:
    assert layer_info("weights") == ("data", "inputs")
    assert layer_info("contract") == ("packages", "software")
    assert layer_info("backend") == ("system and backend", "execution conditions")
    assert layer_info("resume") == ("results", "results")


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json", _report())
    same = _write(tmp_path, "same.json", _report(seconds=3))
    b = _write(tmp_path, "b.json", _report(numpy="2.2.0"))
    runner = CliRunner()
    ok = runner.invoke(cli, ["diff", str(a), str(same)])
    assert ok.exit_code == 0, ok.output
    assert "identical" in ok.output
    res = runner.invoke(cli, ["diff", str(a), str(b), "--json"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["causes"] == ["software"] and data["first_layer"] == "packages"
    text = runner.invoke(cli, ["diff", str(a), str(b)])
    assert "packages:" in text.output and "numpy" in text.output and "software" in text.output


def test_cli_bad_input_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    runner = CliRunner()
    res = runner.invoke(cli, ["diff", str(bad), str(bad)])
    assert res.exit_code == 2
    assert "not a kernodeck report" in res.output
    res = runner.invoke(cli, ["diff", str(tmp_path / "missing.json"), str(bad)])
    assert res.exit_code == 2


def test_live_side_verifies_the_manifest_the_report_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = tmp_path / "repro.toml"
    manifest.write_text("")
    ref = _report()
    ref.manifest = str(manifest)
    a = _write(tmp_path, "a.json", ref)
    seen: list[Path] = []

    def fake_live(path: Path, **_: Any) -> Report:
        seen.append(Path(path))
        return _report(device="NVIDIA L4")

    monkeypatch.setattr("kernodeck.commands.diff.live_report", fake_live)
    res = CliRunner().invoke(cli, ["diff", str(a), "live", "--json"])
    assert res.exit_code == 1, res.output
    assert seen == [manifest]
    assert json.loads(res.stdout)["causes"] == ["execution conditions"]
