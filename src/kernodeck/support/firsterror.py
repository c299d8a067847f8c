"""The first error of a traceback or of a program's stderr: the one owner of that rule.

Used for every Python process Kernodeck runs and summarises in one line: the environment and torch
probes (kernodeck.probe.runner) and the application checks (kernodeck.checks.runner). Installer
output (pip, uv) has rules of its own in kernodeck.handover.installer_errors.

The rule, in order of the text (the first match wins, so the root cause of a chain of exceptions
is named, not the exception raised while handling it, nor the noise printed at exit):

- a `Traceback (most recent call last):` names the exception line that closes it;
- an exception group's traceback (drawn with `|` and `+`) names its first leaf exception, or the
  group's own line when no leaf names an error;
- a C++ `terminate called after throwing an instance of 'T'` names `T: <what()>`;
- a line `SomethingError: ...` (also `...Exception`, `...Exit`, `...Interrupt`, `...Fault`, dotted
  names like `torch.OutOfMemoryError`), a SyntaxError report without a traceback header;
- a line starting `error:`, `error `, `fatal:`, `Fatal Python error`, `Segmentation fault`, `Killed`.

Warnings (`UserWarning: ...`) are not errors. With `fallback=True` a text with none of these gives
its last non-empty line (a process that failed and said something else).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["first_error"]

_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Fault)(?::.*)?$"
)
_GROUP_HEADER = re.compile(r"^[|+\s]*Exception Group Traceback \(most recent call last\)")
_GROUP_DECORATION = re.compile(r"^[\s|+]*")
_GROUP_SUMMARY = re.compile(r"\(\d+ sub-exceptions?\)$")
_TERMINATE = re.compile(r"^terminate called after throwing an instance of '([^']+)'")
_WHAT = re.compile(r"^\s*what\(\):\s*(.*)$")
_ERROR_PREFIXES = ("error:", "error ", "fatal python error", "fatal:", "segmentation fault", "killed")


def first_error(text: str, *, fallback: bool = False) -> str | None:
    """The first error line of `text` (see the module docstring); None when there is none, or the
    last non-empty line with `fallback=True`."""
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            continue
        if _GROUP_HEADER.match(line):
            return _first_group_error(lines[i + 1 :]) or line
        if line.startswith("Traceback (most recent call last)"):
            return _closing_line(lines[i + 1 :]) or line
        m = _TERMINATE.match(line)
        if m:
            return _what(m.group(1), lines[i + 1 :])
        if _ERROR_LINE.match(line) or line.lower().startswith(_ERROR_PREFIXES):
            return line
    return _last_line(lines) if fallback else None


def _closing_line(lines: Sequence[str]) -> str | None:
    """The exception line that closes a traceback: its first line at column 0."""
    for later in lines:
        if later.strip() and not later[:1].isspace() and not later.startswith("Traceback"):
            return later.strip()
    return None


def _what(kind: str, lines: Sequence[str]) -> str:
    for later in lines[:3]:
        m = _WHAT.match(later)
        if m and m.group(1).strip():
            return f"{kind}: {m.group(1).strip()}"
    return f"terminate called after throwing an instance of '{kind}'"


def _first_group_error(lines: Sequence[str]) -> str | None:
    """The first leaf exception of an exception group's traceback, or the group's own line when no
    leaf names an error."""
    group: str | None = None
    for raw in lines:
        line = _GROUP_DECORATION.sub("", raw).strip()
        if _GROUP_SUMMARY.search(line) and ":" in line:
            group = group or line
        elif _ERROR_LINE.match(line):
            return line
    return group


def _last_line(lines: Sequence[str]) -> str | None:
    for line in reversed(lines):
        if line.strip():
            return line.strip()
    return None
