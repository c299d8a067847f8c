"""The HTML diagnosis (placeholder until the full page lands)."""

from __future__ import annotations

import html
from pathlib import Path

from kernodeck.fsio import atomic_write_text
from kernodeck.report import Report


def html_report(report: Report) -> str:
    return f"<!doctype html><title>kernodeck {html.escape(report.kind)}</title><pre>{html.escape(report.summary())}</pre>\n"


def write_html(report: Report, path: str | Path) -> None:
    atomic_write_text(Path(path), html_report(report))
