"""diff: which layer two reports differ in, and whether that is inputs, software or execution conditions."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.diff import diff_reports
from kernodeck.layers import layer_info
from kernodeck.render.terminal import diff_lines
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


# --- facts apart from measurements (issue #41.1) -------------------------------------------------


def _compute(ms: float, rel_err: float) -> Step:
    return Step.passed(
        "device",
        "compute",
        expected="rel. error <= 0.001 vs float64 CPU",
        observed="256×256 float32 matmul on cpu: rel. error within 0.001",
        measurements={"ms": ms, "rel_err": rel_err},
    )


def test_measurements_are_shown_side_by_side_and_never_differ() -> None:
    a, b = _report(), _report()
    a.add(_compute(33.64, 2.1e-7))
    b.add(_compute(0.29, 2.3e-7))
    result = diff_reports(a, b)
    assert result.identical and result.summary == "identical: no layer differs"
    shown = {(m.step, m.key): (m.a, m.b) for m in result.measurements}
    assert shown[("compute", "ms")] == (33.64, 0.29)
    assert shown[("revision", "seconds")] == (1.0, 1.0)
    text = "\n".join(line.text for line in diff_lines(result, width=200))
    assert "device/compute ms: 33.64 | 0.29" in text and "never compared" in text


def test_a_report_written_before_measurements_loads_and_its_timing_is_not_a_fact(tmp_path: Path) -> None:
    new = _report()
    new.add(_compute(0.29, 2.1e-7))
    old = json.loads(new.to_json())
    for s in old["steps"]:
        del s["measurements"]  # the field did not exist
        if s["name"] == "compute":
            s["observed"] = "256×256 float32 matmul on cpu: rel. error 2.1e-07 in 33.64 ms"
    old_file = tmp_path / "old.json"
    old_file.write_text(json.dumps(old))
    res = CliRunner().invoke(cli, ["diff", str(old_file), str(_write(tmp_path, "new.json", new))])
    assert res.exit_code == 0, res.output
    assert "33.64 | 0.29" in res.output


def test_skipped_steps_are_not_compared() -> None:
    a, b = _report(), _report()
    a.add(*(Step.skipped("application", f"check {i}", "an earlier layer failed") for i in range(10)))
    b.add(Step.passed("application", "check 0", observed="ok"))
    result = diff_reports(a, b)
    assert result.identical, result.summary
    assert len(result.not_compared) == 10 and "application/check 0" in result.not_compared
    text = "\n".join(line.text for line in diff_lines(result, width=400))
    assert "not compared: 10 steps skipped in A or B" in text


def _with_data_change(changed: list[str], path: str) -> tuple[Report, Report]:
    a, b = _report(), _report(data_sha=SHA_B)
    for r in (a, b):
        for s in r.steps:
            if s.layer == "data":
                s.details = {**s.details, "path": path}
    a.add(Step.passed("code", "clean-tree", expected="no local changes", observed="clean"))
    b.add(
        Step.failed(
            "code", "clean-tree", "1 tracked file changed", expected="no local changes", observed=changed
        )
    )
    return a, b


def test_a_dirty_tree_made_by_a_changed_data_file_is_the_data_layer() -> None:
    result = diff_reports(*_with_data_change(["data/samples.csv"], "data/samples.csv"))
    assert result.first_layer == "data" and result.causes == ["inputs"]
    assert "first layer that differs: data" in result.summary and "code by data" in result.summary
    tree = next(d for d in result.groups["code"] if d.item == "step clean-tree")
    assert tree.explained_by == "data"
    # a folder of data, and a code file changed beside it: code is first again
    assert diff_reports(*_with_data_change(["data/x/1.csv"], "data/x")).first_layer == "data"
    mixed = diff_reports(*_with_data_change(["data/samples.csv", "train.py"], "data/samples.csv"))
    assert mixed.first_layer == "code"


def test_results_only_lists_what_was_not_observed_before_nondeterminism() -> None:
    a, b = _report(), _report(cosine=0.9991)
    for r, lr in ((a, "0.1"), (b, "0.2")):
        r.add(Step.passed("application", "train: run", observed="exit code 0", details={"env": {"LR": lr}}))
    result = diff_reports(a, b)
    assert result.summary.startswith("only results differ")
    said = result.summary
    assert "environment variables" in said and "command-line arguments" in said
    assert said.index("Not observed") < said.index("nondeterminism")
    assert "application/train: run differ" in said and "0.1" in said and "0.2" in said
    assert result.unobserved[0].startswith("the environment set by the check")


TWICE = """\
schema-version = 1

[reference]
name = "twice"
id = "1"

[python]
version = "{py}"

[packages]
requirements = ["torch=={torch}"]

[[data]]
name = "samples"
path = "samples.csv"

[[platform]]
name = "here"
os = "linux"
arch = "{arch}"
backend = "cpu"
"""


@pytest.mark.slow
def test_verify_twice_on_the_same_environment_diffs_to_exit_0(tmp_path: Path) -> None:
    """The hidden-case check of CI: two back-to-back `kernodeck verify --json` runs of the dev venv
    (torch CPU) are the same facts, whatever their timings."""
    torch = pytest.importorskip("torch")
    (tmp_path / "samples.csv").write_text("a,b\n1,2\n")
    (tmp_path / "repro.toml").write_text(
        TWICE.format(
            py=f"{sys.version_info.major}.{sys.version_info.minor}",
            torch=torch.__version__.split("+")[0],
            arch=platform.machine(),
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    reports = []
    for run in ("a", "b"):  # a cache each: the control computation really runs twice
        out = tmp_path / f"{run}.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kernodeck",
                "verify",
                "repro.toml",
                "--json",
                str(out),
                "--color",
                "never",
            ],
            cwd=tmp_path,
            env={**env, "KERNODECK_CACHE_DIR": str(tmp_path / f"cache-{run}")},
            capture_output=True,
            check=False,
        )
        reports.append(out)
    done = subprocess.run(
        [sys.executable, "-m", "kernodeck", "diff", *map(str, reports), "--color", "never"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: no layer differs" in done.stdout
    compute = [
        s
        for s in Report.from_json(reports[0].read_text()).steps
        if (s.layer, s.name) == ("device", "compute")
    ]
    assert compute and compute[0].status.value == "passed" and "ms" in compute[0].measurements
    assert "device/compute ms:" in done.stdout  # the timings are shown, side by side


def test_layers_a_run_did_not_ask_for_are_not_compared() -> None:
    a, b = _report(), _report()
    a.add(Step.passed("application", "sample: run", observed="exit code 0"))
    b.settings = {"only": [], "skip": [], "checks": False}  # require() without checks
    result = diff_reports(a, b)
    assert result.identical and result.not_compared == ["application/sample: run"]
    b.steps = [s for s in b.steps if s.layer != "contract"]
    b.settings["skip"] = ["contract"]
    assert diff_reports(a, b).identical
    b.settings["skip"] = []  # asked for and missing: a difference
    assert not diff_reports(a, b).identical
