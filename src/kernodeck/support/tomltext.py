"""TOML text a person wrote (repro.toml, pyproject.toml) parsed, or a located ManifestError: the
file, line and column of a syntax error with the offending line and a caret; a file left with
git merge conflict markers says so at the first marker (see `kernodeck.support.conflicts`)."""

from __future__ import annotations

import re
import sys
from typing import Any

from kernodeck.errors import Issue, ManifestError
from kernodeck.support.conflicts import conflict_issue

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["parse_toml", "tomllib", "too_deep"]

_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")
_EXCERPT_WIDTH = 120


def parse_toml(text: str, filename: str = "repro.toml") -> dict[str, Any]:
    """Parse TOML text; a syntax error becomes a located ManifestError (a merge conflict's
    markers, when the file has them, rather than the parser's first complaint about them)."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        line = too_deep(text)
        raise ManifestError(
            [
                Issue(
                    filename,
                    "",
                    f"TOML nested more than {MAX_DEPTH} levels deep (arrays or inline tables)",
                    line=line,
                )
            ]
        ) from None
    except tomllib.TOMLDecodeError as e:
        merged = conflict_issue(text, filename)  # markers inside a multi-line string parse: no error
        if merged is not None:
            raise ManifestError([merged]) from None
        msg = str(e)
        m = _TOML_POS.search(msg)
        line = col = None
        excerpt: list[str] = []
        if m is None and _TOML_EOF in msg:
            lines = text.splitlines() or [""]
            line, col = len(lines), len(lines[-1]) + 1
            src, caret = _window(lines[-1], col - 1)
            excerpt = [f"  {line:>4} | {src}", "       | " + " " * caret + "^"]
            msg = msg.replace(_TOML_EOF, "(at the end of the file)").strip()
        if m:
            line, col = int(m.group(1)), int(m.group(2))
            lines = text.splitlines()
            if 1 <= line <= len(lines):
                src, caret = _window(lines[line - 1], col - 1)
                excerpt = [f"  {line:>4} | {src}", "       | " + " " * caret + "^"]
            msg = _TOML_POS.sub("", msg).strip()
        raise ManifestError(
            [Issue(filename, "", f"TOML syntax error: {msg}", line=line, col=col, excerpt=excerpt)]
        ) from None


#: How deep arrays and inline tables may nest before the parser's recursion is not trusted.
MAX_DEPTH = 100
_TOML_EOF = "(at end of document)"


def too_deep(text: str) -> int | None:
    """The line where nesting first passes MAX_DEPTH (strings and comments aside), if found."""
    depth = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        code = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', "", line).split("#", 1)[0]
        for ch in code:
            depth += 1 if ch in "[{" else -1 if ch in "]}" else 0
            if depth > MAX_DEPTH:
                return lineno
    return None


def _window(src: str, col: int) -> tuple[str, int]:
    """A long source line cut to the part around `col` (0-based), and the caret's new column."""
    col = max(col, 0)
    if len(src) <= _EXCERPT_WIDTH:
        return src, col
    start = max(0, min(col - _EXCERPT_WIDTH // 2, len(src) - _EXCERPT_WIDTH))
    end = start + _EXCERPT_WIDTH
    head = "..." if start > 0 else ""
    tail = "..." if end < len(src) else ""
    return head + src[start:end] + tail, col - start + len(head)
