"""`[packages] from`: requirements read from where the project keeps them, at lock time.

    sources = read_sources(manifest, Path("repro.toml"))
    sources.requirements, sources.constraints, sources.indexes, sources.backends
    sources.inputs        # {"pyproject.toml": sha256, "requirements/base.txt": sha256, ...}

    manifest, inputs = apply_sources(manifest, Path("repro.toml"))   # what `kernodeck lock` calls

Entries are relative to the manifest's folder. A `*.toml` entry is a pyproject.toml: its
`[project] dependencies`, the `extras` named in `[packages]` and the PEP 735 dependency `groups`
(for a Poetry project without `[project]`: `[tool.poetry.dependencies]` as PEP 508, Poetry's extras
and groups; see `kernodeck.formats.poetrydeps`). A `Pipfile` entry is Pipenv's: its [packages]
(`kernodeck.formats.pipfile`).
Anything else is a requirements file, read by `kernodeck.reqfile` the way pip reads it (and every
file it includes is an input too). `inputs` maps every file read to the sha256 of its bytes: a
lock records them, so editing pyproject.toml makes `kernodeck lock --check` fail naming it.

A missing or unreadable source is a ManifestError located at its `from` entry in the manifest;
a problem inside a source is located at that file's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernodeck.backends import backend_of_index
from kernodeck.errors import Issue, ManifestError
from kernodeck.lockfile.names import is_pipfile, is_pyproject, manifest_file
from kernodeck.manifest.schema import Index, Manifest, unfingerprinted
from kernodeck.support.urls import redact

if TYPE_CHECKING:  # the readers load with the first `from` source: a manifest without any needs none
    from kernodeck.reqfile import BackendHint, IndexRef, ParsedRequirements


@dataclass(frozen=True)
class SourceSet:
    requirements: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    indexes: tuple[IndexRef, ...] = ()
    backends: tuple[BackendHint, ...] = ()
    prereleases: bool = False
    inputs: dict[str, str] = field(default_factory=dict)  # file (relative, '/') -> sha256
    # project -> where it is required, as a lock file's `# via` says it ("-r requirements.txt")
    via: dict[str, tuple[str, ...]] = field(default_factory=dict)
    project_included: bool = False  # a requirements file installs the project itself (`-e .`)
    # lines [packages] skip left out: (the entry, "file:line")
    skipped: tuple[tuple[str, str], ...] = ()
    # platform -> the requirements its own `extras` add to those every platform has
    platform_requirements: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def requirements_of(self, platform: str) -> tuple[str, ...]:
        """Every requirement `platform` locks from the sources: the common ones and its extras'."""
        return (*self.requirements, *self.platform_requirements.get(platform, ()))


def _from_line(manifest_file: Path, index: int, key: str = "from") -> int | None:
    """The line of `[packages] <key>[index]` in the manifest file (None when it cannot be read)."""
    from kernodeck.manifest.load import Locator

    try:
        text = manifest_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return Locator(text).line_of(("packages", key, index))


def check_direct_references(manifest: Manifest, manifest_path: Path) -> None:
    """A `[packages] requirements` entry a lock cannot take from an index (`name @ git+...`, a
    local path, any direct URL: a lock resolves names on indexes) is a located ManifestError, as
    the same line in a requirement file is (`reqfile.direct_reference`): `validate`
    (`manifest_warnings`) and `lock`, before anything is resolved. Reading a manifest for anything
    else (verify, a lock file's freshness) does not stop at it."""
    direct = [(i, req) for i, req in enumerate(map(Requirement, manifest.packages.requirements)) if req.url]
    if not direct:
        return  # the requirement-file readers are not imported for a manifest without one
    from kernodeck.reqfile import cannot_carry, direct_reference

    mfile = manifest_file(Path(manifest_path))
    for i, req in direct:
        why = direct_reference(req)  # the schema parsed it already
        if why is not None:
            raise ManifestError(
                [
                    Issue(
                        str(mfile),
                        f"packages.requirements[{i}]",
                        why,
                        line=_from_line(mfile, i, "requirements"),
                        hint=cannot_carry("remove it from [packages] requirements"),
                    )
                ]
            )


def source_problem(root: Path, path: Path, *, external: bool) -> tuple[str, str | None] | None:
    """(why, hint) when a `from` entry cannot be read: outside the project (after symlinks)
    without `external`, missing, not a regular file (a named pipe would block), too large."""
    from kernodeck.reqfile import Refused, bounded_in, check_regular

    try:
        if not external:
            bounded_in(root, path)
        check_regular(path)
    except Refused as e:
        return e.why, e.hint
    return None


