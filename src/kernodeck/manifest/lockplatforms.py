"""The platforms a project's own evidence covers, for `kernodeck init` to declare beside the host's.

    found = platform_evidence(Path("."), python, routes, host=("linux", "x86_64"))
    found.covered     # [Covered(Platform(name="macos-arm64-cpu", ...), "uv.lock: resolution-markers, and ...")]
    found.uncovered   # [Uncovered("macos-x86_64-cpu", ..., why="torch 2.7.0 has no wheel for it")]
    found.uncovered[0].comment    # "not proposed: macos-x86_64-cpu (uv.lock: resolution-markers allow it, but ...)"
    found.uncovered[0].host_note  # "uv.lock covers no macos-x86_64 wheel for torch 2.7.0: the first ..."

Evidence, per file:
- Kernodeck's own `requirements-rebuild-<name>.txt` whose name is `<os>-<arch>[-<backend>]`;
- uv.lock and pylock.toml: their platform markers (uv.lock's `supported-markers`, else its
  `resolution-markers`; pylock's `environments`; markers that name no platform variable, such as
  forks on the Python version, are no evidence) AND the wheels locked for what the platform needs;
- poetry.lock: the wheels in its `files` of the packages needed there (with the project's
  pyproject.toml, those its dependencies reach through edges whose `markers` hold; else those
  whose own `markers` hold);
- conda: `formats.condalock` (conda-lock.yml, explicit lock files, environment.yml `platforms:`).

The wheel rule (one place, here): a candidate platform is covered when its markers hold (or the
lock has none) and every package it needs that has at least one wheel and no `any` wheel has, in
at least one of its needed locked versions, a wheel the platform installs
(`targets.Target.supports`). Its sdist does not count: a Kernodeck lock takes wheels, and an sdist
only for names in `[packages] allow-sdist` (`allow_sdist`: at init time, what init proposes there);
a version with an sdist whose name is allowed builds anywhere, as in the project's own lock. A
package with no wheel at all (an sdist only) says nothing about platforms. A lock without markers
whose packages all install anywhere says nothing about platforms. What a platform needs: in
uv.lock (and poetry.lock with the project's pyproject.toml), the packages reachable from the
project's own package(s) (uv.lock's; poetry.lock's from pyproject.toml) through its
`dependencies` and the variant's own extra (what the manifest init writes locks), then every edge
whose marker holds there; elsewhere, the packages whose own marker holds there. The project's
other extras and its dependency groups (`dev` too: init selects none) are not followed: what only
they need never rules a platform out. Below the project, a marker term on
`extra` (or PEP 751's `extras`, `dependency_groups`) holds when it holds for some extra the lock
names (uv writes its conflict extras and groups as `extra == 'extra-7-proj-cpu'`), so no edge is cut
by an extra the user may pick. A package's or
an edge's marker that cannot be read holds; a platform marker that cannot be read is no evidence.

Variants: when the project routes torch to several backends (`routes`, from `manifest.adopt`), a
platform is checked once per backend its OS runs and whose route marker holds there, named
`<os>-<arch>-<backend>`; that check leaves out the other variants' extras and the packages
locked from another backend's PyTorch index (uv.lock's `source.registry`, pylock's `index`).
Candidates are the common platforms (`CANDIDATES`) and the host; their marker environments and
tags come from `targets.Target`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from kernodeck import formats
from kernodeck.backends import backend_of_index, parse_backend
from kernodeck.errors import ManifestError
from kernodeck.formats import Edge, Evidence, LockedPackage, Syntax, Unreadable, parse_text
from kernodeck.formats.condalock import CondaPlatforms, conda_platforms
from kernodeck.lockfile.names import REQUIREMENTS_PREFIX, locked_platforms
from kernodeck.manifest.schema import Platform, Python
from kernodeck.targets import Target

#: Platforms a lock's evidence is tested against (os, arch), in the order they are declared.
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("linux", "x86_64"),
    ("linux", "aarch64"),
    ("macos", "arm64"),
    ("macos", "x86_64"),
    ("windows", "x86_64"),
)

#: What a lock that does not cover this machine means for it (its wheels are what a lock takes).
_MAY_FAIL = "the first lock may fail here"
#: The extra (and group) names a marker tests: `extra == 'x'`, `'x' == extra`, `'x' in extras`.
_EXTRA_NAMES = re.compile(
    r"""\bextra\s*==\s*['"]([^'"]+)['"]|['"]([^'"]+)['"]\s*(?:==\s*extra\b|(?:not\s+)?in\s+(?:extras|dependency_groups)\b)"""
)


class Route(Protocol):
    """A backend the project routes torch to (`manifest.adopt.BackendRoute`)."""

    @property
    def backend(self) -> str: ...
    @property
    def extra(self) -> str | None: ...
    @property
    def marker(self) -> str | None: ...


@dataclass(frozen=True)
class Covered:
    platform: Platform
    evidence: str  # "uv.lock: resolution-markers, and a locked wheel of every package it needs there"
    lock: bool = True  # False: named by a file that is not a lock (an environment file's platforms)

    @property
    def comment(self) -> str:
        what = "covered by the existing lock" if self.lock else "named by the project's conda file"
        return f"{what} ({self.evidence})"


@dataclass(frozen=True)
class Uncovered:
    """A platform the project's evidence does not cover, and why."""

    name: str  # "macos-x86_64", "linux-aarch64-cu128"
    os: str
    arch: str
    backend: str | None
    file: str  # "uv.lock", "environment.yml"
    allowed: str | None  # what allowed it ("resolution-markers allow it"); None: nothing did
    why: str  # "torch 2.7.0 has no wheel for it", "macos runs no cu124 build"
    # the same for this machine's comment: "uv.lock covers no linux-aarch64 wheel for torch 2.7.0: ..."
    host_note: str

    @property
    def comment(self) -> str:
        """The repro.toml line for a platform left out although its evidence allowed it."""
        allowed = f"{self.allowed}, but " if self.allowed else ""
        return f"not proposed: {self.name} ({self.file}: {allowed}{self.why})"


