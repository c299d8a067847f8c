"""Poetry's `poetry.lock` (TOML): `[[package]]` with a name, a version, `markers` (when it is
installed: a string, or a table of one per dependency group) and `files`."""

from __future__ import annotations

from typing import Any

from kernodeck.formats import (
    Evidence,
    LockedPackage,
    entries,
    file_names,
    has_list,
    name_version_pins,
    text_of,
)

NAME = "poetry.lock"
SYNTAX = "toml"


def pins(data: Any) -> list[tuple[str, str]] | None:
    return name_version_pins(entries(data, "package")) if has_list(data, "package") else None


def _markers(entry: dict[str, Any]) -> str | None:
    """When a package is installed: `markers` as a string, or per group (any group's holds)."""
    value = entry.get("markers")
    if isinstance(value, dict):
        parts = [f"({v})" for v in value.values() if isinstance(v, str)]
        return " or ".join(parts) if len(parts) == len(value) and parts else None
    return value if isinstance(value, str) else None


def evidence(data: Any) -> Evidence:
    return Evidence(
        packages=[
            LockedPackage(
                name=text_of(e, "name") or "",
                version=text_of(e, "version") or "",
                files=tuple(file_names(e, "files", "file")),
                marker=_markers(e),
            )
            for e in entries(data, "package")
        ]
    )
