"""Step and Report: what verify, check and rebuild say, as data, as JSON and for people.

A Step is one thing that was checked: its layer, status, what was expected and observed, and for
a failure its first error and a hint. A Report is the ordered list of steps plus the observed
inventory, so that two reports can be compared (`kernodeck diff`).
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from kernodeck.layers import Layer
from kernodeck.manifest.model import Field, Model
from kernodeck.support.fsio import atomic_write_text, write_text_or_stdout

REPORT_SCHEMA = "kernodeck-report/1"


class Status(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    WARNING = "warning"


class Step(Model):
    model_config = {"extra": "forbid"}

    layer: Layer
    name: str
    status: Status
    expected: Any = None
    observed: Any = None
    error: str | None = None
    hint: str | None = None
    required: bool = True
    details: dict[str, Any] = {}
    seconds: float | None = None

    @classmethod
    def passed(cls, layer: Layer | str, name: str, **kw: Any) -> Step:
        return cls(layer=Layer(layer), name=name, status=Status.PASSED, **kw)

    @classmethod
    def failed(cls, layer: Layer | str, name: str, error: str, **kw: Any) -> Step:
        return cls(layer=Layer(layer), name=name, status=Status.FAILED, error=error, **kw)

    @classmethod
    def skipped(cls, layer: Layer | str, name: str, why: str, **kw: Any) -> Step:
        return cls(layer=Layer(layer), name=name, status=Status.SKIPPED, error=why, **kw)

    @classmethod
    def warning(cls, layer: Layer | str, name: str, error: str, **kw: Any) -> Step:
        return cls(layer=Layer(layer), name=name, status=Status.WARNING, error=error, **kw)


class CheckedInterpreter(Model):
    """The interpreter a report looked at and why it was chosen (see kernodeck.interpreters)."""

    model_config = {"extra": "forbid"}

    path: str
    source: str
    reason: str


class Report(Model):
    model_config = {"extra": "forbid"}

    schema_: Annotated[str, Field(alias="schema")] = REPORT_SCHEMA
    kind: str = "verify"
    manifest: str | None = None
    reference_id: str | None = None
    platform: str | None = None
    #: Why `platform` was chosen (`platforms.choose`'s reason: "named with --platform", "the only
    #: platform in the manifest", "matches this linux x86_64 machine ..."); None when none was.
    platform_reason: str | None = None
    interpreter: CheckedInterpreter | None = None
    #: Said once, at the top, before the tables (e.g. "this is probably not the project's environment").
    notices: list[str] = []
    steps: list[Step] = []
    inventory: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    #: Why the run was refused as bad input before it changed anything (exit 2), e.g. an
    #: interpreter that does not satisfy [python]; None for a run that went ahead.
    refused: str | None = None

    def add(self, *steps: Step) -> None:
        self.steps.extend(steps)

    def failed_layers(self) -> list[str]:
        return list(dict.fromkeys(s.layer for s in self.steps if s.status is Status.FAILED and s.required))

    @property
    def ok(self) -> bool:
        return not any(s.status is Status.FAILED and s.required for s in self.steps)

    @property
    def exit_code(self) -> int:
        """2 when the run was refused as bad input, else 0 when every required step passed, else 1."""
        from kernodeck.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE

        if self.refused is not None:
            return EXIT_USAGE
        return EXIT_OK if self.ok else EXIT_FAILED

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


def write_json_report(report: Report, target: str) -> None:
    """`--json -` prints the JSON report on stdout; any other value is a file written atomically."""
    write_text_or_stdout(target, report.to_json())
