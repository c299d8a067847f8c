"""`verify --log-to` and `require(log_to=...)`: the report attached to the run people already track,
against a real local MLflow file store and a real W&B offline run (no network)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.report import Report
from kernodeck.trackers import TAG_LIMIT, log_report, names, tags
from tests.fixtures import verify_project as vp
from tests.fixtures.wandb_log import records

PLATFORM = "linux-x86_64-cu126"


@pytest.fixture
def failed_report(tmp_path: Path) -> Report:
    facts = vp.load("h100_cu126")
    pins = {d["name"]: d["version"] for d in facts["distributions"] if d["name"] not in ("pip", "setuptools")}
    pins["numpy"] = "0.0.1"  # one pin the environment does not have: a real failure
    vp.project(tmp_path, facts, PLATFORM, pins=pins)
    report = vp.run(tmp_path, facts, platform=PLATFORM)
    assert not report.ok
    return report


def test_the_tags_are_the_reports_key_facts(failed_report: Report, tmp_path: Path) -> None:
    t = tags(failed_report, tmp_path / "repro.toml")
    lock = tmp_path / f"requirements-rebuild-{PLATFORM}.txt"
    assert t["kernodeck.verdict"] == "FAILED"
    assert t["kernodeck.reference_id"] == "2026-12-02.1"
    assert t["kernodeck.platform"] == PLATFORM
    assert t["kernodeck.lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert t["kernodeck.torch"].startswith(failed_report.inventory["torch"]["version"])
    assert t["kernodeck.first_failure"].startswith("packages/") and "numpy" in t["kernodeck.first_failure"]
    assert all(len(v) <= TAG_LIMIT for v in t.values())


def test_an_ok_report_has_no_first_failure_tag() -> None:
    t = tags(Report(), Path("nowhere/repro.toml"))
    assert t == {"kernodeck.verdict": "OK"}


def test_an_unknown_tracker_is_a_usage_error_naming_the_known_ones() -> None:
    from kernodeck.errors import UsageError

    with pytest.raises(UsageError) as e:
        names(["mlflow,neptune"])
    assert "neptune" in str(e.value) and "mlflow, wandb" in (e.value.hint or "")
    assert names(["wandb", "mlflow,wandb"]) == ["wandb", "mlflow"]


@pytest.fixture
def mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps the file store behind this
    return uri


def test_mlflow_the_active_run_gets_the_reports_and_the_tags(
    failed_report: Report, tmp_path: Path, mlflow_store: str
) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    with mlflow.start_run() as run:
        lines = log_report(failed_report, ["mlflow"], manifest=tmp_path / "repro.toml")
        assert mlflow.active_run() is not None  # the user's run is left open
    assert lines == [f"logged to mlflow: run {run.info.run_id}, artifacts under kernodeck/"]
    client = MlflowClient(mlflow_store)
    got = client.get_run(run.info.run_id)
    assert got.data.tags["kernodeck.verdict"] == "FAILED"
    assert got.data.tags["kernodeck.platform"] == PLATFORM
    listed = sorted(Path(a.path).name for a in client.list_artifacts(run.info.run_id, "kernodeck"))
    assert listed == ["kernodeck-report.html", "kernodeck-report.json"]
    local = Path(
        client.download_artifacts(run.info.run_id, "kernodeck/kernodeck-report.json", str(tmp_path / "dl"))
    )
    assert Report.from_json(local.read_text()).summary() == failed_report.summary()


def test_mlflow_without_an_active_run_makes_one_and_ends_it(
    failed_report: Report, tmp_path: Path, mlflow_store: str
) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    log_report(failed_report, ["mlflow"], manifest=tmp_path / "repro.toml")
    assert mlflow.active_run() is None
    runs = MlflowClient(mlflow_store).search_runs(["0"])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.tags["kernodeck.first_failure"].startswith("packages/")


def test_wandb_offline_run_gets_the_artifact_summary_and_tag(
    failed_report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_DATA_DIR": str(tmp_path / "data"),
        "WANDB_CACHE_DIR": str(tmp_path / "cache"),
        "WANDB_CONFIG_DIR": str(tmp_path / "config"),
        "WANDB_SILENT": "true",
        "WANDB_PROJECT": "kernodeck-test",
    }.items():
        monkeypatch.setenv(k, v)
    lines = log_report(failed_report, ["wandb"], manifest=tmp_path / "repro.toml")
    assert lines[0].startswith("logged to wandb: run ")
    (log,) = sorted((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    recs = records(log)
    artifacts = [r.artifact for r in recs if r.WhichOneof("record_type") == "artifact"]
    assert len(artifacts) == 1 and artifacts[0].type == "kernodeck-report"
    files = {e.path: Path(e.local_path) for e in artifacts[0].manifest.contents}
    assert sorted(files) == ["kernodeck-report.html", "kernodeck-report.json"]
    assert Report.from_json(files["kernodeck-report.json"].read_text()).summary() == failed_report.summary()
    summary = {
        u.key: json.loads(u.value_json)
        for r in recs
        if r.WhichOneof("record_type") == "summary"
        for u in r.summary.update
    }
    assert summary["kernodeck.verdict"] == "FAILED" and summary["kernodeck.platform"] == PLATFORM
    run_tags = [list(r.run.tags) for r in recs if r.WhichOneof("record_type") == "run"]
    assert ["kernodeck:FAILED"] in run_tags


def test_cli_verify_log_to_mlflow_logs_a_real_verify(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "t"\nid = "t.1"\n[python]\n'
        f'version = "{sys.version_info[0]}.{sys.version_info[1]}"\n'
        '[[platform]]\nname = "linux-x86_64-cpu"\nos = "linux"\narch = "x86_64"\nbackend = "cpu"\n'
    )
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernodeck",
            "verify",
            str(tmp_path),
            "--python",
            sys.executable,
            "--only",
            "interpreter",
            "--log-to",
            "mlflow",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "logged to mlflow: run " in done.stderr
    tag = next((tmp_path / "mlruns" / "0").glob("*/tags/kernodeck.verdict"))
    assert tag.read_text() == "OK"


def test_cli_unknown_tracker_stops_before_verifying(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kernodeck", "verify", str(tmp_path / "missing"), "--log-to", "comet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.returncode == 2 and "unknown tracker 'comet'" in done.stderr and "Traceback" not in done.stderr
    )


def test_require_logs_before_it_raises(tmp_path: Path, mlflow_store: str) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    from kernodeck.api import require
    from kernodeck.errors import CheckFailed
    from kernodeck.probe.runner import FakeProbe

    facts = vp.load("h100_cu126")
    pins = {d["name"]: d["version"] for d in facts["distributions"] if d["name"] not in ("pip", "setuptools")}
    pins["numpy"] = "0.0.1"
    vp.project(tmp_path, facts, PLATFORM, pins=pins)
    with mlflow.start_run() as run, pytest.raises(CheckFailed):
        require(
            tmp_path / "repro.toml",
            probe=FakeProbe(facts),
            platform=PLATFORM,
            cache_dir=tmp_path / "c",
            log_to="mlflow",
        )
    assert MlflowClient(mlflow_store).get_run(run.info.run_id).data.tags["kernodeck.verdict"] == "FAILED"