@dataclass(frozen=True)
class _Missing:
    """A needed package without a wheel for a platform ("torch 2.7.0"), and
    whether the lock has an sdist of it (which a lock takes only where allow-sdist names it)."""

    label: str
    sdist: bool

    @property
    def why(self) -> str:
        has = "only a source distribution" if self.sdist else "no wheel"
        return f"{self.label} has {has} for it"


def _no_wheel(p: Platform, lock: str, key: str | None, missing: _Missing) -> Uncovered:
    return Uncovered(
        p.name,
        p.os,
        p.arch,
        p.backend,
        lock,
        f"{key} allow it" if key else None,
        missing.why,
        f"{lock} covers no {p.os}-{p.arch} wheel for {missing.label}: {_MAY_FAIL}",
    )


def _markers_exclude(os_name: str, arch: str, lock: str, key: str) -> Uncovered:
    where = f"{os_name}-{arch}"
    return Uncovered(
        where,
        os_name,
        arch,
        None,
        lock,
        None,
        f"its {key} do not hold there",
        f"{lock}'s {key} do not hold on {where}: {_MAY_FAIL}",
    )


@dataclass
class Found:
    covered: list[Covered] = field(default_factory=list)
    uncovered: list[Uncovered] = field(default_factory=list)


def os_runs(os_name: str, backend: str) -> bool:
    """Whether an OS runs a backend's torch builds (CUDA: Linux and Windows; ROCm: Linux; macOS:
    the CPU and mps builds only)."""
    b = parse_backend(backend)
    return not (
        b is None
        or (os_name == "macos" and b.kind not in ("cpu", "mps"))
        or (b.kind == "rocm" and os_name != "linux")
        or (b.kind == "mps" and os_name != "macos")
    )


@functools.lru_cache(maxsize=4096)
def _marker(text: str) -> Marker | None:
    """A parsed marker (a lock repeats the same few on many edges), None when it cannot be read."""
    try:
        return Marker(text)
    except InvalidMarker:
        return None


def _evaluate(target: Target, text: str, extras: Sequence[str]) -> bool | None:
    """Whether a marker holds on `target` with no extra, or with one of `extras` (PEP 751's
    `extras` and `dependency_groups` then hold every name); None when it cannot be read."""
    parsed = _marker(text)
    if parsed is None:
        return None
    envs: list[dict[str, str | frozenset[str]]] = [
        {"extra": "", "extras": frozenset(), "dependency_groups": frozenset()}
    ]
    if "extra" in text or "dependency_groups" in text:
        names = frozenset(extras)
        envs += [{"extra": e, "extras": names, "dependency_groups": names} for e in extras]
    try:
        return any(parsed.evaluate({**target.markers, **env}) for env in envs)
    except (UndefinedComparison, UndefinedEnvironmentName):
        return None


def _holds(target: Target, marker: str | None, extras: Sequence[str] = ()) -> bool:
    """Whether a package's or an edge's marker holds on `target` (see `_evaluate`); a marker that
    cannot be read holds (the package counts)."""
    return marker is None or _evaluate(target, marker, extras) is not False


