"""A Markdown summary of a report (`--markdown FILE`, GitHub's job summary).

The summary: the verdict with the run's duration, the first failure with its hint, a table of
the layers with their counts, and the failed steps with their first error; a hint several failed
steps share is written once, under "Hints", with the steps it is for. Hashes are shortened to 12 digits (the JSON
report keeps them whole).

Text from a checked program (errors, hints, step names, paths) is inert in the summary: control
characters are made visible, and the characters Markdown reads as raw HTML, an autolink, a link, an
image or an entity (`<`, `>`, `&`, `[`, `]`) are escaped with a backslash, with `\\` and `|` (so a
cell stays one cell). What GitHub Actions does with the summary is in `kernodeck.render.github`.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernodeck.render.terminal import first_failure, layer_counts, layers_of, shared_hints
from kernodeck.render.visible import one_line
from kernodeck.report import Report, Status, counts_text, short_hashes
from kernodeck.support.fsio import atomic_write_text

MAX_FAILED_ROWS = 50


#: What Markdown could read as markup in untrusted text: raw HTML and autolinks (`<`, `>`),
#: entities (`&`), links and images (`[`, `]`), a table's cell boundary (`|`), and the escape itself.
_MARKUP = re.compile(r"[\\|<>&\[\]]")


def _cell(text: str | None) -> str:
    """Untrusted text for one line or table cell: one line, control characters visible, markup
    escaped."""
    if not text:
        return ""
    return _MARKUP.sub(lambda m: "\\" + m.group(0), one_line(short_hashes(text)))


def _code(text: str) -> str:
    """Untrusted text as a code span (nothing inside one is markup but a table's `|`)."""
    return "`" + one_line(text).replace("`", "'").replace("|", "\\|") + "`"


def markdown_summary(report: Report) -> str:
    """The report as Markdown."""
    verdict = "OK" if report.ok else "FAILED"
    icon = "✅" if report.ok else "❌"
    out = [f"## {icon} kernodeck {_cell(report.kind)}: {verdict}", ""]
    out += _context(report)
    out += [f"**{counts_text(report.counts())}**{report.duration_text()}", ""]
    first = first_failure(report)
    if first is not None:
        out.append(f"**First failure:** {_code(f'{first.layer}/{first.name}')}: {_cell(first.error)}")
        if first.hint:
            out.append(f"<br>hint: {_cell(first.hint)}")
        out.append("")
    return "\n".join(out + _layer_table(report) + _failed_table(report)) + "\n"


def _context(report: Report) -> list[str]:
    """The manifest, reference and platform, the interpreter and the notices."""
    out = []
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
    return out


def _layer_status(c: dict[str, int]) -> str:
    if c["failed"]:
        return "❌ failed"
    if c["warning"]:
        return "⚠️ warning"
    return "✅ passed" if c["passed"] else "⏭️ skipped"


def _layer_table(report: Report) -> list[str]:
    out = ["| layer | status | passed | failed | warnings | skipped |", "|---|---|--:|--:|--:|--:|"]
    for layer in layers_of(report):
        c = layer_counts(s for s in report.steps if str(s.layer) == layer)
        out.append(
            f"| {_cell(layer)} | {_layer_status(c)} | {c['passed']} | {c['failed']} | {c['warning']} | {c['skipped']} |"
        )
    return [*out, ""]


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
        out.append(f"| {_cell(str(s.layer))} | {_cell(name)} | {_cell(s.error)} | {hint} |")
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


__all__ = ["markdown_summary", "write_markdown"]
