"""uv's `uv.lock` (TOML): `[[package]]` entries with a name, a version, a `source`, `wheels`, an
`sdist` and their dependency edges (`dependencies`, `[package.optional-dependencies]`,
`[package.dev-dependencies]`, each edge `{ name, version?, source?, marker?, extra? }`); the
platforms it covers in `supported-markers` (`[tool.uv] environments`), else `resolution-markers`."""

from __future__ import annotations

import re
from typing import Any

from kernodeck.formats import Edge, Evidence, LockedPackage, entries, file_names, has_list, strings, text_of

NAME = "uv.lock"
SYNTAX = "toml"

_PLATFORM_VARS = re.compile(r"\b(sys_platform|platform_system|platform_machine|os_name)\b")
#: Sources of the project itself (never locked from an index).
_PROJECT_SOURCES = ("editable", "virtual", "directory")


def _is_project(entry: dict[str, Any]) -> bool:
    source = entry.get("source")
    return isinstance(source, dict) and any(k in source for k in _PROJECT_SOURCES)


def pins(data: Any) -> list[tuple[str, str]] | None:
    """(name, version) of every package, the project itself (an editable or virtual source) left out."""
    if not has_list(data, "package"):
        return None
    out = []
    for e in entries(data, "package"):
        if _is_project(e):
            continue
        if isinstance(e.get("name"), str) and isinstance(e.get("version"), str):
            out.append((e["name"], e["version"]))
    return out


def _registry(entry: Any) -> str | None:
    source = entry.get("source") if isinstance(entry, dict) else None
    return text_of(source, "registry") or text_of(source, "url")


def _edges(items: Any) -> tuple[Edge, ...]:
    out = []
    for item in items if isinstance(items, list) else []:
        name = text_of(item, "name")
        if name is None:
            continue
        extras = tuple(strings(item.get("extra")))
        out.append(Edge(name, text_of(item, "version"), _registry(item), text_of(item, "marker"), extras))
    return tuple(out)


def _edge_tables(entry: dict[str, Any], key: str) -> dict[str, tuple[Edge, ...]]:
    table = entry.get(key)
    if not isinstance(table, dict):
        return {}
    return {name: _edges(items) for name, items in table.items() if isinstance(name, str)}


def _package(entry: dict[str, Any]) -> LockedPackage:
    files = file_names(entry, "wheels", "url")
    if isinstance(entry.get("sdist"), dict):
        files.append("source.tar.gz")
    return LockedPackage(
        name=text_of(entry, "name") or "",
        version=text_of(entry, "version") or "",
        files=tuple(files),
        source=_registry(entry),
        root=_is_project(entry),
        edges=_edges(entry.get("dependencies")),
        extras=_edge_tables(entry, "optional-dependencies"),
        groups=_edge_tables(entry, "dev-dependencies"),
    )


def evidence(data: Any, pyproject: Any = None) -> Evidence:
    packages = [_package(e) for e in entries(data, "package")]
    for key in ("supported-markers", "resolution-markers"):
        markers = strings(data.get(key))
        # forks on the Python version alone say nothing about platforms
        if markers and any(_PLATFORM_VARS.search(m) for m in markers):
            return Evidence(key, markers=markers, packages=packages)
    return Evidence(packages=packages)
