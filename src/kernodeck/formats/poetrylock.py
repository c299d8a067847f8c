"""Poetry's `poetry.lock` (TOML): `[[package]]` with a name, a version and `files`."""

from __future__ import annotations

from typing import Any

from kernodeck.formats import Evidence, entries, file_names, has_list, name_version_pins

NAME = "poetry.lock"
SYNTAX = "toml"


def pins(data: Any) -> list[tuple[str, str]] | None:
    return name_version_pins(entries(data, "package")) if has_list(data, "package") else None


def evidence(data: Any) -> Evidence:
    return Evidence(packages=[file_names(e, "files", "file") for e in entries(data, "package")])
