"""The proof attached to the run people already track: a verify report logged to an experiment tracker.

`kernodeck verify --log-to mlflow` and `require(..., log_to="mlflow")` hand the report to one module
per tracker (`mlflow_run`, `wandb_run`): the JSON report (and the HTML page when matplotlib is there)
as run artifacts, and the key facts (`tags`) as tags of the active run. Adding a tracker is one module
with `log(report, files, tags) -> str` and one row in `TRACKERS`. Each tracker is an optional extra;
its library is imported only when asked for.
"""

from __future__ import annotations

import hashlib
import importlib
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from kernodeck.errors import UsageError
from kernodeck.lockfile.names import requirements_path
from kernodeck.report import Report, Status

#: tracker name -> (module under kernodeck.trackers, the library it needs, Kernodeck's extra)
TRACKERS: dict[str, tuple[str, str, str]] = {
    "mlflow": ("mlflow_run", "mlflow", "mlflow"),
    "wandb": ("wandb_run", "wandb", "wandb"),
}

#: The longest tag value written (MLflow keeps 8,000 characters; W&B tags are short labels).
TAG_LIMIT = 250


class Tracker(Protocol):
    def log(self, report: Report, files: list[Path], tags: dict[str, str]) -> str: ...


def names(values: Iterable[str]) -> list[str]:
    """The trackers asked for, checked (a UsageError names the known ones)."""
    out: list[str] = []
    for v in values:
        for name in (p.strip().lower() for p in v.split(",")):
            if not name:
                continue
            if name not in TRACKERS:
                raise UsageError(
                    f"unknown tracker {name!r} for --log-to",
                    hint="trackers: " + ", ".join(sorted(TRACKERS)),
                )
            if name not in out:
                out.append(name)
    return out


def tags(report: Report, manifest: Path | None = None) -> dict[str, str]:
    """The key facts of a report as tags: verdict, reference id, platform, lock digest, torch build,
    first failure (absent facts are left out, never written as "None")."""
    out = {"kernodeck.verdict": "OK" if report.ok else "FAILED"}
    if report.reference_id:
        out["kernodeck.reference_id"] = report.reference_id
    if report.platform:
        out["kernodeck.platform"] = report.platform
        folder = (manifest or Path(report.manifest or "repro.toml")).parent
        lock = requirements_path(folder, report.platform)
        if lock.is_file():
            out["kernodeck.lock_sha256"] = hashlib.sha256(lock.read_bytes()).hexdigest()
    torch = report.inventory.get("torch") or {}
    if torch.get("version"):
        build = torch.get("build_kind") or ""
        out["kernodeck.torch"] = f"{torch['version']} ({build})" if build else str(torch["version"])
    first = next((s for s in report.steps if s.status is Status.FAILED and s.required), None)
    if first is not None:
        out["kernodeck.first_failure"] = _short(f"{first.layer}/{first.name}: {first.error}")
    return out


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TAG_LIMIT else text[: TAG_LIMIT - 3] + "..."


def _tracker(name: str) -> Tracker:
    module, library, extra = TRACKERS[name]
    from kernodeck.support.httpmods import let_back

    let_back()  # the `kernodeck` process marks anyio and friends unused; a tracker's client runs them
    try:
        importlib.import_module(library)
    except ImportError:
        from kernodeck.interpreters import add_extra_hint

        raise UsageError(
            f"--log-to {name} needs {library} in Kernodeck's environment", hint=add_extra_hint(extra)
        ) from None
    tracker: Tracker = importlib.import_module(f"kernodeck.trackers.{module}")
    return tracker


def available(to: Iterable[str]) -> list[tuple[str, Tracker]]:
    """The trackers `to` names, each library imported: a UsageError (exit 2) for an unknown name or a
    missing library, before anything was verified or logged."""
    return [(name, _tracker(name)) for name in names(to)]


def log_report(report: Report, to: Iterable[str], *, manifest: Path | None = None) -> list[str]:
    """Log `report` to each tracker in `to`; returns one line per tracker saying where it went.
    The files are written to a temporary folder the trackers copy from."""
    trackers = available(to)
    facts = tags(report, manifest)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kernodeck-log-") as tmp:
        files = _report_files(report, Path(tmp))
        for name, tracker in trackers:
            lines.append(f"logged to {name}: {tracker.log(report, files, facts)}")
    return lines


def _report_files(report: Report, folder: Path) -> list[Path]:
    json_path = folder / "kernodeck-report.json"
    json_path.write_text(report.to_json(), encoding="utf-8")
    files = [json_path]
    try:
        from kernodeck.render.html import html_report

        html = html_report(report, charts_optional=True)
    except UsageError:  # pragma: no cover - charts_optional leaves them out instead
        return files
    html_path = folder / "kernodeck-report.html"
    html_path.write_text(html, encoding="utf-8")
    files.append(html_path)
    return files
