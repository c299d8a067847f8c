"""Whether one index file can be locked for one target: `Accepted(rank)` or `Rejected(reason)`.

Checks, in order: the filename, yanked (PEP 592: only an exact pin may take a yanked file), the
upload time against exclude-newer (a file without an upload time cannot be judged and passes), the
file's requires-python against the target's Python, and the wheel tags (or, for an sdist, whether
the project is allowed as a source distribution). Wheels rank by their best tag for the target;
sdists rank after every wheel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from kernodeck.index.models import IndexFile, parse_filename
from kernodeck.targets import Target


@dataclass(frozen=True)
class Accepted:
    file: IndexFile
    version: Version
    rank: int  # lower is better: the wheel's best tag rank; sdists rank after every wheel


class Rejected:
    """A file that cannot be locked for a target, and why: `reason`, given as text or as a
    function that words it when asked. A lock rejects thousands of files (every other platform's
    wheels) and words only the few that a failure's message names."""

    __slots__ = ("_reason", "file")

    def __init__(self, file: IndexFile, reason: str | Callable[[], str]) -> None:
        self.file = file
        self._reason = reason

    @property
    def reason(self) -> str:
        r = self._reason
        if not isinstance(r, str):
            r = self._reason = r()  # a race words it twice: the same text
        return r

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Rejected):
            return NotImplemented
        return self.file == other.file and self.reason == other.reason

    def __hash__(self) -> int:
        return hash((self.file, self.reason))

    def __repr__(self) -> str:
        return f"Rejected(file={self.file!r}, reason={self.reason!r})"


@functools.lru_cache(maxsize=4096)
def python_allowed(requires_python: str, python: str) -> bool | None:
    """Whether `python` meets a file's requires-python (None: the specifier is invalid). A
    project's files repeat a handful of these across thousands of files and every platform, so
    each pair is parsed and judged once."""
    try:
        spec = SpecifierSet(requires_python)
    except InvalidSpecifier:
        return None
    return spec.contains(Version(python), prereleases=True)


def _target_tag(target: Target) -> str:
    best = target.tags[0]
    return f"{best.interpreter}-{best.platform}"


def _fmt_time(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def evaluate(
    file: IndexFile,
    target: Target,
    *,
    allow_sdist: bool,
    exclude_newer: datetime | None,
    pinned_exactly: bool = False,
) -> Accepted | Rejected:
    try:
        _name, version, tags = parse_filename(file.filename)
    except ValueError as e:
        return Rejected(file, str(e))
    if file.yanked is not None and not pinned_exactly:
        return Rejected(file, f"yanked: {file.yanked}" if file.yanked else "yanked")
    if exclude_newer is not None and file.upload_time is not None and file.upload_time > exclude_newer:
        uploaded = file.upload_time
        return Rejected(
            file, lambda: f"uploaded {_fmt_time(uploaded)} after exclude-newer {_fmt_time(exclude_newer)}"
        )
    if file.requires_python:
        ok = python_allowed(file.requires_python, target.python_full_version)
        if ok is None:
            return Rejected(file, f"invalid requires-python {file.requires_python!r}")
        if not ok:
            return Rejected(file, f"requires-python {file.requires_python}")
    if tags is not None:
        rank = target.tag_rank(tags)
        if rank is None:
            return Rejected(
                file, lambda: f"no wheel tag matches {_target_tag(target)} (file has {file.tag_text})"
            )
        return Accepted(file, version, rank)
    if not allow_sdist:
        return Rejected(file, "sdist not allowed (add to allow-sdist)")
    return Accepted(file, version, len(target.tags))