def marker_holds_on(os_name: str, arch: str, python: Python, marker: str | None) -> bool:
    """Whether a route's marker holds on that platform, in the marker environment the evidence is
    read in (`targets.Target`); a marker that cannot be read, or a platform Kernodeck has no
    environment for, holds."""
    if marker is None:
        return True
    try:
        target = Target.from_platform(_platform(os_name, arch, None), python)
    except ValueError:
        return True
    return _holds(target, marker)


def _any_holds(target: Target, markers: Iterable[str], extras: Sequence[str]) -> bool:
    """Whether one of a lock's platform markers holds (see `_evaluate`); one that cannot be read is
    no evidence."""
    return any(_evaluate(target, text, extras) for text in markers)


def _wheel_tags(names: Iterable[str]) -> Iterator[frozenset[Tag]]:
    for name in names:
        base = unquote(name.rsplit("/", 1)[-1].split("#", 1)[0])  # `torch-2.7.0%2Bcpu-...whl`
        if not base.endswith(".whl"):
            continue
        try:
            yield parse_wheel_filename(base)[3]
        except InvalidWheelFilename:
            continue


def _platform_tags(pkg: LockedPackage, allowed: frozenset[str]) -> list[frozenset[Tag]] | None:
    """The tag sets of a package's wheels when it has wheels and none for any platform, else None
    (no wheel at all, an `any` wheel, or an sdist whose name `allowed` holds: it builds anywhere)."""
    tags = list(_wheel_tags(pkg.wheels))
    if not tags or any(t.platform == "any" for ts in tags for t in ts):
        return None
    if pkg.has_sdist and canonicalize_name(pkg.name) in allowed:
        return None
    return tags


@dataclass(frozen=True)
class _Variant:
    backend: str | None
    skip_extras: frozenset[str]  # the other variants' extras
    extra: str | None = None  # the extra that selects this variant


_NO_VARIANT = _Variant(None, frozenset())


class _Needs:
    """What a platform needs of one lock (see the module docstring)."""

    def __init__(
        self, packages: list[LockedPackage], markers: list[str], allowed: frozenset[str] = frozenset()
    ) -> None:
        self.packages = packages
        self.allowed = allowed  # canonical names allow-sdist holds
        self.roots = [p for p in packages if p.root]
        self.by_name: dict[str, list[LockedPackage]] = {}
        for p in packages:
            self.by_name.setdefault(canonicalize_name(p.name), []).append(p)
        names = {m.group(1) or m.group(2) for text in markers for m in _EXTRA_NAMES.finditer(text)}
        for p in packages:
            names.update(p.extras)
            names.update(p.groups)
            for edge in _all_edges(p):
                for m in _EXTRA_NAMES.finditer(edge.marker or ""):
                    names.add(m.group(1) or m.group(2))
            names.update(m.group(1) or m.group(2) for m in _EXTRA_NAMES.finditer(p.marker or ""))
        self.extras = sorted(names)
        self._holds: dict[tuple[str, str | None], bool] = {}  # a lock repeats a few markers many times
        self.specific = any(_platform_tags(p, allowed) is not None for p in packages if not p.root)

    def needed(self, target: Target, variant: _Variant) -> list[LockedPackage]:
        """The packages `target` needs in `variant` (see `_root_entries`)."""
        if not self.roots:
            return [
                p for p in self.packages if self.holds(target, p.marker) and _in_variant(p, variant.backend)
            ]
        found: set[int] = set()
        seen: set[tuple[int, str | None]] = set()
        todo = [edge for edges in _root_entries(self.roots, variant) for edge in edges]
        while todo:
            edge = todo.pop()
            if not self.holds(target, edge.marker):
                continue
            for dep in self._packages_of(edge):
                if not _in_variant(dep, variant.backend):
                    continue
                found.add(id(dep))
                for group in (None, *edge.extras):
                    if (id(dep), group) not in seen:
                        seen.add((id(dep), group))
                        todo.extend(dep.edges if group is None else dep.extras.get(group, ()))
        return [p for p in self.packages if id(p) in found and not p.root]

    def holds(self, target: Target, marker: str | None) -> bool:
        """`_holds` with the lock's extras, remembered per target and marker."""
        key = (target.name, marker)
        if key not in self._holds:
            self._holds[key] = _holds(target, marker, self.extras)
        return self._holds[key]

    def _packages_of(self, edge: Edge) -> list[LockedPackage]:
        return [
            p
            for p in self.by_name.get(canonicalize_name(edge.name), [])
            if (edge.version is None or p.version == edge.version)
            and (edge.source is None or p.source is None or p.source == edge.source)
        ]


