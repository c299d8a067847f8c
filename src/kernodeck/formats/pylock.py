"""PEP 751's `pylock.toml` (TOML): `[[packages]]` with a name, a version, a `marker`, an `index`,
`wheels` and an `sdist`; the platforms it covers in `environments`."""

from __future__ import annotations

from typing import Any

from kernodeck.formats import (
    Evidence,
    LockedPackage,
    entries,
    file_names,
    has_list,
    name_version_pins,
    strings,
    text_of,
)

NAME = "pylock.toml"
SYNTAX = "toml"


def pins(data: Any) -> list[tuple[str, str]] | None:
    return name_version_pins(entries(data, "packages")) if has_list(data, "packages") else None


def _package(entry: dict[str, Any]) -> LockedPackage:
    files = file_names(entry, "wheels", "name")
    if isinstance(entry.get("sdist"), dict):
        files.append("source.tar.gz")
    return LockedPackage(
        name=text_of(entry, "name") or "",
        version=text_of(entry, "version") or "",
        files=tuple(files),
        source=text_of(entry, "index"),
        marker=text_of(entry, "marker"),
    )


def evidence(data: Any, pyproject: Any = None) -> Evidence:
    packages = [_package(e) for e in entries(data, "packages")]
    markers = strings(data.get("environments"))
    return (
        Evidence("environments", markers=markers, packages=packages)
        if markers
        else Evidence(packages=packages)
    )
