"""The report as an artifact, summary values and tags of the active Weights & Biases run (or of a run
`wandb.init` starts from the W&B settings, WANDB_RUN_ID and WANDB_MODE included, then finished)."""

from __future__ import annotations

from pathlib import Path

import wandb

from kernodeck.report import Report

ARTIFACT_TYPE = "kernodeck-report"


def log(report: Report, files: list[Path], tags: dict[str, str]) -> str:
    active = wandb.run
    run = active or wandb.init(job_type=f"kernodeck-{report.kind}")
    try:
        artifact = wandb.Artifact(f"kernodeck-{report.kind}-report", type=ARTIFACT_TYPE, metadata=tags)
        for f in files:
            artifact.add_file(str(f))
        run.log_artifact(artifact)
        run.summary.update(tags)
        kept = [t for t in (run.tags or ()) if not t.startswith("kernodeck:")]
        run.tags = (*kept, f"kernodeck:{tags['kernodeck.verdict']}")
        return f"run {run.id}, artifact {artifact.name}"
    finally:
        if active is None:
            run.finish()
