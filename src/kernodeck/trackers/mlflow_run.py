"""The report as artifacts and tags of the active MLflow run (or of the run `MLFLOW_RUN_ID` names, or of a
new run when there is none: then it is ended again). The tracking URI is MLflow's own setting."""

from __future__ import annotations

from pathlib import Path

import mlflow

from kernodeck.report import Report

ARTIFACT_PATH = "kernodeck"


def log(report: Report, files: list[Path], tags: dict[str, str]) -> str:
    active = mlflow.active_run()
    run = active or mlflow.start_run(run_name=f"kernodeck {report.kind}")
    try:
        mlflow.set_tags(tags)
        for f in files:
            mlflow.log_artifact(str(f), artifact_path=ARTIFACT_PATH)
        return f"run {run.info.run_id}, artifacts under {ARTIFACT_PATH}/"
    finally:
        if active is None:
            mlflow.end_run()
