"""uv's `uv.lock` (TOML): `[[package]]` entries with a name, a version, a `source`, `wheels` and an
`sdist`; the platforms it covers in `supported-markers` (`[tool.uv] environments`), else
`resolution-markers`."""

from __future__ import annotations

import re
from typing import Any

from kernodeck.formats import Evidence, entries, file_names, has_list, strings

NAME = "uv.lock"
SYNTAX = "toml"

_PLATFORM_VARS = re.compile(r"\b(sys_platform|platform_system|platform_machine|os_name)\b")


def pins(data: Any) -> list[tuple[str, str]] | None:
    """(name, version) of every package, the project itself (an editable or virtual source) left out."""
    if not has_list(data, "package"):
        return None
    out = []
    for e in entries(data, "package"):
        source = e.get("source")
        if isinstance(source, dict) and ("editable" in source or "virtual" in source):
            continue  # the project itself, never locked from an index
        if isinstance(e.get("name"), str) and isinstance(e.get("version"), str):
            out.append((e["name"], e["version"]))
    return out


def evidence(data: Any) -> Evidence:
    for key in ("supported-markers", "resolution-markers"):
        markers = strings(data.get(key))
        # forks on the Python version alone say nothing about platforms
        if markers and any(_PLATFORM_VARS.search(m) for m in markers):
            return Evidence(key, markers=markers)
    packages = []
    for e in entries(data, "package"):
        files = file_names(e, "wheels", "url")
        if isinstance(e.get("sdist"), dict):
            files.append("source.tar.gz")
        packages.append(files)
    return Evidence(packages=packages)