def _all_edges(p: LockedPackage) -> Iterator[Edge]:
    yield from p.edges
    for table in (p.extras, p.groups):
        for edges in table.values():
            yield from edges


def _root_entries(roots: list[LockedPackage], variant: _Variant) -> Iterator[Sequence[Edge]]:
    """The project's edges a platform needs: what the manifest init writes locks there, its
    dependencies and the variant's own extra. Its other extras and its dependency groups (uv's
    and Poetry's `dev` included: init selects none) are left out: what only they need never rules
    a platform out."""
    for root in roots:
        yield root.edges
        if variant.extra is not None:
            yield root.extras.get(variant.extra, ())


def _in_variant(p: LockedPackage, backend: str | None) -> bool:
    """False for a package locked from another backend's PyTorch index than `backend`'s."""
    if backend is None or p.source is None:
        return True
    found = backend_of_index(p.source)
    return found is None or found[1] == backend


def _missing(needed: list[LockedPackage], target: Target, allowed: frozenset[str]) -> _Missing | None:
    """The first needed package (by name, over its needed versions) with only platform-specific
    wheels, none of which `target` installs ("torch 2.7.0"); None when every one has a wheel (see
    `_platform_tags`)."""
    by_name: dict[str, list[LockedPackage]] = {}
    for p in needed:
        by_name.setdefault(canonicalize_name(p.name), []).append(p)
    for versions in by_name.values():
        tags = [_platform_tags(p, allowed) for p in versions]
        if any(t is None or any(target.supports(ts) for ts in t) for t in tags):
            continue
        label = " ".join([versions[0].name, " / ".join(p.version for p in versions if p.version)]).strip()
        return _Missing(label, any(p.has_sdist for p in versions))
    return None


def _variants(target: Target, routes: Sequence[Route]) -> list[_Variant]:
    """The variants `target` is checked in: one per backend its OS runs and whose route marker
    holds there; [no variant] without routes, or where only marker routes exist and none holds."""
    if not routes:
        return [_NO_VARIANT]
    out: dict[str, _Variant] = {}
    for r in routes:
        if r.backend in out or not os_runs(target.os, r.backend) or not _holds(target, r.marker):
            continue
        others = frozenset(o.extra for o in routes if o.extra and o.backend != r.backend)
        out[r.backend] = _Variant(r.backend, others, r.extra)
    if not out and all(r.marker for r in routes):
        return [_NO_VARIANT]
    return list(out.values())


def _platform(os_name: str, arch: str, backend: str | None) -> Platform:
    name = f"{os_name}-{arch}" + (f"-{backend}" if backend else "")
    return Platform(name=name, os=os_name, arch=arch, backend=backend)  # type: ignore[arg-type]


def _targets(python: Python, host: tuple[str, str] | None) -> dict[tuple[str, str], Target]:
    """The candidate platforms (os, arch), the host's included, with their targets."""
    pairs = list(CANDIDATES)
    if host is not None and host not in pairs:
        pairs.append(host)
    out = {}
    for os_name, arch in pairs:
        try:
            out[(os_name, arch)] = Target.from_platform(_platform(os_name, arch, None), python)
        except ValueError:  # a host Kernodeck has no tags for
            continue
    return out


def _lock_verdicts(
    lock: str,
    evidence: Evidence,
    targets: dict[tuple[str, str], Target],
    routes: Sequence[Route],
    host: tuple[str, str] | None,
    allowed: frozenset[str],
) -> Iterator[Covered | Uncovered]:
    """Every candidate platform (per variant) the lock covers, or why not."""
    needs = _Needs(evidence.packages, evidence.markers, allowed)
    if not evidence.markers and not needs.specific:
        return  # a pure-Python lock without markers says nothing about platforms
    wheels = "a locked wheel of every package it needs there"
    key = f"{lock}: {evidence.key}, and {wheels}" if evidence.markers else f"{lock}: {wheels}"
    marker_key = evidence.key if evidence.markers else None
    for (os_name, arch), target in targets.items():
        if evidence.markers and not _any_holds(target, evidence.markers, needs.extras):
            if (os_name, arch) == host:
                yield _markers_exclude(os_name, arch, lock, evidence.key)
            continue
        for v in _variants(target, routes):
            p = _platform(os_name, arch, v.backend)
            missing = _missing(needs.needed(target, v), target, allowed)
            if missing is None:
                yield Covered(p, key)
            else:
                yield _no_wheel(p, lock, marker_key, missing)


