"""PEP 751's `pylock.toml` (TOML): `[[packages]]` with a name, a version, `wheels` and an `sdist`; the
platforms it covers in `environments`."""

from __future__ import annotations

from typing import Any

from kernodeck.formats import Evidence, entries, file_names, has_list, name_version_pins, strings

NAME = "pylock.toml"
SYNTAX = "toml"


def pins(data: Any) -> list[tuple[str, str]] | None:
    return name_version_pins(entries(data, "packages")) if has_list(data, "packages") else None


def evidence(data: Any) -> Evidence:
    markers = strings(data.get("environments"))
    if markers:
        return Evidence("environments", markers=markers)
    packages = []
    for e in entries(data, "packages"):
        files = file_names(e, "wheels", "name")
        if isinstance(e.get("sdist"), dict):
            files.append("source.tar.gz")
        packages.append(files)
    return Evidence(packages=packages)
