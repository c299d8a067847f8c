"""Git merge conflict markers left in a text file (`<<<<<<<` ... `=======` ... `>>>>>>>`): two
teammates edited the same lines and the merge stopped there. One owner for finding them, so
repro.toml, pyproject.toml, the requirements files a manifest reads and the lock files written
by `kernodeck lock` all say the same thing about them.

Lock files are written by kernodeck and resolved again (see `kernodeck.lockfile.read`); files a
person writes get a located error with `conflict_issue`, since only a person can say which side
is meant."""

from __future__ import annotations

import re

from kernodeck.errors import Issue

_OPEN, _CLOSE = "<" * 7, ">" * 7
_MARK = re.compile(r"(<{7}|={7}|>{7}|\|{7})(?: |$)")


def conflict_regions(lines: list[str]) -> list[tuple[int, int]]:
    """The 1-based (first, last) line numbers of each git merge conflict (`<<<<<<<` through
    `>>>>>>>`, or the end of the file when it is not closed)."""
    out: list[tuple[int, int]] = []
    opened: int | None = None
    for number, raw in enumerate(lines, start=1):
        if opened is None and raw.startswith(_OPEN) and _MARK.match(raw):
            opened = number
        elif opened is not None and raw.startswith(_CLOSE) and _MARK.match(raw):
            out.append((opened, number))
            opened = None
    if opened is not None:
        out.append((opened, len(lines)))
    return out


def blank_conflicts(lines: list[str], regions: list[tuple[int, int]]) -> list[str]:
    """`lines` with each conflict's lines (markers and both sides) made empty: line numbers stay,
    neither side is taken."""
    out = list(lines)
    for a, b in regions:
        out[a - 1 : b] = [""] * (b - a + 1)
    return out


def regions_text(regions: list[tuple[int, int]]) -> str:
    """`lines 3-9, lines 20-24`."""
    return ", ".join(f"lines {a}-{b}" for a, b in regions)


def conflict_issue(text: str, filename: str) -> Issue | None:
    """The error for a hand-written file left with conflict markers, at its first marker; None
    when it has none."""
    lines = text.splitlines()
    regions = conflict_regions(lines)
    if not regions:
        return None
    first = regions[0][0]
    return Issue(
        filename,
        "",
        f"git merge conflict markers ({regions_text(regions)}): the file was merged with conflicts",
        line=first,
        excerpt=[f"  {first:>4} | {lines[first - 1]}"],
        hint="keep the lines each side should keep, delete the <<<<<<<, ======= and >>>>>>> lines, "
        "then run the command again",
    )
