"""Unlocked packages that come with a part of the project the manifest does not select: a PEP 735
dependency group (`uv sync` installs `dev` by default) or an extra (`pip install -e .[test]`) of
its pyproject.toml, a Poetry group or extra (`poetry install` installs every non-optional
group), or a Pipfile's [dev-packages] (`pipenv install --dev`). verify's `unlocked` warning names the part and the fix instead of only saying "uninstall
them".

    parts = unselected(manifest, folder, facts, unlocked)   # [Part("group", "dev", {...}), ...]
    hint = part_hint(parts, unlocked, names, otherwise)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

from kernodeck.errors import KernodeckError
from kernodeck.layers.contract import required_by
from kernodeck.lockfile.names import is_pipfile, is_pyproject
from kernodeck.manifest.schema import Manifest
from kernodeck.probe.facts import Facts

Kind = Literal["group", "extra", "poetry-group", "poetry-extra", "pipenv-dev"]


@dataclass(frozen=True)
class Part:
    kind: Kind
    name: str
    brings: frozenset[NormalizedName]  # the unlocked distributions that come with it
    read: bool = True  # `from` reads the file it belongs to (else its requirements were copied)

    @property
    def key(self) -> str:
        """The [packages] key that selects it: `groups` or `extras` when `from` reads its file,
        else `requirements` (init copied the dependencies of a file `from` does not read)."""
        if not self.read:
            return "requirements"
        return "groups" if self.kind in ("group", "poetry-group", "pipenv-dev") else "extras"

    def said(self) -> str:
        if self.kind == "pipenv-dev":
            return "Pipfile's [dev-packages]"
        if self.kind.startswith("poetry-"):
            return f'Poetry {self.kind.removeprefix("poetry-")} "{self.name}"'
        return f'{"dependency group" if self.kind == "group" else "extra"} "{self.name}"'


def _poetry_parts(data: dict[str, object]) -> list[tuple[Kind, str, set[NormalizedName]]]:
    """Poetry's groups (`[tool.poetry.group.NAME.dependencies]`, Poetry 1.1's `dev-dependencies`)
    and extras (`[tool.poetry.extras]`), each with the names it requires directly."""
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if not isinstance(poetry, dict):
        return []
    out: list[tuple[Kind, str, set[NormalizedName]]] = []
    tables = {g: t.get("dependencies") for g, t in (poetry.get("group") or {}).items() if isinstance(t, dict)}
    if isinstance(poetry.get("dev-dependencies"), dict):
        tables["dev"] = {**(tables.get("dev") or {}), **poetry["dev-dependencies"]}
    for group, deps in tables.items():
        if isinstance(deps, dict):
            out.append(("poetry-group", str(group), {canonicalize_name(n) for n in deps if n != "python"}))
    for extra, names in (poetry.get("extras") or {}).items():
        if isinstance(names, list):
            out.append(("poetry-extra", str(extra), {canonicalize_name(str(n)) for n in names}))
    return out


def _names(requirements: list[str]) -> set[NormalizedName]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def unselected(
    manifest: Manifest,
    folder: Path,
    facts: Facts,
    unlocked: set[NormalizedName],
    platform_extras: Sequence[str] = (),
) -> list[Part]:
    """The groups and extras of the project's pyproject.toml (the one `from` reads, else the one
    beside the manifest) that `[packages]` does not select (nor `platform_extras`, the platform's
    own `extras`), each with the unlocked distributions its requirements bring along; empty when
    there is no readable pyproject.toml."""
    from kernodeck.reqfile import dependency_groups, read_pyproject

    named = [folder / f for f in manifest.packages.from_ if is_pyproject(f)]
    pyproject = named[0] if named else folder / "pyproject.toml"
    pk = manifest.packages
    found: list[Part] = []

    def add(kind: Kind, name: str, direct: set[NormalizedName], read: bool = True) -> None:
        brings = required_by(facts, direct & unlocked) & unlocked
        if brings:
            found.append(Part(kind, name, frozenset(brings), read))

    try:
        data = read_pyproject(pyproject, pyproject.name)
        groups = data.get("dependency-groups")
        chosen = {canonicalize_name(g) for g in pk.groups}
        for group in groups if isinstance(groups, dict) else []:
            if canonicalize_name(group) not in chosen:
                add("group", group, _names(dependency_groups(pyproject, [group])))
        chosen = {canonicalize_name(e) for e in (*pk.extras, *platform_extras)}
        for extra, direct in _extras(pyproject, data, chosen).items():
            add("extra", extra, direct)
        selected = (
            {canonicalize_name(n) for n in (*pk.groups, *pk.extras, *platform_extras)} if named else set()
        )
        for kind, name, direct in _poetry_parts(data):
            if canonicalize_name(name) not in selected:
                add(kind, name, direct, read=bool(named))
    except (KernodeckError, OSError, ValueError):
        pass  # no readable pyproject.toml, groups or extras: the general hint stands
    # a Pipfile's categories are `groups` when `from` reads it (and no pyproject.toml)
    from kernodeck.formats.pipfile import DEV

    pipfile_read = not named and any(is_pipfile(f) for f in pk.from_)
    if not (pipfile_read and canonicalize_name(DEV) in {canonicalize_name(g) for g in pk.groups}):
        add("pipenv-dev", DEV, _pipenv_dev(folder), read=pipfile_read)
    return found


def _extras(
    pyproject: Path, data: dict[str, object], chosen: set[NormalizedName]
) -> dict[str, set[NormalizedName]]:
    """Each extra of the pyproject.toml's [project] not `chosen`, with the names it requires
    beyond the dependencies; empty when its dependencies are dynamic or it has none."""
    from kernodeck.reqfile import project_dependencies

    project = data.get("project")
    project = project if isinstance(project, dict) else {}
    optional = project.get("optional-dependencies")
    if not isinstance(optional, dict) or "dependencies" in (project.get("dynamic") or []):
        return {}
    base = _names(project_dependencies(pyproject, []))
    return {
        extra: _names(project_dependencies(pyproject, [extra])) - base
        for extra in optional
        if canonicalize_name(extra) not in chosen
    }


def _pipenv_dev(folder: Path) -> set[NormalizedName]:
    """The names in the Pipfile's [dev-packages] (`pipenv install --dev` installs them)."""
    from kernodeck.formats.pipfile import find_pipfile, read_pipfile

    path = find_pipfile(folder)
    try:
        return {canonicalize_name(n) for n in read_pipfile(path).dev} if path is not None else set()
    except (KernodeckError, OSError, UnicodeDecodeError):
        return set()


