"""Poetry's `poetry.lock` (TOML): `[[package]]` with a name, a version, `markers` (when it is
installed, in older lock versions) and `files`."""

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


def evidence(data: Any) -> Evidence:
    return Evidence(
        packages=[
            LockedPackage(
                name=text_of(e, "name") or "",
                version=text_of(e, "version") or "",
                files=tuple(file_names(e, "files", "file")),
                marker=text_of(e, "markers"),
            )
            for e in entries(data, "package")
        ]
    )