def read_sources(manifest: Manifest, manifest_path: Path) -> SourceSet:
    """Read every `[packages] from` source; raises ManifestError (located) on a problem."""
    pk = manifest.packages
    if not pk.from_:
        return SourceSet()
    from kernodeck.reqfile import parse_pipfile, parse_pyproject, parse_requirements_file

    mfile = manifest_file(Path(manifest_path))
    root = mfile.parent.resolve()
    parsed: list[ParsedRequirements] = []
    for i, entry in enumerate(pk.from_):
        path = root / entry
        problem = source_problem(root, path, external=pk.external)
        if problem is not None:
            why, hint = problem
            raise ManifestError(
                [
                    Issue(
                        str(mfile),
                        f"packages.from[{i}]",
                        f"source {entry!r} {why}",
                        line=_from_line(mfile, i),
                        hint=hint or "paths in `from` are relative to the manifest's folder",
                    )
                ]
            )
        if is_pyproject(entry):
            parsed.append(parse_pyproject(path, extras=pk.extras, groups=pk.groups, display_root=root))
        elif is_pipfile(entry):
            # `groups` select a pyproject.toml's groups when `from` names one, else the Pipfile's categories
            own = () if any(is_pyproject(f) for f in pk.from_) else pk.groups
            parsed.append(parse_pipfile(path, groups=own, display_root=root))
        else:
            parsed.append(
                parse_requirements_file(
                    path, project_root=root, display_root=root, external=pk.external, skip=tuple(pk.skip)
                )
            )
    _check_skip(pk.skip, parsed, mfile)
    # dicts as ordered sets: linear in the lines read (a list's `in` made it quadratic)
    reqs: dict[str, None] = {}
    cons: dict[str, None] = {}
    inputs: dict[str, str] = {}
    via: dict[str, dict[str, None]] = {}
    for p in parsed:
        reqs.update(dict.fromkeys(r.requirement for r in p.requirements))
        cons.update(dict.fromkeys(c.requirement for c in p.constraints))
        inputs.update(p.files)
        for r in p.requirements:
            via.setdefault(r.name, {})[p.via(r)] = None
    by_platform = _platform_requirements(manifest, root, reqs, via)
    return SourceSet(
        requirements=tuple(reqs),
        constraints=tuple(cons),
        indexes=tuple(i for p in parsed for i in p.indexes),
        backends=tuple(b for p in parsed for b in p.backends),
        prereleases=any(p.prereleases for p in parsed),
        inputs=dict(sorted(inputs.items())),
        via={name: tuple(labels) for name, labels in via.items()},
        project_included=any(p.project_included for p in parsed),
        skipped=tuple((entry, str(origin)) for p in parsed for entry, origin in p.skipped),
        platform_requirements=by_platform,
    )


def _platform_requirements(
    manifest: Manifest, root: Path, common: dict[str, None], via: dict[str, dict[str, None]]
) -> dict[str, tuple[str, ...]]:
    """platform -> the requirements its `[[platform]] extras` add to `common` (each pyproject.toml
    in `from` read with `[packages] extras` and the platform's; an extra the project does not
    declare is the same located error `[packages] extras` gives). `via` gains their labels."""
    from kernodeck.reqfile import parse_pyproject

    pk = manifest.packages
    out: dict[str, tuple[str, ...]] = {}
    for plat in manifest.platform:
        if not plat.extras:
            continue
        added: dict[str, None] = {}
        for entry in (e for e in pk.from_ if is_pyproject(e)):
            extras = list(dict.fromkeys([*pk.extras, *plat.extras]))
            parsed = parse_pyproject(root / entry, extras=extras, display_root=root)
            for r in parsed.requirements:
                if r.requirement not in common:
                    added[r.requirement] = None
                    via.setdefault(r.name, {})[parsed.via(r)] = None
        out[plat.name] = tuple(added)
    return out


def _check_skip(skip: list[str], parsed: list[ParsedRequirements], mfile: Path) -> None:
    """Every `[packages] skip` entry names a line of a `from` requirements file: one that names
    none (the line was fixed or removed) is a located error, never a silent no-op."""
    used = {entry for p in parsed for entry, _ in p.skipped}
    for i, entry in enumerate(skip):
        if entry not in used:
            raise ManifestError(
                [
                    Issue(
                        str(mfile),
                        f"packages.skip[{i}]",
                        f"{redact(entry)!r} names no line of the requirement files in `from`",
                        hint="remove it, or write the line as it stands in the file (or the project it names)",
                    )
                ]
            )


