"""Poetry's `poetry.lock` (TOML): `[[package]]` with a name, a version, `markers` (when it is
installed: a string, or a table of one per dependency group; lock-version 2.1), `files`, and its
dependency edges (`[package.dependencies]`: a constraint string, a table with `markers`,
`optional`, `extras`, or a list of such tables; the optional ones are its extras', named in
`[package.extras]`).

poetry.lock names no project package: given the project's pyproject.toml, the project is added
as the root of the graph (`[tool.poetry.dependencies]`, its groups and extras, through
`formats.poetrydeps`; PEP 621 `[project]` dependencies for Poetry 2), so what a platform needs is
what the project reaches there (`manifest.lockplatforms`)."""

from __future__ import annotations

import re
from typing import Any

from packaging.utils import canonicalize_name

from kernodeck.formats import (
    Edge,
    Evidence,
    LockedPackage,
    entries,
    file_names,
    has_list,
    name_version_pins,
    requirement_edge,
    strings,
    text_of,
)
from kernodeck.formats.poetrydeps import read_poetry

NAME = "poetry.lock"
SYNTAX = "toml"

#: The project name a `[package.extras]` entry starts with ("jaraco.packaging (>=9.3)").
_LEADING_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def pins(data: Any) -> list[tuple[str, str]] | None:
    return name_version_pins(entries(data, "package")) if has_list(data, "package") else None


def _markers(entry: dict[str, Any]) -> str | None:
    """When a package is installed: `markers` as a string, or per group (any group's holds)."""
    value = entry.get("markers")
    if isinstance(value, dict):
        parts = [f"({v})" for v in value.values() if isinstance(v, str)]
        return " or ".join(parts) if len(parts) == len(value) and parts else None
    return value if isinstance(value, str) else None


def _dependency_edges(entry: dict[str, Any]) -> tuple[list[Edge], list[Edge]]:
    """(required, optional) edges of `[package.dependencies]`."""
    table = entry.get("dependencies")
    required: list[Edge] = []
    optional: list[Edge] = []
    for name, spec in table.items() if isinstance(table, dict) else []:
        for one in spec if isinstance(spec, list) else [spec]:
            one = one if isinstance(one, dict) else {}
            edge = Edge(str(name), marker=text_of(one, "markers"), extras=tuple(strings(one.get("extras"))))
            (optional if one.get("optional") is True else required).append(edge)
    return required, optional


def _extras(entry: dict[str, Any], optional: list[Edge]) -> dict[str, tuple[Edge, ...]]:
    """Each extra of `[package.extras]` with the optional edges it names."""
    table = entry.get("extras")
    out: dict[str, tuple[Edge, ...]] = {}
    for extra, items in table.items() if isinstance(table, dict) else []:
        names = {canonicalize_name(m.group(1)) for m in map(_LEADING_NAME.match, strings(items)) if m}
        out[str(extra)] = tuple(e for e in optional if canonicalize_name(e.name) in names)
    return out


def _package(entry: dict[str, Any]) -> LockedPackage:
    required, optional = _dependency_edges(entry)
    return LockedPackage(
        name=text_of(entry, "name") or "",
        version=text_of(entry, "version") or "",
        files=tuple(file_names(entry, "files", "file")),
        marker=_markers(entry),
        edges=tuple(required),
        extras=_extras(entry, optional),
    )


def _edges(requirements: list[str]) -> tuple[Edge, ...]:
    return tuple(e for e in map(requirement_edge, requirements) if e is not None)


def _project(pyproject: Any) -> LockedPackage | None:
    """The project as the root of the lock's graph, from its pyproject.toml; None when it declares
    no dependency there (then every locked package counts, by its own marker)."""
    if not isinstance(pyproject, dict):
        return None
    deps = read_poetry(pyproject)
    project = pyproject.get("project")
    project = project if isinstance(project, dict) else {}
    requirements = strings(project.get("dependencies"))
    extras = project.get("optional-dependencies")
    optional = {str(k): strings(v) for k, v in extras.items()} if isinstance(extras, dict) else {}
    groups: dict[str, list[str]] = {}
    if deps is not None:
        requirements += deps.requirements
        # a git, path or url dependency is still in the lock: reach it by name
        requirements += [where.removeprefix("tool.poetry.dependencies.") for where, _ in deps.unreadable]
        for extra, reqs in deps.optional.items():
            optional.setdefault(extra, []).extend(reqs)
        groups = deps.groups
    if not requirements and not optional and not groups:
        return None  # nothing read (dynamic dependencies): every package counts
    return LockedPackage(
        name="<project>",
        version="",
        root=True,
        edges=_edges(requirements),
        extras={k: _edges(v) for k, v in optional.items()},
        groups={k: _edges(v) for k, v in groups.items()},
    )


def evidence(data: Any, pyproject: Any = None) -> Evidence:
    packages = [_package(e) for e in entries(data, "package")]
    root = _project(pyproject)
    return Evidence(packages=packages if root is None else [root, *packages])