def _load(path: Path, syntax: Syntax) -> Any:
    """The parsed lock, or None when it cannot be read (a lock that says nothing); nested too deep:
    ManifestError, located."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    data = parse_text(text, path.name, syntax)
    return None if isinstance(data, Unreadable) else data


def _project_data(folder: Path) -> Any:
    """The project's parsed pyproject.toml (poetry.lock's root), None when it cannot be read: init
    has already said why (`manifest.adopt`), and a lock's evidence then counts every package."""
    try:
        return _load(folder / "pyproject.toml", "toml")
    except ManifestError:
        return None


def _own_locks(folder: Path) -> Iterator[Covered]:
    for name, paths in locked_platforms(folder).items():
        path = paths[0]
        if not path.name.startswith(REQUIREMENTS_PREFIX):
            continue  # a pylock file alone
        parts = name.split("-", 2)
        if len(parts) < 2:
            continue
        try:
            p = Platform(
                name=name,
                os=parts[0],  # type: ignore[arg-type]
                arch=parts[1],  # type: ignore[arg-type]
                backend=parts[2] if len(parts) > 2 else None,
            )
        except ValueError:  # pydantic's ValidationError: not a platform Kernodeck names
            continue
        yield Covered(p, path.name)


def _conda(
    folder: Path,
    targets: dict[tuple[str, str], Target],
    routes: Sequence[Route],
    host: tuple[str, str] | None,
) -> Iterator[Covered | Uncovered]:
    """The platforms conda files name (per variant), each with its evidence; one whose OS runs
    none of the project's variants is left out, and says so (this machine keeps its own)."""
    for found in conda_platforms(folder):
        for os_name, arch in found.platforms:
            target = targets.get((os_name, arch))
            variants = _variants(target, routes) if target is not None else [_NO_VARIANT]
            for v in variants:
                yield Covered(_platform(os_name, arch, v.backend), found.evidence, found.lock)
            if not variants and (os_name, arch) != host:
                runs = ", ".join(dict.fromkeys(r.backend for r in routes))
                why = f"{os_name} runs no {runs} build"
                yield Uncovered(
                    f"{os_name}-{arch}", os_name, arch, None, found.file, f"{found.key} names it", why, why
                )
        if host is not None and host not in found.platforms:
            yield _conda_not_host(found, host)


def _conda_not_host(found: CondaPlatforms, host: tuple[str, str]) -> Uncovered:
    """A conda file that names other platforms than this machine's, for its comment."""
    where = "-".join(host)
    note = f"{found.file} locks no {where}" if found.lock else f"{found.file}'s {found.key} name no {where}"
    return Uncovered(where, host[0], host[1], None, found.file, None, note, note)


def platform_evidence(
    folder: Path,
    python: Python,
    routes: Sequence[Route] = (),
    host: tuple[str, str] | None = None,
    allow_sdist: Iterable[str] = (),
) -> Found:
    """The platforms the project's evidence in `folder` covers (Kernodeck's own locks first), one
    per name, and those it leaves out with why; `host` (os, arch) is checked beside CANDIDATES;
    `allow_sdist`: the names `[packages] allow-sdist` holds (see the wheel rule)."""
    targets = _targets(python, host)
    allowed = frozenset(canonicalize_name(n) for n in allow_sdist)
    pyproject = _project_data(folder)
    covered: dict[str, Covered] = {}
    uncovered: list[Uncovered] = []
    verdicts: list[Iterable[Covered | Uncovered]] = [
        _own_locks(folder),
        _conda(folder, targets, routes, host),
    ]
    for fmt in formats.locks():
        data = _load(folder / fmt.NAME, fmt.SYNTAX)
        if data is not None:
            evidence = fmt.evidence(data, pyproject)
            verdicts.append(_lock_verdicts(fmt.NAME, evidence, targets, routes, host, allowed))
    for v in (v for each in verdicts for v in each):
        if isinstance(v, Covered):
            covered.setdefault(v.platform.name, v)
        else:
            uncovered.append(v)
    return Found(
        list(covered.values()),
        [u for u in uncovered if u.name not in covered],
    )


def covered_platforms(
    folder: Path, python: Python, routes: Sequence[Route] = (), allow_sdist: Iterable[str] = ()
) -> list[Covered]:
    """The platforms the project's evidence in `folder` covers (see `platform_evidence`)."""
    return platform_evidence(folder, python, routes, allow_sdist=allow_sdist).covered
