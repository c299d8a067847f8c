"""Step and Report: what verify, check and rebuild say, as data, as JSON and for people.

A Step is one thing that was checked: its layer, status, what was expected and observed (facts),
what was measured on the way (timings, errors of a computation, throughputs: measurements, shown
and never compared), and for a failure its first error and a hint. A Report is the ordered list of steps plus the observed
inventory, so that two reports can be compared (`kernodeck diff`).
"""

from __future__ import annotations

import json
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from kernodeck.layers import Layer
from kernodeck.layers.causes import StepKind, step_kind, step_subject
from kernodeck.manifest.model import Field, Model
from kernodeck.support.fsio import atomic_write_text, write_text_or_stdout

REPORT_SCHEMA = "kernodeck-report/1"


class Status(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    WARNING = "warning"


class Where(Model):
    """Where the cause of a step is written: the manifest entry it checks, the pin's line in the
    lock file, the data file itself. `file` is relative to the manifest's folder ('/'-separated,
    never a host path); GitHub annotations point there (`kernodeck.render.github`)."""

    model_config = {"extra": "forbid"}

    file: str
    """The file, relative to the manifest's folder."""
    line: int | None = None
    """The first line (1-based); null for the whole file."""
    end_line: int | None = None
    """The last line of a multi-line entry (an `[[array]]` entry's table); null for one line."""


class Step(Model):
    """One thing that was checked."""

    model_config = {"extra": "forbid"}

    layer: Layer
    """The layer it belongs to (`kernodeck.layers.Layer`)."""
    name: str
    """Its name within the layer: "revision", "pin:torch", "data:samples", "compute"."""
    status: Status
    """passed, failed, skipped or warning; a failed step with `required` fails the report."""
    expected: Any = None
    """What the manifest or the lock asks for (a fact)."""
    observed: Any = None
    """What was found (a fact: `kernodeck diff` and the fleet compare it)."""
    error: str | None = None
    """For a failure or a warning: what is wrong; for a skipped step: why it did not run."""
    hint: str | None = None
    """What to do about it."""
    required: bool = True
    """Whether a failure fails the report (false: an optional check)."""
    details: dict[str, Any] = {}
    """More about it; `cause` (a `kernodeck.layers.causes.StepCause` value) says why it failed, warned
    or was skipped."""
    seconds: float | None = None
    """How long it took (a measurement; reports written before `measurements` carry only this one)."""
    where: Where | None = None
    """The line that explains it (its manifest entry, lock-file pin or data file), if known."""
    kind: StepKind | None = None
    """What the step is, for the readers that pick steps out (`kernodeck.layers.causes.StepKind`):
    a pin, a RECORD check, the resume trajectory, a data entry; null for the other steps."""
    measurements: dict[str, float] = {}
    """Numbers measured while checking (milliseconds, relative errors, throughputs, memory): shown
    beside the facts, never compared as facts (`kernodeck diff` lists them side by side)."""

    def what(self) -> StepKind | None:
        """Its kind: `kind`, or for a report written before kinds, the kind its name implied."""
        return step_kind(str(self.layer), self.name, self.kind)

    @property
    def subject(self) -> str:
        """What a step of a kind is about: a pin's or RECORD step's package, a trajectory's metric."""
        return step_subject(self.name, self.details, self.what(), from_name=self.kind is None)

    def tagged(self, kind: StepKind, **about: str) -> Step:
        """The step with its kind declared (and what it is about: `package=`, `metric=`)."""
        self.kind = kind
        if about:
            self.details = {**self.details, **about}
        return self

    def measured(self) -> dict[str, float]:
        """Every measurement of the step, `seconds` included."""
        out = dict(self.measurements)
        if self.seconds is not None:
            out.setdefault("seconds", self.seconds)
        return out

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
    """Its path."""
    source: str
    """Where the choice came from (--python, VIRTUAL_ENV, CONDA_PREFIX, the project's .venv, this one)."""
    reason: str
    """The choice in words."""


class Report(Model):
    """What verify, check or rebuild found: the steps in order, and the observed inventory."""

    model_config = {"extra": "forbid"}

    schema_: Annotated[str, Field(alias="schema")] = REPORT_SCHEMA
    """The report format and its version."""
    kind: str = "verify"
    """verify, check, rebuild or doctor."""
    manifest: str | None = None
    """The manifest's file name."""
    reference_id: str | None = None
    """The manifest's `[reference] id`."""
    platform: str | None = None
    """The `[[platform]]` checked."""
    platform_reason: str | None = None
    """Why `platform` was chosen ("named with --platform", "the only platform in the manifest",
    "matches this linux x86_64 machine ..."); null when none was."""
    interpreter: CheckedInterpreter | None = None
    """The interpreter looked at, and why."""
    notices: list[str] = []
    """Said once, at the top, before the tables (e.g. "this is probably not the project's environment")."""
    steps: list[Step] = []
    """Every step, in the order the layers ran."""
    inventory: dict[str, Any] = {}
    """What the environment holds (interpreter, platform, distributions, system, torch): no host
    paths, sorted, comparable between reports."""
    settings: dict[str, Any] = {}
    """The options of the run (only, skip, strict, compute, platform)."""
    refused: str | None = None
    """Why the run was refused as bad input before it changed anything (exit 2), e.g. an
    interpreter that does not satisfy [python]; null for a run that went ahead."""
    #: How long the run took, a measurement: shown in the summary, never compared by `diff`.
    seconds: float | None = None

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

    def first_failure(self) -> Step | None:
        return next((s for s in self.steps if s.status is Status.FAILED and s.required), None)

    def duration_text(self) -> str:
        """' in 3.41s' when the run was timed, else ''."""
        return "" if self.seconds is None else f" in {self.seconds:.2f}s"

    def summary(self, width: int | None = None) -> str:
        """The summary every front end words the same way (the CLI's last line, require()'s
        CheckFailed, a bundle's result), pytest style: verdict, counts, the run's duration and the
        first failure, with its error when the line fits in `width`."""
        return " ".join(self.summary_lines(width))

    def summary_lines(self, width: int | None = None) -> list[str]:
        """The summary as one line when it fits in `width`, else the verdict with the counts and the
        duration, then the first failure with its (one-line) error, cut between words to the width
        (the report above has it in full), as pytest gives it."""
        verdict = "OK" if self.ok else "FAILED"
        counts = f"{verdict}: {counts_text(self.counts())}{self.duration_text()}"
        first = self.first_failure()
        if first is None:
            return [counts]
        where = f"first failure: {first.layer}/{first.name}"
        error = short_hashes(first.error or "").strip()
        if error and "\n" not in error:
            where = f"{where}: {error}"
        line = f"{counts}; {where}"
        if width is None or len(line) <= width:
            return [line]
        if len(where) > width:
            import textwrap

            where = textwrap.shorten(where, width, placeholder=" …")
        return [counts, where]

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls.model_validate(json.loads(text))

    def write_json(self, path: str | Path) -> None:
        atomic_write_text(Path(path), self.to_json())


SHORT_HASH = 12
#: A run of 32 or more lower-case hex digits (md5, sha1, sha256, sha512 ...) standing alone.
_HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{32,}(?![0-9A-Za-z])")


def short_hashes(text: str) -> str:
    """Hex digests shortened to their first 12 digits (a run of decimal digits is left alone)."""

    def cut(m: re.Match[str]) -> str:
        s = m.group(0)
        return s[:SHORT_HASH] if any(c in "abcdef" for c in s) else s

    return _HEX.sub(cut, text)


def counts_text(counts: dict[str, int]) -> str:
    """ "1 failed, 2 warnings, 12 passed": the counts that are not zero, failures first."""
    order = (("failed", "failed"), ("warning", "warning"), ("passed", "passed"), ("skipped", "skipped"))
    parts = []
    for key, word in order:
        n = counts.get(key, 0)
        if n:
            parts.append(f"{n} {word}{'s' if key == 'warning' and n != 1 else ''}")
    return ", ".join(parts) or "no steps"


def write_json_report(report: Report, target: str) -> None:
    """`--json -` prints the JSON report on stdout; any other value is a file written atomically."""
    write_text_or_stdout(target, report.to_json())
