"""A Markdown summary of a report (`--markdown FILE`, GitHub's job summary) and GitHub Actions
annotations.

The summary: the verdict with the run's duration, the first failure with its hint, a table of
the layers with their counts, and the failed steps with their first error. A hint several failed
steps share is written once, under a "Hints" heading with the steps it is for. Hashes are shortened to 12 digits (the JSON
report keeps them whole).

Under GitHub Actions (`GITHUB_ACTIONS=true`) every failed step is also printed as an
`::error title=…::` workflow command (an optional one as `::warning`; a hint it shares with
earlier annotations is given on the first of them only), and the summary is
appended to the file `$GITHUB_STEP_SUMMARY` names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from kernodeck.render.terminal import (
    counts_text,
    first_failure,
    layer_counts,
    layers_of,
    shared_hints,
    short_hashes,
)
from kernodeck.report import Report, Status
from kernodeck.support.fsio import atomic_write_text

MAX_FAILED_ROWS = 50


def _cell(text: str | None) -> str:
    """Text for one table cell: one line, pipes escaped."""
    if not text:
        return ""
    flat = " ".join(short_hashes(text).split())
    return flat.replace("\\", "\\\\").replace("|", "\\|")


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def markdown_summary(report: Report) -> str:
    """The report as Markdown."""
    verdict = "OK" if report.ok else "FAILED"
    icon = "✅" if report.ok else "❌"
    out = [f"## {icon} kernodeck {report.kind}: {verdict}", ""]
    facts = [
        f"{label} {_code(value)}"
        for label, value in (
            ("manifest", report.manifest),
            ("reference", report.reference_id),
            ("platform", report.platform),
        )
        if value
    ]
    if facts:
        out += [" · ".join(facts), ""]
    if report.interpreter is not None:
        out += [f"python: {_code(report.interpreter.path)} ({_cell(report.interpreter.reason)})", ""]
    if report.platform and report.platform_reason:
        out += [f"platform: {_code(report.platform)} ({_cell(report.platform_reason)})", ""]
    out += [f"> ⚠️ {_cell(n)}" for n in report.notices] + ([""] if report.notices else [])
    out += [f"**{counts_text(report.counts())}**{report.duration_text()}", ""]
    first = first_failure(report)
    if first is not None:
        out.append(f"**First failure:** {_code(f'{first.layer}/{first.name}')}: {_cell(first.error)}")
        if first.hint:
            out.append(f"<br>hint: {_cell(first.hint)}")
        out.append("")
    out += ["| layer | status | passed | failed | warnings | skipped |", "|---|---|--:|--:|--:|--:|"]
    for layer in layers_of(report):
        steps = [s for s in report.steps if str(s.layer) == layer]
        c = layer_counts(steps)
        status = "❌ failed" if c["failed"] else ("⚠️ warning" if c["warning"] else "✅ passed")
        if not c["failed"] and not c["warning"] and not c["passed"]:
            status = "⏭️ skipped"
        out.append(
            f"| {layer} | {status} | {c['passed']} | {c['failed']} | {c['warning']} | {c['skipped']} |"
        )
    out.append("")
    return "\n".join(out + _failed_table(report)) + "\n"


def _failed_table(report: Report) -> list[str]:
    """The failed steps with their first error; a hint they share once, under "Hints"."""
    failed = [s for s in report.steps if s.status is Status.FAILED]
    if not failed:
        return []
    shared = shared_hints(failed)
    numbers = {hint: i for i, hint in enumerate(shared, 1)}
    out = ["### Failed steps", "", "| layer | step | first error | hint |", "|---|---|---|---|"]
    for s in failed[:MAX_FAILED_ROWS]:
        name = s.name + ("" if s.required else " (optional)")
        hint = f"hint {numbers[s.hint]} below" if s.hint in numbers else _cell(s.hint)
        out.append(f"| {s.layer} | {_cell(name)} | {_cell(s.error)} | {hint} |")
    if len(failed) > MAX_FAILED_ROWS:
        out.append(f"\n… and {len(failed) - MAX_FAILED_ROWS} more (see the JSON report)")
    out.append("")
    if shared:
        out += ["### Hints", ""]
        for hint, group in shared.items():
            steps = ", ".join(_code(f"{s.layer}/{s.name}") for s in group)
            out.append(f"{numbers[hint]}. {_cell(hint)}<br>for {steps}")
        out.append("")
    return out


def write_markdown(report: Report, path: str | Path) -> None:
    atomic_write_text(Path(path), markdown_summary(report))


# --- GitHub Actions ---------------------------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(report: Report) -> list[str]:
    """`::error title=…::message` for every failed step (`::warning` for an optional one)."""
    out = []
    hinted: dict[str, str] = {}  # hint -> the step whose annotation gave it
    for s in report.steps:
        if s.status is not Status.FAILED:
            continue
        level = "error" if s.required else "warning"
        title = f"kernodeck {report.kind}: {s.layer}/{s.name}"
        message = short_hashes(s.error or "failed")
        if s.hint in hinted:
            message += f"\nhint: as for {hinted[s.hint]}"
        elif s.hint:
            message += f"\nhint: {short_hashes(s.hint)}"
            hinted[s.hint] = f"{s.layer}/{s.name}"
        out.append(f"::{level} title={_escape_property(title)}::{_escape_data(message)}")
    return out


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (env if env is not None else os.environ).get("GITHUB_ACTIONS") == "true"


def github_outputs(report: Report, stream: IO[str], env: Mapping[str, str] | None = None) -> None:
    """Under GitHub Actions: the annotations on `stream`, the summary appended to
    $GITHUB_STEP_SUMMARY. Elsewhere nothing."""
    environ = env if env is not None else os.environ
    if not in_github_actions(environ):
        return
    lines = github_annotations(report)
    if lines:
        stream.write("\n".join(lines) + "\n")
        stream.flush()
    target = environ.get("GITHUB_STEP_SUMMARY")
    if target:
        path = Path(target)
        try:
            before = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            before = ""
        sep = "\n" if before and not before.endswith("\n") else ""
        atomic_write_text(path, before + sep + markdown_summary(report))


__all__ = ["github_annotations", "github_outputs", "in_github_actions", "markdown_summary", "write_markdown"]
