"""JUnit XML from a report (`--junit FILE`), in the structure Jenkins, GitLab and the GitHub
test-report actions read: one `<testsuite>` per layer, one `<testcase>` per step.

- a failed step is a `<failure>` whose message is its first error and whose text holds the
  expected and observed values, the error, the hint and the details in full (whole hashes);
- a skipped step is `<skipped>` with the reason as its message;
- a warning passes, with the warning in the test case's `<system-out>`.

The counts of every suite and of the whole file are the report's. No timestamps or host names:
the same report always gives the same bytes.
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


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


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
            lines.append(f"{label}: {_value(value)}")
    if not step.required:
        lines.append("required: false")
    for key, value in step.details.items():
        lines.append(f"{key}: {_value(value)}")
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def junit_xml(report: Report) -> str:
    """The report as a JUnit XML document."""
    kind = report.kind or "report"
    root = ET.Element("testsuites", {"name": f"kernodeck {kind}"})
    total = {"tests": 0, "failures": 0, "time": 0.0}
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
        total["time"] += time
    root.set("tests", str(total["tests"]))
    root.set("failures", str(total["failures"]))
    root.set("errors", "0")
    root.set("time", _seconds(float(total["time"])))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(report: Report, path: str | Path) -> None:
    atomic_write_text(Path(path), junit_xml(report))


__all__ = ["junit_xml", "step_text", "write_junit"]
