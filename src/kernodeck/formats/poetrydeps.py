"""Poetry's own dependency table (`[tool.poetry.dependencies]`), as PEP 508 requirements.

A Poetry project without a PEP 621 `[project]` table lists its dependencies in Poetry's format.
`[packages] from = ["pyproject.toml"]` reads them through here at lock time (`reqfile`), with
Poetry's extras and groups; `init` names that `from`, or, when an entry cannot be a requirement,
copies the others into `[packages] requirements` and says what it left out and why:

    deps = read_poetry(pyproject_data)
    deps.requirements   # ["numpy>=1.26,<2.0", "requests>=2.31,<2.32", ...]
    deps.python         # "^3.10" (the constraint, for [python])
    deps.notes          # optional dependencies, groups, git/path/url dependencies, sources

Poetry's constraints become PEP 440 specifiers: `^1.2.3` -> `>=1.2.3,<2.0.0`, `^0.2.3` ->
`>=0.2.3,<0.3.0`, `~1.2.3` -> `>=1.2.3,<1.3.0`, `1.2.3` -> `==1.2.3`, `*` -> any, and `>=1.2 <2`
(space-separated) -> `>=1.2,<2`. A dependency's `python` constraint becomes a `python_version`
marker, `platform` a `sys_platform` marker, and its `markers` are kept; a list of constraints gives
one requirement each. What PEP 508 cannot say (`||` alternatives) and what a lock does not take from
a requirement (git, path and url dependencies) is named, not guessed. Optional dependencies and
dependency groups are named with what to add to lock them too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from kernodeck.backends import PYTORCH_INDEX_BASE

_TERM = re.compile(r"\s*(\^|~=|~|===|==|!=|>=|<=|>|<|=)?\s*([0-9][A-Za-z0-9.*+!_-]*)\s*(,)?")
_RELEASE = re.compile(r"^(\d+(?:\.\d+)*)")
_NOT_REQUIREMENTS = ("git", "path", "url", "file")


@dataclass
class PoetryDeps:
    """What `[tool.poetry]` declares, as requirements (see the module docstring)."""

    requirements: list[str] = field(default_factory=list)
    python: str | None = None  # Poetry's `python` constraint, as written
    notes: list[str] = field(default_factory=list)
    optional: dict[str, list[str]] = field(default_factory=dict)  # extra -> its requirements
    groups: dict[str, list[str]] = field(default_factory=dict)  # group -> its requirements
    # (location, why) of each dependency a requirement cannot say (git, path, `||`)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    index_notes: list[str] = field(default_factory=list)  # dependencies from Poetry's own sources


def poetry_specifier(constraint: str) -> str:
    """A Poetry version constraint as a PEP 440 specifier ("" for any version); ValueError when it
    has no PEP 440 equivalent."""
    text = constraint.strip()
    if text in ("", "*"):
        return ""
    if "||" in text or "|" in text:
        raise ValueError(f"{constraint!r} has alternatives (||), which a PEP 508 requirement cannot say")
    parts: list[str] = []
    at = 0
    while at < len(text):
        m = _TERM.match(text, at)
        if m is None or m.end() == at:
            raise ValueError(f"{constraint!r} is not a version constraint Kernodeck can read")
        op, version = m.group(1) or "", m.group(2)
        parts.extend(_translate(op, version, constraint))
        at = m.end()
    spec = ",".join(parts)
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        raise ValueError(f"{constraint!r} is not a version constraint Kernodeck can read") from None
    return spec


def _translate(op: str, version: str, constraint: str) -> list[str]:
    if op in ("^", "~"):
        m = _RELEASE.match(version)
        if m is None or "*" in version:
            raise ValueError(f"{constraint!r} is not a version constraint Kernodeck can read")
        nums = [int(n) for n in m.group(1).split(".")]
        if op == "^":  # the first non-zero part may not change (the last given when all are zero)
            i = next((k for k, n in enumerate(nums) if n != 0), len(nums) - 1)
        else:  # ~X -> <X+1; ~X.Y and ~X.Y.Z -> <X.Y+1
            i = 1 if len(nums) > 1 else 0
        upper = [*nums[:i], nums[i] + 1]
        upper += [0] * (len(nums) - len(upper))  # as many parts as written: ^1.2.3 -> <2.0.0
        return [f">={version}", "<" + ".".join(map(str, upper))]
    if op in ("", "="):
        return [f"=={version}"]
    return [f"{op}{version}"]


def _python_marker(constraint: str) -> str:
    """A Poetry `python` constraint as a marker: `^3.8` -> `python_version >= "3.8" and
    python_version < "4.0"` (python_full_version for three-part versions)."""
    spec = poetry_specifier(constraint)
    clauses = []
    for s in SpecifierSet(spec) if spec else []:
        key = "python_full_version" if s.version.count(".") >= 2 else "python_version"
        clauses.append(f'{key} {s.operator} "{s.version}"')
    return " and ".join(sorted(clauses))


_PLATFORMS = {"linux": "linux", "darwin": "darwin", "macos": "darwin", "win32": "win32", "windows": "win32"}


def _requirement(name: str, spec: Any, sources: dict[str, str]) -> tuple[str | None, str | None]:
    """(requirement, note) of one constraint of one dependency."""
    if isinstance(spec, str):
        spec = {"version": spec}
    if not isinstance(spec, dict):
        return (
            None,
            f"{name}: {spec!r} is not a Poetry dependency Kernodeck can read: write it in requirements",
        )
    kind = next((k for k in _NOT_REQUIREMENTS if k in spec), None)
    if kind is not None:
        return None, (
            f"{name}: a Poetry {kind} dependency ({spec[kind]}), which a lock of index releases "
            "cannot pin: install it from its checkout, or publish it to an index and require it"
        )
    try:
        version = poetry_specifier(str(spec.get("version", "*")))
        markers = []
        if "python" in spec and _python_marker(str(spec["python"])):
            markers.append(_python_marker(str(spec["python"])))
    except ValueError as e:
        return None, f"{name}: {e}: write it in requirements"
    platform = spec.get("platform")
    if isinstance(platform, str):
        markers.append(f'sys_platform == "{_PLATFORMS.get(platform, platform)}"')
    text, problem = requirement_of(name, spec, version, markers)
    if text is None:
        return None, problem
    source = spec.get("source")
    note = source_note(name, "Poetry", source, sources.get(source, "")) if isinstance(source, str) else None
    return text, note


def requirement_of(
    name: str, spec: dict[str, Any], version: str, markers: list[str]
) -> tuple[str, None] | tuple[None, str]:
    """The PEP 508 requirement of a Poetry or Pipfile entry (its `extras`, `version` as a
    specifier, `markers` and the entry's own `markers` string), or None and what to do."""
    if isinstance(spec.get("markers"), str) and spec["markers"].strip():
        markers = [*markers, spec["markers"].strip()]
    extras = spec.get("extras")
    head = name + (f"[{','.join(map(str, extras))}]" if isinstance(extras, list) and extras else "")
    text = head + version
    if markers:
        text += "; " + " and ".join(f"({m})" if len(markers) > 1 else m for m in markers)
    try:
        Requirement(text)
    except InvalidRequirement as e:
        return None, f"{name}: cannot be written as a requirement ({e}): write it in requirements"
    return text, None


def source_note(name: str, tool: str, source: str, url: str) -> str:
    """What to write in the manifest for a dependency that `tool` (Poetry, Pipenv) takes from its
    own named index: the PyTorch index is a platform's `backend`, another a [[packages.index]]."""
    if url.rstrip("/").startswith(PYTORCH_INDEX_BASE + "/"):
        backend = url.rstrip("/").rsplit("/", 1)[1]
        return (
            f'{name}: from {tool} source {source!r} ({url}): set backend = "{backend}" on the '
            "[[platform]] that installs this build"
        )
    return (
        f"{name}: from {tool} source {source!r} ({url or 'not declared'}): declare it as a "
        f"[[packages.index]] and name it in [packages] sources ({name} = {source!r})"
    )


def read_poetry(data: dict[str, Any]) -> PoetryDeps | None:
    """The requirements of a pyproject.toml's `[tool.poetry.dependencies]`; None without one."""
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    deps = poetry.get("dependencies") if isinstance(poetry, dict) else None
    if not isinstance(poetry, dict) or not isinstance(deps, dict):
        return None
    out = PoetryDeps()
    sources = {
        str(s.get("name")): str(s.get("url", ""))
        for s in poetry.get("source", [])
        if isinstance(s, dict) and s.get("name")
    }
    extras_of: dict[str, list[str]] = {}
    for extra, names in (poetry.get("extras") or {}).items():
        for n in names if isinstance(names, list) else []:
            extras_of.setdefault(str(n).lower(), []).append(str(extra))
    for extra in poetry.get("extras") or {}:
        out.optional.setdefault(str(extra), [])
    for name, spec in deps.items():
        if name.lower() == "python":
            out.python = str(spec)
            continue
        for one in spec if isinstance(spec, list) else [spec]:
            req, note = _requirement(name, one, sources)
            if req is None:
                out.unreadable.append((f"tool.poetry.dependencies.{name}", note or name))
                out.notes.append(note or name)
                continue
            if isinstance(one, dict) and one.get("optional"):
                for extra in extras_of.get(name.lower(), []):
                    out.optional[extra].append(req)
                extras = ", ".join(extras_of.get(name.lower(), [])) or "none"
                out.notes.append(
                    f"{name}: optional (extras: {extras}): not copied; add {req!r} to requirements "
                    "if the reproduction installs it"
                )
                continue
            out.requirements.append(req)
            if note is not None:
                out.notes.append(note)
                out.index_notes.append(note)
    tables: dict[str, dict[str, Any]] = {}
    for group, table in (poetry.get("group") or {}).items():
        found = table.get("dependencies") if isinstance(table, dict) else None
        tables.setdefault(str(group), {}).update(found if isinstance(found, dict) else {})
    if isinstance(poetry.get("dev-dependencies"), dict):  # Poetry 1.1's spelling of group "dev"
        tables.setdefault("dev", {}).update(poetry["dev-dependencies"])
    for group, members in tables.items():
        reqs = out.groups.setdefault(group, [])
        for name, spec in members.items():
            for one in spec if isinstance(spec, list) else [spec]:
                req, _ = _requirement(name, one, sources)
                if req is not None:
                    reqs.append(req)
        if members:
            out.notes.append(
                f"Poetry group {group!r} ({', '.join(sorted(members))}): not copied; add them to "
                "requirements if the reproduction installs them"
            )
    return out


def poetry_project(pyproject: Mapping[str, Any]) -> str | None:
    """The name of the Poetry project a pyproject.toml without a [project] table describes
    (`[tool.poetry] name`, a [build-system], not `package-mode = false`): `poetry install`
    installs it, editable, beside its dependencies (which `kernodeck init` copies into
    requirements); None for anything else."""
    tool = pyproject.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, Mapping) else None
    if not isinstance(poetry, Mapping) or poetry.get("package-mode") is False:
        return None
    name = poetry.get("name")
    return name if isinstance(name, str) and name and "build-system" in pyproject else None