def _index_name(ref: IndexRef, taken: set[str]) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(ref.origin.file).stem).strip("-._") or "requirements"
    n = 1
    while f"{stem}-{n}" in taken:
        n += 1
    return f"{stem}-{n}"


def merge(manifest: Manifest, sources: SourceSet) -> Manifest:
    """The manifest with the sources' requirements, constraints, indexes and `--pre` added."""
    pk = manifest.packages
    if not pk.from_:
        return manifest
    reqs = list(dict.fromkeys([*pk.requirements, *sources.requirements]))
    cons = list(dict.fromkeys([*pk.constraints, *sources.constraints]))
    indexes = list(pk.index)
    taken = {ix.name for ix in indexes}
    urls = {ix.url for ix in indexes}
    pytorch_index = pk.pytorch_index
    has_default = any(ix.default for ix in indexes)
    for ref in sources.indexes:
        found = backend_of_index(ref.url)
        if found is not None:
            # torch and its family are routed to the platform's backend index under this base
            pytorch_index = pytorch_index or found[0]
            continue
        if ref.url in urls:
            continue
        name = _index_name(ref, taken)
        default = ref.kind == "index-url" and not has_default
        has_default = has_default or default
        indexes.append(
            Index(
                name=name,
                url=ref.url,
                default=default,
                format="find-links" if ref.kind == "find-links" else "simple",
            )
        )
        taken.add(name)
        urls.add(ref.url)
    packages = pk.model_copy(
        update={
            "requirements": reqs,
            "constraints": cons,
            "index": indexes,
            "pytorch_index": pytorch_index,
            "prereleases": pk.prereleases or sources.prereleases,
        }
    )
    return manifest.model_copy(update={"packages": packages})


def input_files(manifest: Manifest, manifest_path: Path) -> list[str]:
    """The files `[packages] from` reads, nested `-r`/`-c` included ('/'-separated, relative to the
    manifest's folder), sorted: what a bundle carries as lock inputs ([] without `from`)."""
    if not manifest.packages.from_:
        return []
    return sorted(read_sources(manifest, manifest_path).inputs)


def apply_sources(manifest: Manifest, manifest_path: Path) -> tuple[Manifest, dict[str, str]]:
    """(the manifest with its `from` sources merged in, {input file: sha256}) for a lock."""
    sources = read_sources(manifest, manifest_path)
    return merge(manifest, sources), sources.inputs


def root_via(manifest: Manifest, sources: SourceSet, manifest_name: str) -> dict[str, tuple[str, ...]]:
    """project -> where the manifest as written and its `from` sources require it, for the `# via`
    of the lock files: `-r repro.toml`, `-r requirements/base.txt`, `my-project (pyproject.toml)`.
    Empty without `from` (every requirement is then the manifest's own)."""
    if not manifest.packages.from_:
        return {}
    out: dict[str, list[str]] = {}
    for text in manifest.packages.requirements:
        out.setdefault(canonicalize_name(Requirement(text).name), []).append(f"-r {manifest_name}")
    for name, labels in sources.via.items():
        have = out.setdefault(name, [])
        have += [v for v in labels if v not in have]  # labels of one project are distinct
    return {name: tuple(labels) for name, labels in out.items()}


def backend_mismatches(manifest: Manifest, sources: SourceSet) -> list[str]:
    """Warnings for local labels (`torch==2.3.0+cu121`) that no platform's backend matches."""
    have = {p.backend for p in manifest.platform if p.backend}
    out = []
    for hint in sources.backends:
        if hint.backend not in have:
            out.append(
                f"{hint.origin}: {canonicalize_name(hint.project)}=={hint.version}+{hint.backend} is a "
                f"{hint.backend} build, but no [[platform]] has backend = {hint.backend!r}; "
                "the build comes from each platform's backend"
            )
    return out


def manifest_warnings(manifest: Manifest, manifest_path: Path) -> list[str]:
    """What `kernodeck validate` reads beyond the manifest: every `from` source must be readable
    (a ManifestError, located, when not); warnings for what a later step will need."""
    from kernodeck.manifest.load import format_loc

    check_direct_references(manifest, Path(manifest_path))
    sources = read_sources(manifest, Path(manifest_path))
    out = [
        f"{format_loc(loc)}: {what} has no sha256 yet; `kernodeck capture` computes and records it"
        for loc, what in unfingerprinted(manifest)
    ]
    out += [
        f"{where}: skipped ([packages] skip {redact(entry)!r}): not locked, install it yourself"
        for entry, where in sources.skipped
    ]
    return out + backend_mismatches(manifest, sources)
