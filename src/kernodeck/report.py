"""Step and Report: what verify, check and rebuild say, as data, as JSON and for people.

A Step is one thing that was checked: its layer, status, what was expected and observed, and for
a failure its first error and a hint. A Report is the ordered list of steps plus the observed
inventory, so that two reports can be compared (`kernodeck diff`).
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from kernodeck.fsio import atomic_write_text
from kernodeck.layers import Layer

REPORT_SCHEMA = "kernodeck-report/1"


class Status(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    WARNING = "warning"


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")

    layer: Layer
    name: str
    status: Status
    expected: Any = None
    observed: Any = None
    error: str | None = None
    hint: str | None = None
    required: bool = True
    details: dict[str, Any] = Field(default_factory=dict)
    seconds: float | None = None

    @classmethod
    def passed(cls, layer: Layer | str, name: str, **kw: Any) -> Step:
        return cls(layer=layer, name=name, status=Status.PASSED, **kw)

    @classmethod
    def failed(cls, layer: Layer | str, name: str, error: str, **kw: Any) -> Step:
        return cls(layer=layer, name=name, status=Status.FAILED, error=error, **kw)

    @classmethod
    def skipped(cls, layer: Layer | str, name: str, why: str, **kw: Any) -> Step:
        return cls(layer=layer, name=name, status=Status.SKIPPED, error=why, **kw)

    @classmethod
    def warning(cls, layer: Layer | str, name: str, error: str, **kw: Any) -> Step:
        return cls(layer=layer, name=name, status=Status.WARNING, error=error, **kw)


class CheckedInterpreter(BaseModel):
    """The interpreter a report looked at and why it was chosen (see kernodeck.interpreters)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    source: str
    reason: str


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(default=REPORT_SCHEMA, alias="schema")
    kind: str = "verify"
    manifest: str | None = None
    reference_id: str | None = None
    platform: str | None = None
    interpreter: CheckedInterpreter | None = None
    #: Said once, at the top, before the tables (e.g. "this is probably not the project's environment").
    notices: list[str] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    inventory: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)

    def add(self, *steps: Step) -> None:
        self.steps.extend(steps)

    def failed_layers(self) -> list[str]:
        return list(dict.fromkeys(s.layer for s in self.steps if s.status is Status.FAILED and s.required))

    @property
    def ok(self) -> bool:
        return not any(s.status is Status.FAILED and s.required for s in self.steps)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Status}
        for step in self.steps:
            out[step.status.value] += 1
        return out

    def summary(self) -> str:
        c = self.counts()
        verdict = "OK" if self.ok else "FAILED"
        line = f"{verdict}: {c['passed']} passed, {c['failed']} failed, {c['warning']} warnings, {c['skipped']} skipped"
        first = next((s for s in self.steps if s.status is Status.FAILED and s.required), None)
        if first is not None:
            line += f"; first failure: {first.layer}/{first.name}: {first.error}"
        return line

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls.model_validate(json.loads(text))

    def write_json(self, path: str | Path) -> None:
        atomic_write_text(Path(path), self.to_json())


_STYLE = {
    Status.PASSED: ("✓ passed", "green"),
    Status.FAILED: ("✗ failed", "bold red"),
    Status.WARNING: ("! warning", "yellow"),
    Status.SKIPPED: ("- skipped", "dim"),
}


def _cell(value: Any, limit: int = 70) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        text = ", ".join(_cell(v, limit) for v in value)
    elif isinstance(value, dict):
        text = ", ".join(f"{k}={_cell(v, limit)}" for k, v in value.items())
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(
    report: Report, file: IO[str] | None = None, *, color: bool | None = None, width: int | None = None
) -> None:
    """Print the human report: the interpreter looked at and why, the notices, one table per
    layer (one line for a layer skipped for one reason), then one summary line.

    Colours only on a terminal, never with NO_COLOR set (or `color=False`).
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    out = file if file is not None else sys.stdout
    is_tty = bool(getattr(out, "isatty", lambda: False)())
    # https://no-color.org: NO_COLOR counts when it is set to a non-empty value
    no_color = color is False or bool(os.environ.get("NO_COLOR")) or (color is None and not is_tty)
    console = Console(
        file=out,
        no_color=no_color,
        force_terminal=True if color else None,
        highlight=False,
        width=width or (None if is_tty else 140),
        color_system=None if no_color else "auto",
        emoji=False,
    )
    if report.interpreter is not None:
        console.print(Text(f"python: {report.interpreter.path} ({report.interpreter.reason})", style="bold"))
    for notice in report.notices:
        console.print(Text(f"! {notice}", style="bold yellow"))
    title = f"kernodeck {report.kind}"
    if report.manifest:
        title += f" {report.manifest}"
    if report.reference_id:
        title += f" (reference {report.reference_id})"
    if report.platform:
        title += f" on platform {report.platform}"
    console.print(Text(title, style="bold"))
    layers = list(dict.fromkeys(s.layer for s in report.steps))
    for layer in layers:
        steps = [s for s in report.steps if s.layer == layer]
        if all(s.status is Status.SKIPPED for s in steps) and len({s.error for s in steps}) == 1:
            # a layer skipped for one reason is one line, not a table
            many = f" ({len(steps)} steps)" if len(steps) > 1 else ""
            console.print(Text(f"{layer}: - skipped{many}: {steps[0].error}", style="dim"))
            continue
        table = Table(
            title=layer, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, expand=False
        )
        table.add_column("status", no_wrap=True)
        table.add_column("step", no_wrap=True)
        table.add_column("expected", overflow="fold")
        table.add_column("observed", overflow="fold")
        table.add_column("first error / hint", overflow="fold")
        for s in report.steps:
            if s.layer != layer:
                continue
            label, style = _STYLE[s.status]
            if not s.required and s.status is Status.FAILED:
                label += " (optional)"
            note = Text()
            if s.error:
                note.append(s.error, style=style if s.status is not Status.SKIPPED else "")
            if s.hint and s.status is not Status.PASSED:
                note.append(("\n" if s.error else "") + f"hint: {s.hint}", style="italic")
            table.add_row(
                Text(label, style=style), s.name, _cell(s.expected, 50), _cell(s.observed, 50), note
            )
        console.print(table)
    summary_style = "bold green" if report.ok else "bold red"
    console.print(Text(report.summary(), style=summary_style))


def write_json_report(report: Report, target: str) -> None:
    """`--json -` prints the JSON report on stdout; any other value is a file written atomically."""
    if target == "-":
        sys.stdout.write(report.to_json())
        sys.stdout.flush()
    else:
        report.write_json(target)
