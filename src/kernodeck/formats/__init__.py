"""Files other tools write, read behind one interface, one module each (as PDM's formats package).

    data = parse_text(text, "uv.lock", "toml")     # parsed data, or Unreadable(reason)
    for fmt in locks():                             # uvlock, pylock, poetrylock, pipfilelock
        fmt.NAME, fmt.SYNTAX
        fmt.pins(data)                              # [(name, version)] from an index; None: no package array
        fmt.evidence(data, pyproject)               # Evidence: its platform markers and locked packages
                                                    # (pyproject: the project's parsed pyproject.toml, or None)
    sdist_only(evidence.packages)                   # what the lock has only as a source distribution

Every foreign file is parsed here: nesting deeper than `MAX_DEPTH` (arrays, tables, objects) is a
located ManifestError (exit 2) found before the parser runs, never the parser's RecursionError;
a syntax error is a value (`Unreadable`), since a foreign lock only offers preferences.
Conda's YAML files are not parsed but read line by line for their platforms only
(`condalock.conda_platforms`: no nesting is followed, so there is no depth to limit).
What a platform needs of a lock's packages is decided in `manifest.lockplatforms`, not here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement

from kernodeck.errors import Issue, ManifestError
from kernodeck.support.tomltext import MAX_DEPTH, tomllib, too_deep

Syntax = Literal["toml", "json"]

#: How a source distribution's file name ends (a lock without file names writes "source.tar.gz").
SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2")


@dataclass(frozen=True)
class Unreadable:
    reason: str  # the parser's words, e.g. "Expected '=' after a key (at line 3, column 5)"


@dataclass(frozen=True)
class Edge:
    """A dependency edge of a lock's graph (uv.lock): the package it names (its version and
    registry when the lock holds several), when it applies, and the extras it asks of it."""

    name: str
    version: str | None = None
    source: str | None = None
    marker: str | None = None
    extras: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockedPackage:
    """One locked version of a package, as the lock writes it.

    files: its wheel names (or URLs), an sdist as "source.tar.gz"; source: the registry (index)
    URL it was locked from, when the lock says; marker: when it is installed (pylock, poetry.lock);
    root: the project itself (uv.lock: an editable, virtual or directory source); edges, extras
    (optional-dependencies) and groups (dev-dependencies): its dependency edges (uv.lock)."""

    name: str
    version: str
    files: tuple[str, ...] = ()
    source: str | None = None
    marker: str | None = None
    root: bool = False
    edges: tuple[Edge, ...] = ()
    extras: dict[str, tuple[Edge, ...]] = field(default_factory=dict)
    groups: dict[str, tuple[Edge, ...]] = field(default_factory=dict)

    @property
    def has_sdist(self) -> bool:
        return any(f.split("#", 1)[0].endswith(SDIST_SUFFIXES) for f in self.files)

    @property
    def wheels(self) -> tuple[str, ...]:
        return tuple(f for f in self.files if f.split("#", 1)[0].endswith(".whl"))


def requirement_edge(text: str) -> Edge | None:
    """A PEP 508 requirement as an edge of a lock's graph (its name, marker and extras); None when
    it cannot be read."""
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    return Edge(req.name, marker=str(req.marker) if req.marker else None, extras=tuple(sorted(req.extras)))


def sdist_only(packages: list[LockedPackage]) -> list[LockedPackage]:
    """The locked packages (the project itself left out) whose only file is a source distribution:
    the project's own lock builds them from source, by name and version."""
    return [p for p in packages if not p.root and p.name and p.has_sdist and not p.wheels]


@dataclass(frozen=True)
class Evidence:
    """What a lock says about the platforms it covers: environment markers (under `key`; empty
    when it names none), and its locked packages (what each platform needs of them is decided by
    `manifest.lockplatforms`)."""

    key: str = "wheel tags"
    markers: list[str] = field(default_factory=list)
    packages: list[LockedPackage] = field(default_factory=list)


def nested_too_deep(filename: str, line: int | None = None, what: str = "arrays or tables") -> ManifestError:
    """The error for a foreign file nested deeper than its reader follows (exit 2, located)."""
    return ManifestError(
        [Issue(filename, "", f"nested more than {MAX_DEPTH} levels deep ({what})", line=line)]
    )


def check_depth(text: str, filename: str) -> None:
    """Raise a located ManifestError when `text` nests deeper than MAX_DEPTH (no parser recursion)."""
    line = too_deep(text)
    if line is not None:
        raise nested_too_deep(filename, line)


def parse_text(text: str, filename: str, syntax: Syntax) -> Any:
    """The parsed data of a foreign file, or Unreadable; ManifestError when nested too deep."""
    check_depth(text, filename)
    try:
        return tomllib.loads(text) if syntax == "toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as e:
        return Unreadable(str(e))
    except RecursionError:  # nesting the depth count did not see (it is conservative): same error
        raise nested_too_deep(filename) from None


def strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def file_names(entry: dict[str, Any], key: str, name_key: str) -> list[str]:
    """The file names (or URLs, or paths) listed under `entry[key]`."""
    out: list[str] = []
    items = entry.get(key)
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            v = item.get(name_key) or item.get("url") or item.get("path")
            if isinstance(v, str):
                out.append(v)
    return out


def text_of(entry: Any, key: str) -> str | None:
    """`entry[key]` when it is a string, else None."""
    value = entry.get(key) if isinstance(entry, dict) else None
    return value if isinstance(value, str) else None


def entries(data: Any, key: str) -> list[dict[str, Any]]:
    """The table entries of `data[key]` (an array of tables), others left out."""
    found = data.get(key) if isinstance(data, dict) else None
    return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []


def has_list(data: Any, key: str) -> bool:
    """Whether `data[key]` is an array (a lock without its package array is not that tool's lock)."""
    return isinstance(data, dict) and isinstance(data.get(key), list)


def name_version_pins(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["name"], e["version"])
        for e in items
        if isinstance(e.get("name"), str) and isinstance(e.get("version"), str)
    ]


def locks() -> tuple[ModuleType, ...]:
    """The lock files of other tools (their modules), in the order a first lock prefers their pins."""
    from kernodeck.formats import pipfilelock, poetrylock, pylock, uvlock

    return (uvlock, pylock, poetrylock, pipfilelock)