def part_hint(
    parts: list[Part],
    unlocked: set[NormalizedName],
    shown: Callable[[set[NormalizedName]], str],
    otherwise: str,
) -> str:
    """The hint of the `unlocked` warning: which part each package comes with and how to select it
    (or leave it out); `otherwise` for the packages that come with none."""
    covered: set[NormalizedName] = set().union(*(p.brings for p in parts))
    verb = "comes" if len(covered) == 1 else "come"
    who = "they come" if covered == unlocked else f"{shown(covered)} {verb}"
    keys = []
    for key in ("groups", "extras"):
        chosen = [f'"{p.name}"' for p in parts if p.key == key]
        if chosen:
            keys.append(f"{key} = [{', '.join(chosen)}]")
    fixes = [f"{' and '.join(keys)} to [packages]"] if keys else []
    if any(p.key == "requirements" for p in parts):
        fixes.append("their requirements to [packages] requirements")
    groups = [p.name for p in parts if p.kind == "group"]
    poetry = [p.name for p in parts if p.kind == "poetry-group"]
    leave = (
        f" (`uv sync --no-group {groups[0]}`)"
        if groups
        else f" (`poetry install --without {','.join(poetry)}`)"
        if poetry
        else " (`pipenv sync`, without --dev)"
        if any(p.kind == "pipenv-dev" for p in parts)
        else ""
    )
    of_pyproject = ", ".join(p.said() for p in parts if p.kind != "pipenv-dev")
    what = ", ".join(
        [
            *([f"{of_pyproject} of pyproject.toml"] if of_pyproject else []),
            *(p.said() for p in parts if p.kind == "pipenv-dev"),
        ]
    )
    text = (
        f"{who} with {what}, which [packages] does not select: add "
        f"{' and '.join(fixes)} and run `kernodeck lock`, or leave "
        f"{'it' if len(parts) == 1 else 'them'} out of this environment{leave}"
    )
    return text if covered == unlocked else f"{text}; the others: {otherwise}"
