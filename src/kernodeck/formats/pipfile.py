"""A Pipenv project's `Pipfile`: what `kernodeck init` can take from it.

Pipenv keeps a project's dependencies in `Pipfile` (TOML, its own layout), which `[packages] from`
does not read. `init` copies its `[packages]` into `[packages] requirements` and says what it left
out and why (as for a conda environment file or Poetry's table):

    deps = read_pipfile(Path("Pipfile"))
    deps.requirements   # ["numpy>=1.26", "requests[socks]==2.31.0", ...]
    deps.python         # "3.8" from [requires] python_version
    deps.notes          # git/path/file dependencies, sources
    deps.categories     # {"dev-packages": Category([...], []), "docs": ...}: what `groups` selects

Pipfile's versions are PEP 440 specifiers already (`"*"` is any version); a table's `extras`,
`markers` and marker keys (`sys_platform = "== 'win32'"`, `platform_machine`, `python_version`,
...) become the requirement's extras and markers. `index = "name"` names a `[[source]]`: the
PyTorch index is a platform's `backend`, another index a `[[packages.index]]` to declare.
Pipfile.lock's pins are what a platform's first lock prefers (`manifest.adopt.project_lock`).

Pipenv's other package categories ([dev-packages], which `pipenv install --dev` installs, and any
other table `pipenv install --categories NAME` installs) are read as [packages] `groups` select
them, by their table names (`groups = ["dev-packages"]`), as a pyproject.toml's dependency groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernodeck.formats.poetrydeps import requirement_of, source_note
from kernodeck.manifest.schema import MARKER_VARIABLES
from kernodeck.support.tomltext import parse_toml

NAME = "Pipfile"

_NOT_REQUIREMENTS = ("git", "path", "file", "hg", "svn", "bzr")
_PYTHON = re.compile(r"^3\.\d+")


#: Top-level tables of a Pipfile that are not package categories.
_NOT_CATEGORIES = ("source", "requires", "pipenv", "scripts", "packages")
#: The category `pipenv install --dev` installs.
DEV = "dev-packages"


@dataclass
class Category:
    """One package category besides [packages]: its entries that are requirements, and (location,
    why) of those that cannot be one."""

    requirements: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class PipfileDeps:
    """What `init` takes from a Pipfile (see the module docstring)."""

    requirements: list[str] = field(default_factory=list)
    python: str | None = None  # "3.8" from [requires]
    python_spec: str = ""  # as written, for the comment
    notes: list[str] = field(default_factory=list)
    # (location, why) of each entry a requirement cannot say (git, path, an invalid one)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    index_notes: list[str] = field(default_factory=list)  # entries from the Pipfile's own sources
    dev: list[str] = field(default_factory=list)  # the names in [dev-packages]
    categories: dict[str, Category] = field(default_factory=dict)  # [dev-packages] and the others


def _requirement(name: str, spec: Any, sources: dict[str, str]) -> tuple[str | None, str | None]:
    """(requirement, note) of one Pipfile entry."""
    if isinstance(spec, str):
        spec = {"version": spec}
    if not isinstance(spec, dict):
        return None, f"{name}: {spec!r} is not a Pipfile entry Kernodeck can read: write it in requirements"
    kind = next((k for k in _NOT_REQUIREMENTS if k in spec), None)
    if kind is not None:
        return None, (
            f"{name}: a Pipfile {kind} dependency ({spec[kind]}), which a lock of index releases "
            "cannot pin: install it from its checkout, or publish it to an index and require it"
        )
    version = str(spec.get("version", "*")).strip()
    version = "" if version in ("", "*") else version
    markers = [
        f"{key} {str(spec[key]).strip()}" for key in MARKER_VARIABLES if isinstance(spec.get(key), str)
    ]
    text, problem = requirement_of(name, spec, version, markers)
    if text is None:
        return None, problem
    index = spec.get("index")
    note = source_note(name, "Pipfile", index, sources.get(index, "")) if isinstance(index, str) else None
    return text, note


def read_pipfile(path: Path) -> PipfileDeps:
    """The requirements of a Pipfile's [packages]; raises ManifestError (located) when it is not
    valid TOML."""
    data = parse_toml(path.read_text(encoding="utf-8"), NAME)
    out = PipfileDeps()
    sources = {
        str(s.get("name")): str(s.get("url", ""))
        for s in data.get("source", [])
        if isinstance(s, dict) and s.get("name")
    }
    packages = data.get("packages")
    for name, spec in (packages if isinstance(packages, dict) else {}).items():
        req, note = _requirement(str(name), spec, sources)
        if req is not None:
            out.requirements.append(req)
            if note is not None:
                out.index_notes.append(note)
        elif note is not None:
            out.unreadable.append((f"packages.{name}", note))
        if note is not None:
            out.notes.append(note)
    for table, entries in data.items():
        if table not in _NOT_CATEGORIES and isinstance(entries, dict):
            out.categories[table] = _category(table, entries, sources)
    dev = data.get(DEV)
    if isinstance(dev, dict):
        out.dev = [str(n) for n in dev]
    _read_python(data.get("requires"), out)
    return out


def _category(table: str, entries: dict[str, Any], sources: dict[str, str]) -> Category:
    """A package category's requirements, and the entries that cannot be read as one."""
    category = Category()
    for name, spec in entries.items():
        req, note = _requirement(str(name), spec, sources)
        if req is not None:
            category.requirements.append(req)
        elif note is not None:
            category.unreadable.append((f"{table}.{name}", note))
    return category


def _read_python(requires: Any, out: PipfileDeps) -> None:
    """The Python version `[requires]` names (python_full_version first), into `out`."""
    if not isinstance(requires, dict):
        return
    for key in ("python_full_version", "python_version"):
        value = requires.get(key)
        m = _PYTHON.match(value.strip()) if isinstance(value, str) else None
        if m is not None:
            out.python, out.python_spec = m.group(0), f"{key} = {value!r}"
            return


def category_note(deps: PipfileDeps) -> str | None:
    """What init says of the categories besides [packages] when it copies the Pipfile's packages
    (`from` does not read it, so `groups` cannot select them); None when there are none."""
    named = [
        f"[{t}] ({', '.join(sorted(c.requirements))})" for t, c in deps.categories.items() if c.requirements
    ]
    if not named:
        return None
    return (
        f"Pipfile {'; '.join(named)}: not locked; add them to requirements if the reproduction "
        "installs them (`pipenv install --dev` installs [dev-packages])"
    )


def find_pipfile(folder: Path) -> Path | None:
    path = folder / NAME
    return path if path.is_file() else None
