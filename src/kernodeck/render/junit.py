"""JUnit XML from a report (`--junit FILE`), in the structure Jenkins, GitLab and the GitHub
test-report actions read: one `<testsuite>` per layer, one `<testcase>` per step.

- a failed step is a `<failure>` whose message is its first error and whose text holds the
  expected and observed values, the error, the hint and the details (whole hashes); a long
  series (a trajectory, an output's rows) is summarised by its length, first, last, min and
  max, the values themselves stay in the JSON report;
- a skipped step is `<skipped>` with the reason as its message;
- a warning passes, with the warning in the test case's `<system-out>`;
- every step's `time` is its own (verify times every layer, its probe stage included, and
  gives each step its share where the step has no time of its own: `layers.run.timed`).

Test cases are stable across outcomes: a layer that is not run lists the steps it reports when
it runs (`layers.run.planned_names`), each `<skipped>` with the reason, so a dashboard that
trends the counts sees the same number of test cases whether a run passes or fails.

The counts of every suite and of the whole file (skipped included) are the report's. No
timestamps or host names: the same report always gives the same bytes.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from kernodeck.render.terminal import layers_of
from kernodeck.render.visible import visible
from kernodeck.report import Report, Status, Step
from kernodeck.support.fsio import atomic_write_text

# characters XML 1.0 cannot carry once control characters are visible (lone surrogates, U+FFFE)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    """Text XML can carry: colour codes dropped, control characters visible
    (`kernodeck.render.visible`), anything else XML cannot hold as '?'."""
    return _NOT_XML.sub("?", visible(text))


#: A value longer than this (as JSON) is summarised, not dumped.
MAX_VALUE_CHARS = 400
#: How many characters of a long string are kept.
KEEP_CHARS = 200


def _number_list(values: list[Any]) -> str | None:
    """'1200 values, first 0.5, last 0.1, min 0.1, max 0.9' for a list of numbers (None allowed)."""
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums or len(nums) + values.count(None) != len(values):
        return None
    text = f"{len(values)} values, first {values[0]}, last {values[-1]}, min {min(nums)}, max {max(nums)}"
    return text + (f", {values.count(None)} missing" if None in values else "")


def summarised(value: Any) -> str:
    """A value as one line of text; one longer than MAX_VALUE_CHARS as JSON is described instead
    (a series by its length and range, a table by its columns), never dumped."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    )
    if len(text) <= MAX_VALUE_CHARS:
        return text
    if isinstance(value, str):
        return value[:KEEP_CHARS] + f"… ({len(value)} characters)"
    if isinstance(value, list):
        return _number_list(value) or f"{len(value)} items (in full in the JSON report)"
    if isinstance(value, dict):
        parts = [f"{k}: {_short(v)}" for k, v in sorted(value.items())]
        return "{" + "; ".join(parts) + "}"
    return text[:KEEP_CHARS] + "…"


def _short(value: Any) -> str:
    if isinstance(value, list):
        return _number_list(value) or f"{len(value)} items"
    if isinstance(value, dict):
        return f"{len(value)} keys"
    return summarised(value)


def step_text(step: Step) -> str:
    """Everything a reader needs about a step, one field a line, values in full."""
    lines = []
    for label, value in (
        ("expected", step.expected),
        ("observed", step.observed),
        ("error", step.error),
        ("hint", step.hint),
    ):
        if value is not None and value != "":
            lines.append(f"{label}: {summarised(value)}")
    if not step.required:
        lines.append("required: false")
    for key, value in step.details.items():
        lines.append(f"{key}: {summarised(value)}")
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def junit_xml(report: Report) -> str:
    """The report as a JUnit XML document."""
    kind = report.kind or "report"
    root = ET.Element("testsuites", {"name": f"kernodeck {kind}"})
    total = {"tests": 0, "failures": 0, "skipped": 0, "time": 0.0}
    for layer in layers_of(report):
        steps = [s for s in report.steps if str(s.layer) == layer]
        failures = sum(s.status is Status.FAILED for s in steps)
        skipped = sum(s.status is Status.SKIPPED for s in steps)
        time = sum(s.seconds or 0.0 for s in steps)
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": layer,
                "tests": str(len(steps)),
                "failures": str(failures),
                "errors": "0",
                "skipped": str(skipped),
                "time": _seconds(time),
                "package": f"kernodeck.{kind}",
            },
        )
        for s in steps:
            attrs = {"name": _clean(s.name), "classname": f"kernodeck.{kind}.{layer}"}
            if s.seconds is not None:
                attrs["time"] = _seconds(s.seconds)
            case = ET.SubElement(suite, "testcase", attrs)
            text = _clean(step_text(s))
            if s.status is Status.FAILED:
                failure = ET.SubElement(
                    case,
                    "failure",
                    {
                        "message": _clean(s.error or "failed"),
                        "type": "failed" if s.required else "failed (optional)",
                    },
                )
                failure.text = text
            elif s.status is Status.SKIPPED:
                ET.SubElement(case, "skipped", {"message": _clean(s.error or "skipped")})
            elif s.status is Status.WARNING:
                out = ET.SubElement(case, "system-out")
                out.text = "warning: " + text
        total["tests"] += len(steps)
        total["failures"] += failures
        total["skipped"] += skipped
        total["time"] += time
    root.set("tests", str(total["tests"]))
    root.set("failures", str(total["failures"]))
    root.set("errors", "0")
    root.set("skipped", str(total["skipped"]))
    root.set("time", _seconds(float(total["time"])))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(report: Report, path: str | Path) -> None:
    atomic_write_text(Path(path), junit_xml(report))


__all__ = ["junit_xml", "step_text", "summarised", "write_junit"]
