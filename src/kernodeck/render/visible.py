"""Text from a checked program made safe to show: control characters made visible, never emitted.

A checked application's stderr, a step name from a manifest or a path can hold ESC (terminal
escape sequences that recolour, retitle or rewrite the screen), NUL, BEL, carriage returns that
overwrite a line, or Unicode's invisible line and direction controls. Every renderer (terminal,
Markdown, GitHub annotations, JUnit, HTML, the fleet report) passes such text through `visible`
before writing it: each of those characters is shown as its escape (`\\x1b`, `\\x00`, `\\u202e`),
so a reader sees that it was there and nothing acts on it. A complete colour sequence
(`ESC [ 1;31 m`, as installers print them) only styles text and is dropped instead. The renderers'
own styling (the terminal's colours) is added after this, so it is never escaped.
"""

from __future__ import annotations

import re

#: C0 controls, DEL, C1 controls, and the Unicode line, paragraph and bidirectional controls
#: (a line separator ends a line for many readers; an override reverses what follows).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]")

#: A colour (SGR) sequence: styling only, dropped.
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")

#: What may stay as it is by default: a newline and a tab.
LINE_AND_TAB = "\n\t"


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = LINE_AND_TAB) -> str:
    """`text` with colour sequences dropped and every other control character except those in
    `keep` shown as its escape."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(
        lambda m: m.group(0) if m.group(0) in keep else _escape(m.group(0)), _COLOUR.sub("", text)
    )


def one_line(text: str) -> str:
    """`text` as one line: control characters visible, newlines and tabs as spaces."""
    return " ".join(visible(text, keep="\n\t").split())


__all__ = ["LINE_AND_TAB", "one_line", "visible"]
