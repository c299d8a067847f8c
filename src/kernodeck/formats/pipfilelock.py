"""Pipenv's `Pipfile.lock` (JSON): `default` and `develop` map names to `{"version": "==1.2.3", ...}`.
Entries without an exact version (git, path) are left out. It says nothing about platforms."""

from __future__ import annotations

from typing import Any

from kernodeck.formats import Evidence

NAME = "Pipfile.lock"
SYNTAX = "json"


def pins(data: Any) -> list[tuple[str, str]] | None:
    out = []
    for section in ("default", "develop"):
        table = data.get(section) if isinstance(data, dict) else None
        for pkg, entry in (table if isinstance(table, dict) else {}).items():
            version = entry.get("version") if isinstance(entry, dict) else None
            if isinstance(version, str) and version.startswith("==") and "*" not in version:
                out.append((pkg, version[2:].strip()))
    return out


def evidence(data: Any, pyproject: Any = None) -> Evidence:
    return Evidence(packages=[])
