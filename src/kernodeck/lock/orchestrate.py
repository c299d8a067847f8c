"""`kernodeck lock` as a Python API: manifest -> targets -> resolve -> write.

    result = lock_manifest("repro.toml")                      # every platform
    result = lock_manifest("repro.toml", ["linux-x86_64-cpu"], check=True)
    result.ok, result.platforms[0].status, result.platforms[0].diff

Every requested platform is resolved before anything is written. A platform that cannot be
locked (an unreachable index, no solution, no wheel) leaves its previous files untouched and is
reported in `result.failed`; the other platforms are still written.

Freshness: each file's header records `lock-inputs-sha256` (kernodeck.lock.inputs), the digest of
exactly what can change its pins, so edits elsewhere in the manifest never make a lock stale.

Joint resolution (`[packages] same-versions`, kernodeck.resolve.joint): unless "no", a package on
several platforms gets one public version on all of them wherever one exists; what still differs
is reported in `result.differences` and as a comment in each affected file's header; "require"
makes a difference a failure of the platforms involved.

Locker independence: the indexes come from the manifest only; without a declared default index,
pip's built-in default (PyPI) is used, never the locker's pip configuration or `PIP_*` variables.
Settings of the locker's pip that are not used are named once in `result.notices`. A mirror
(`mirrors={"NAME": URL}`, or `KERNODECK_MIRRORS="NAME=URL ..."`; NAME a declared index, `default`
or `pytorch`) changes where pages are fetched, never what is written: the files name the index
as declared. Platforms resolve concurrently and share one index client (and its
caches), so metadata read for one platform serves every other platform that installs the same file.

Unless `upgrade`, the versions pinned in the existing requirements file of a platform are tried
first (minimal churn, like pip-tools and uv); `upgrade_packages` drops that preference for the
named projects only.

Replay (kernodeck.lock.replay): a finished lock is recorded in the index cache under a key made of
everything it was computed from, and an unchanged re-lock reproduces it without resolving while
every project page it read still stands. `refresh` never replays; locks that read local folders,
download files to hash them, or use credentials are never recorded.

The stages live in one module each; this one orchestrates them and is the public API:
  - kernodeck.lock.mirrors   mirrors: parse `NAME=URL`, fetch from them, map URLs back;
  - kernodeck.lock.convert   one platform's resolution -> PlatformLock -> rendered text, stale reasons;
  - kernodeck.lock.replay    the replay cache: key, lookup, store;
  - kernodeck.lockfile      file names, renderers and the reader (the existing pins preferred);
  - kernodeck.commands.lock the command line, which alone decides on a progress display.
"""

from __future__ import annotations

import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from kernodeck.errors import EXIT_USAGE, IndexError_, KernodeckError, ResolutionError, UsageError
from kernodeck.index.cache import IndexCache
from kernodeck.lock import replay as lockreplay
from kernodeck.lock.convert import Format, Rendered, diff, platform_lock, render, stale_reasons
from kernodeck.lock.inputs import default_index_for, lock_inputs_sha256, pin_inputs, stale_inputs
from kernodeck.lock.mirrors import mirror_hint, mirrored, parse_mirrors, replace_all, unmirror
from kernodeck.lock.stats import LockStats
from kernodeck.lockfile.leftover import LeftOver, left_over, remove
from kernodeck.lockfile.names import is_lock_file, manifest_file, pylock_filename, requirements_filename
from kernodeck.lockfile.read import conflict_note, pins_of_text, read_pins
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.sources import SourceSet, check_direct_references, merge, read_sources, root_via
from kernodeck.support import envvars
from kernodeck.support.fsio import interrupted_set, write_set
from kernodeck.support.gctune import fewer_collections
from kernodeck.support.urls import redact, strip_userinfo

if TYPE_CHECKING:
    from typing import Any

    from packaging.utils import NormalizedName

    from kernodeck.lockfile.write import PlatformLock
    from kernodeck.manifest.pinreport import PinReport
    from kernodeck.manifest.schema import Manifest, Packages
    from kernodeck.resolve import Follower, Resolution, Routing, Session
    from kernodeck.resolve.candidates import Candidate
    from kernodeck.resolve.joint import Constraints, Difference, Held
    from kernodeck.targets import Target

__all__ = [
    "Format",
    "LockProgress",
    "LockResult",
    "PlatformFailure",
    "PlatformResult",
    "Status",
    "lock_manifest",
    "parse_mirrors",
    "pins_of_text",
    "read_pins",
]

Status = Literal["written", "unchanged", "fresh", "stale", "missing"]


class LockProgress(Protocol):
    """What lock_manifest reports while it works. The library never decides to show anything:
    `kernodeck lock` passes `commands.lock.RichProgress` when stderr is a terminal and not -q;
    a caller of the API passes its own or none (the default)."""

    def start(self, platforms: Sequence[str]) -> None: ...
    def pinned(self, platform: str, what: str) -> None: ...
    def metadata(self, platform: str) -> None: ...
    def done(self, platform: str, pins: int) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class PlatformResult:
    platform: str
    summary: str  # the target, e.g. "cpython 3.11, manylinux_2_28 x86_64, backend cu126"
    requirements_path: Path
    pylock_path: Path | None
    status: Status  # written/unchanged (lock), fresh/stale/missing (--check)
    pins: int
    hash_lines: int
    text: str  # the requirements file content
    diff: str = ""  # --check: unified diff of what would change
    reasons: tuple[str, ...] = ()  # --check: why the file is stale, in words
    warnings: tuple[str, ...] = ()  # e.g. an exact pin that selects a yanked release


@dataclass(frozen=True)
class PlatformFailure:
    """A platform that could not be locked; its files were left as they were."""

    platform: str
    index_url: str  # the index involved (credentials removed)
    cause: str  # the first cause, one line
    error: KernodeckError
    # --check: what the file on disk is, judged from the lock inputs alone (no index needed):
    # "requirements-rebuild-X.txt is stale (inputs changed: ...)", "no file for declared
    # platform X (...)"; None when its recorded inputs are the ones now (or not --check)
    on_disk: str | None = None

    def message(self) -> str:
        return f"cannot lock platform {self.platform}: {self.cause} (index {self.index_url})"

    def details(self) -> tuple[list[str], str | None]:
        """(the error's context lines, its hint), fit to print: why the first cause happened
        (e.g. `ConnectError: [Errno -2] Name or service not known`). The index line the message
        already names is left out."""
        context = [redact(c) for c in self.error.context]
        context = [c for c in context if strip_userinfo(c.removeprefix("index: ")) != self.index_url]
        return context, redact(self.error.hint) if self.error.hint else None


@dataclass(frozen=True)
class LockResult:
    manifest_path: Path
    platforms: tuple[PlatformResult, ...]
    check: bool
    seconds: float
    metadata_reads: int  # core metadata documents read (cache or network) in this lock
    failed: tuple[PlatformFailure, ...] = ()
    differences: tuple[Difference, ...] = ()  # versions that still differ across platforms
    held: tuple[Held, ...] = ()  # versions a platform takes older than on its own, to match others
    notices: tuple[str, ...] = ()  # e.g. the locker's pip settings that were not used
    adopted: tuple[PinReport, ...] = ()  # first lock after init: the preferred pins kept/changed
    # lock files of platforms the manifest no longer declares: removed by a lock, named by --check
    left_over: tuple[LeftOver, ...] = ()
    stats: LockStats | None = None  # what the lock did (requests, cache hits, rounds, CPU)

    @property
    def ok(self) -> bool:
        return not self.stale and not self.failed and not (self.check and self.left_over)

    @property
    def stale(self) -> tuple[PlatformResult, ...]:
        return tuple(p for p in self.platforms if p.status in ("stale", "missing"))

    @property
    def written(self) -> tuple[Path, ...]:
        out: list[Path] = []
        for p in self.platforms:
            if p.status == "written":
                out.append(p.requirements_path)
                if p.pylock_path is not None:
                    out.append(p.pylock_path)
        return tuple(out)


def _select(m: Manifest, platforms: Iterable[str] | None) -> list[str]:
    known = [p.name for p in m.platform]
    if not platforms:
        return known
    wanted = list(dict.fromkeys(platforms))
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise UsageError(
            f"unknown platform {unknown[0]!r}",
            context=[f"platforms in the manifest: {', '.join(known)}"],
            hint="pass --platform with one of those names, or none for all",
        )
    return [n for n in known if n in wanted]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _first_lock_source(folder: Path) -> tuple[str, dict[str, Version], str | None] | None:
    """The pins a platform's first lock prefers (`kernodeck.manifest.adopt`, imported only for a
    first lock: a re-lock never reads the project's other lock files)."""
    from kernodeck.manifest.adopt import first_lock_source

    return first_lock_source(folder)


def _upgrade_requirement(text: str) -> Requirement:
    """`NAME` or `NAME<specifier>` given to --upgrade-package."""
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        raise UsageError(
            f"--upgrade-package {text!r} is not a package name or requirement: {str(e).splitlines()[0]}",
            hint="e.g. --upgrade-package numpy or --upgrade-package 'numpy<2.3'",
        ) from None
    if req.url or req.marker or req.extras:
        raise UsageError(
            f"--upgrade-package {text!r}: give a name and optionally a version specifier, nothing else"
        )
    return req


@dataclass(frozen=True)
class _Plan:
    """What a lock works from, read and checked before anything is resolved."""

    path: Path
    written: Manifest  # as in repro.toml, before `from` sources were merged
    sources: SourceSet
    inputs: dict[str, str]  # the files read (sources), a pyproject.toml by its pin parts
    manifest: Manifest  # sources merged, --upgrade-package specifiers added as constraints
    names: list[str]
    out_dir: Path
    default_index: str | None
    mirrors: dict[str, str]
    digests: dict[str, str]
    prefs: dict[str, dict[str, Version]]
    firsts: dict[str, tuple[str, dict[str, Version]]]  # first locks: the adopted pins' source
    notices: list[str]
    constrained: bool  # --upgrade-package NAME<SPEC> was given: the lock is not recorded


@dataclass(frozen=True)
class Resolved:
    """What resolving (or replaying) gives: the files of the platforms that could be locked and
    the failures of the others, with what joint resolution left different or held back."""

    rendered: dict[str, Rendered]
    failures: dict[str, PlatformFailure] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    metadata_reads: int = 0
    pages: list[dict[str, Any]] | None = None  # the pages read; None: the lock cannot be replayed


def lock_manifest(
    manifest_path: str | os.PathLike[str] = "repro.toml",
    platforms: Sequence[str] | None = None,
    *,
    output_dir: str | os.PathLike[str] | None = None,
    check: bool = False,
    upgrade: bool = False,
    upgrade_packages: Sequence[str] = (),
    offline: bool = False,
    fmt: Format = "requirements",
    refresh: bool = False,
    quiet: bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: LockProgress | None = None,
    extra_inputs: Mapping[str, str] | None = None,
    mirrors: Sequence[str] | None = None,
) -> LockResult:
    """Lock a manifest for its platforms; raises ManifestError/UsageError (bad input). A platform
    that cannot be locked (failed resolution, unreadable index) is reported in `result.failed`.
    `extra_inputs` (name -> sha256) join each platform's lock-inputs digest. `progress` receives
    what the lock does while it works (none by default); `quiet` is accepted for callers of
    earlier releases with a DeprecationWarning and has no effect: the library shows nothing on
    its own."""
    if quiet is not None:
        warnings.warn(
            "lock_manifest(quiet=...) has no effect: the library shows no progress of its own; "
            "pass progress=... (a LockProgress) to follow a lock",
            DeprecationWarning,
            stacklevel=2,
        )
    started = time.perf_counter()
    stats = LockStats()
    if fmt not in ("requirements", "pylock"):
        raise UsageError(f"unknown format {fmt!r}", hint="use --format requirements or --format pylock")
    plan = _plan(manifest_path, platforms, output_dir, upgrade, upgrade_packages, extra_inputs or {}, mirrors)
    cache = IndexCache(Path(cache_dir) if cache_dir is not None else envvars.cache_dir())
    key = None if plan.constrained else _replay_key(plan, fmt, plan.prefs)
    replay = (
        None
        if (key is None or refresh)
        else lockreplay.lookup(cache, key, plan.manifest, offline, plan.names)
    )
    if replay is not None:
        resolved = _replayed(replay, plan.names, progress)
        stats.replayed = True
    else:
        with fewer_collections():  # index pages decode into many long-lived objects
            resolved = _resolve_and_render(
                plan,
                fmt=fmt,
                offline=offline,
                refresh=refresh,
                cache_dir=cache_dir,
                progress=progress,
                stats=stats,
            )
        if check and resolved.failures:
            resolved = replace(resolved, failures=_judged_on_disk(plan, resolved.failures, fmt))
        _raise_when_nothing_locked(plan, resolved)
        if key is not None and resolved.pages is not None and not resolved.failures:
            _record(cache, plan, fmt, key, resolved.pages, resolved, check)
    failures = resolved.failures
    result = _finish(
        plan.path,
        plan.out_dir,
        [n for n in plan.names if n not in failures],
        resolved.rendered,
        manifest=plan.manifest,
        fmt=fmt,
        check=check,
        started=started,
        metadata_reads=resolved.metadata_reads,
        failed=tuple(failures[n] for n in plan.names if n in failures),
        differences=tuple(resolved.differences),
        held=tuple(resolved.held),
        notices=tuple(plan.notices),
        own=plan.sources.platform_requirements,
        # a lock of chosen platforms leaves the others' files alone
        left=left_over(plan.out_dir, plan.path.name, {p.name for p in plan.manifest.platform})
        if not platforms
        else [],
    )
    result = replace(result, stats=stats.done())
    if not plan.firsts or check:  # the pin report is for a platform's first written lock only
        return result
    from kernodeck.manifest.pinreport import first_lock_reports

    locked = {n: pins_of_text(resolved.rendered[n].text) for n in plan.firsts if n not in failures}
    return replace(result, adopted=first_lock_reports(plan.manifest, plan.path, plan.firsts, locked))


def _plan(
    manifest_path: str | os.PathLike[str],
    platforms: Sequence[str] | None,
    output_dir: str | os.PathLike[str] | None,
    upgrade: bool,
    upgrade_packages: Sequence[str],
    extra_inputs: Mapping[str, str],
    mirrors: Sequence[str] | None,
) -> _Plan:
    """Read the manifest and its sources, and decide everything a lock works from."""
    path = manifest_file(manifest_path)
    written = load_manifest(path)
    check_direct_references(written, path)  # what no index can lock stops the lock here (exit 2)
    sources = read_sources(written, path)  # [packages] from: files read now
    manifest = merge(written, sources)
    names = _select(manifest, platforms)
    out_dir = Path(output_dir) if output_dir is not None else path.parent
    upgrades = [_upgrade_requirement(u) for u in upgrade_packages]
    default_index = default_index_for(manifest)
    mirror_map = parse_mirrors(manifest, envvars.MIRRORS.words() if mirrors is None else mirrors)
    notices = _pip_notices(manifest)
    notices += [
        f"{where}: skipped ([packages] skip {redact(entry)!r}): not locked"
        for entry, where in sources.skipped
    ]
    if not manifest.packages.requirements and not any(sources.platform_requirements.values()):
        notices.append(
            f"{path.name} lists no requirements ([packages] requirements and `from` give none): "
            "the lock files hold no packages"
        )
    # The digest is of the manifest as written: --upgrade-package constraints are a one-off choice.
    inputs = pin_inputs(sources.inputs, path.parent)  # a pyproject.toml by its pin parts
    extra = {**inputs, **extra_inputs}
    digests = {n: lock_inputs_sha256(manifest, n, default_index=default_index, extra=extra) for n in names}
    # `--upgrade-package NAME<SPEC>` (as in pip-compile and uv) also constrains NAME for this lock.
    extra_constraints = [str(r) for r in upgrades if r.specifier]
    if extra_constraints:
        packages = manifest.packages.model_copy(
            update={"constraints": [*manifest.packages.constraints, *extra_constraints]}
        )
        manifest = manifest.model_copy(update={"packages": packages})
    skip = {canonicalize_name(r.name) for r in upgrades}
    prefs, firsts = _preferences(names, path, out_dir, upgrade, skip, notices)
    return _Plan(
        path=path,
        written=written,
        sources=sources,
        inputs=inputs,
        manifest=manifest,
        names=names,
        out_dir=out_dir,
        default_index=default_index,
        mirrors=mirror_map,
        digests=digests,
        prefs=prefs,
        firsts=firsts,
        notices=notices,
        constrained=bool(extra_constraints),
    )


def _preferences(
    names: Sequence[str],
    path: Path,
    out_dir: Path,
    upgrade: bool,
    skip: set[NormalizedName],
    notices: list[str],
) -> tuple[dict[str, dict[str, Version]], dict[str, tuple[str, dict[str, Version]]]]:
    """(the pins each platform prefers, the source of those a first lock adopts): a platform's
    existing file, else on a first lock the project's uv.lock/pylock.toml/poetry.lock/Pipfile.lock;
    none with --upgrade, and none of the --upgrade-package names."""
    prefs: dict[str, dict[str, Version]] = {}
    firsts: dict[str, tuple[str, dict[str, Version]]] = {}
    for n in names:
        pinned = {} if upgrade else read_pins(out_dir / requirements_filename(n))
        first = None if upgrade or pinned else _first_lock_source(path.parent)
        if first is not None:
            source, pinned, note = first
            firsts[n] = (source, pinned)
            if note is not None and note not in notices:
                notices.append(note)
        prefs[n] = {k: v for k, v in pinned.items() if k not in skip}
    return prefs, firsts


def _replay_key(plan: _Plan, fmt: Format, prefs: dict[str, dict[str, Version]]) -> str | None:
    return lockreplay.replay_key(
        plan.manifest, plan.digests, plan.path.name, plan.names, fmt, prefs, plan.mirrors
    )


def _replayed(replay: lockreplay.Replay, names: Sequence[str], progress: LockProgress | None) -> Resolved:
    if progress is not None:
        progress.start(names)
        for n in names:
            progress.done(n, replay.rendered[n].pins)
        progress.close()
    return Resolved(dict(replay.rendered), differences=list(replay.differences), held=list(replay.held))


def _judged_on_disk(
    plan: _Plan, failures: Mapping[str, PlatformFailure], fmt: Format
) -> dict[str, PlatformFailure]:
    """`lock --check` of platforms that could not be re-resolved: whether each one's file is
    missing or stale is still known from its header and the lock inputs now."""
    out = {}
    for name, failure in failures.items():
        fname = requirements_filename(name) if fmt == "requirements" else pylock_filename(name)
        text = _read(plan.out_dir / fname)
        if text is None:
            verdict: str | None = f"no file for declared platform {name} ({fname})"
        else:
            reasons = stale_inputs(text, plan.digests[name], plan.inputs)
            verdict = f"{fname} is stale (inputs changed: {'; '.join(reasons)})" if reasons else None
        out[name] = replace(failure, on_disk=verdict)
    return out


def _raise_when_nothing_locked(plan: _Plan, resolved: Resolved) -> None:
    """Nothing could be locked: the error itself, as for a single platform."""
    failures = resolved.failures
    if not failures or len(failures) != len(plan.names):
        return
    declared = next((ix.url for ix in plan.manifest.packages.index if ix.default), None)
    raise _combine_failures(
        [failures[n] for n in plan.names], None if plan.mirrors else declared or plan.default_index
    )


def _record(
    cache: IndexCache,
    plan: _Plan,
    fmt: Format,
    key: str,
    pages: list[dict[str, Any]],
    resolved: Resolved,
    check: bool,
) -> None:
    """Record the lock for replay. The next run prefers the pins this run writes: record it under
    that run's key too, so the first re-lock after a lock replays (the resolution, with its own
    output preferred, can only come out the same)."""
    next_prefs = {n: pins_of_text(resolved.rendered[n].text) for n in plan.names}
    next_key = None if check else _replay_key(plan, fmt, next_prefs)
    lockreplay.store(cache, (key, next_key), pages, resolved.rendered, resolved.differences, resolved.held)
    _note_refused_cache(cache, plan.notices)


def _pip_notices(manifest: Manifest) -> list[str]:
    """One notice naming the locker's pip index settings that the lock does not use."""
    from kernodeck.index.sources import locker_pip_settings

    settings = locker_pip_settings()
    if not settings:
        return []
    # one entry per setting and value, naming every place it is set (env and config files)
    where: dict[tuple[str, str], list[str]] = {}
    for s in settings:
        where.setdefault((s.name, s.value), []).append(s.where)
    named = "; ".join(f"{name} {value} ({', '.join(places)})" for (name, value), places in where.items())
    return [
        f"not used for the lock (only repro.toml decides the indexes): {named}; to use an index, "
        "declare it in repro.toml as [[packages.index]] with a name and url"
    ]


class _Locker:
    """One lock's resolution of its platforms: the leader, its followers, the platforms resolved
    on their own, then joint resolution. Everything here shares one session (and its caches)."""

    def __init__(
        self, plan: _Plan, session: Session, targets: Mapping[str, Target], progress: LockProgress | None
    ) -> None:
        self.plan = plan
        self.session = session
        self.targets = targets
        self.progress = progress
        self.results: dict[str, Resolution] = {}
        self.errors: dict[str, KernodeckError] = {}
        self.followers: dict[str, Follower] = {}
        self._lock = threading.Lock()

    def _on_pin(self, name: str) -> Callable[[str], None] | None:
        progress = self.progress
        return (lambda what: progress.pinned(name, what)) if progress is not None else None

    def _on_metadata(self, name: str) -> Callable[[], None] | None:
        progress = self.progress
        return (lambda: progress.metadata(name)) if progress is not None else None

    def resolve(
        self, name: str, extra: Constraints, *, leading: bool = False, preferred: bool = True
    ) -> Resolution:
        """`name` resolved on its own with `extra` constraints (joint resolution's callback)."""
        from kernodeck.resolve import resolve_target

        return resolve_target(
            self.session,
            self.targets[name],
            preferred=self.plan.prefs[name] if preferred else {},
            manifest_name=self.plan.path.name,
            on_pin=self._on_pin(name),
            on_metadata=self._on_metadata(name),
            extra_constraints=[Requirement(f"{n}{spec}") for n, spec in sorted(extra.items())],
            on_candidate=self._ahead_of_pin if leading else None,
            on_likely=self._ahead if leading else None,
        )

    def installable(self, name: str, project: NormalizedName) -> list[Version]:
        """The public versions of `project` platform `name` has files for (joint resolution's)."""
        from kernodeck.resolve.factory import Factory

        return Factory(self.session, self.targets[name]).installable(project)

    def _ahead(self, project: NormalizedName, version: Version) -> None:
        for f in self.followers.values():
            f.ahead(project, version)

    def _ahead_of_pin(self, candidate: Candidate) -> None:
        self._ahead(candidate.name, candidate.version)

    def _follow(self, name: str, leader: Resolution) -> Resolution | None:
        """The leader's versions checked on `name`; None when it must be resolved on its own
        (the walk failed, or it would take a newer version of something on its own)."""
        from kernodeck.resolve import follow_target
        from kernodeck.resolve.follow import newer_alone

        follower = self.followers[name]
        res = follow_target(
            self.session, self.targets[name], leader, manifest_name=self.plan.path.name, follower=follower
        )
        return None if res is None or newer_alone(follower, res) else res

    def run(self, name: str, leader: Resolution | None = None) -> None:
        """Lock one platform: the leader's versions checked here, else a search."""
        try:
            res = self._follow(name, leader) if leader is not None else None
            if res is None:
                res = self.resolve(name, {}, leading=bool(self.followers) and name == self.plan.names[0])
        except KernodeckError as e:
            with self._lock:
                self.errors[name] = e
            return
        with self._lock:
            self.results[name] = res

    def run_all(self) -> None:
        """One platform is resolved; with versions shared, the others take its versions where
        they can (one walk of their dependency graph each) and are resolved on their own only
        where they cannot. Their reads start as the leader reads each version ahead, or pins it."""
        from kernodeck.resolve import Follower

        order = list(self.targets)
        if self.plan.manifest.packages.same_versions != "no" and len(order) > 1:
            self.followers = {
                n: Follower(
                    self.session,
                    self.targets[n],
                    preferred=self.plan.prefs[n],
                    on_pin=self._on_pin(n),
                    on_metadata=self._on_metadata(n),
                )
                for n in order[1:]
            }
        leader: Resolution | None = None
        if self.followers:
            self.run(order[0])
            leader = self.results.get(order[0])
            order = order[1:]
        with ThreadPoolExecutor(
            max_workers=max(1, min(len(order), 8)), thread_name_prefix="kernodeck-lock"
        ) as pool:
            list(pool.map(self.run, order, [leader] * len(order)))

    def align(self) -> tuple[list[Difference], list[Held]]:
        """Joint resolution of the platforms resolved; with "require", a difference fails the
        platforms it involves."""
        from kernodeck.resolve.joint import align

        same = self.plan.manifest.packages.same_versions
        if same == "no":
            return [], []
        differences: list[Difference] = []
        held: list[Held] = []
        for group in _extras_groups(self.plan.manifest, [n for n in self.plan.names if n in self.results]):
            if len(group) <= 1:
                continue
            aligned, diffs, helds = align(
                {n: self.results[n] for n in group},
                self.resolve,
                installable=self.installable,
                preferred=self.plan.prefs,
            )
            self.results.update(aligned)
            differences += diffs
            held += helds
        if same == "require":
            for d in differences:
                for n in d.versions:
                    self.errors.setdefault(
                        n,
                        ResolutionError(
                            f"cannot lock platform {n}: {d.describe()} "
                            '(same-versions = "require" allows no difference)'
                        ),
                    )
        return differences, held

    def platform_locks(
        self, differences: Sequence[Difference], back: Sequence[tuple[str, str]]
    ) -> dict[str, PlatformLock]:
        plan = self.plan
        via = root_via(plan.written, plan.sources, plan.path.name)
        declared = unmirror(list(back))
        locks = {}
        for n in plan.names:
            if n in self.errors:
                continue
            locks[n] = platform_lock(
                self.results[n],
                self.session,
                manifest_name=plan.path.name,
                lock_inputs=plan.digests[n],
                inputs=plan.inputs,
                via=via,
                python_version=next(
                    p.python or plan.manifest.python.version for p in plan.manifest.platform if p.name == n
                ),
                # held-back versions are said in the summary only: with the existing pins
                # preferred, the next lock keeps them without holding anything back
                notes=tuple(replace_all(d.note_for(n), list(back)) for d in differences if n in d.versions),
                unmirror=declared,
            )
        return locks


def _extras_groups(manifest: Manifest, names: Iterable[str]) -> list[list[str]]:
    """The platforms aligned together: those whose own `[[platform]] extras` are the same. A
    variant's extra asks for its own torch (cu124's torch>=2.5.1, cu130's torch>=2.9.1), so its
    versions are not forced onto, nor said to differ from, a platform with another extra."""
    own = {p.name: frozenset(canonicalize_name(e) for e in p.extras) for p in manifest.platform}
    groups: dict[frozenset[str], list[str]] = {}
    for n in names:
        groups.setdefault(own.get(n, frozenset()), []).append(n)
    return list(groups.values())


def _routings(plan: _Plan) -> tuple[Routing, dict[str, Routing], list[tuple[str, str]]]:
    """(the manifest's routing, each platform's own where an index is restricted away from it or
    to it, the mirrored URLs mapped back to the declared ones), mirrors applied."""
    from kernodeck.resolve import Routing

    def route(packages: Packages) -> Routing:
        if plan.default_index is not None:
            fixed = plan.default_index
            return Routing.from_packages(packages, default_url=lambda: fixed)
        return Routing.from_packages(packages)

    routing, back = mirrored(route(plan.manifest.packages), plan.mirrors)
    per_platform: dict[str, Routing] = {}
    for n in plan.names:
        own = plan.manifest.packages_for(n)
        if own is not plan.manifest.packages:
            per_platform[n], more = mirrored(route(own), plan.mirrors)
            back.extend(more)
    return routing, per_platform, back


def _resolve_and_render(
    plan: _Plan,
    *,
    fmt: Format,
    offline: bool,
    refresh: bool,
    cache_dir: str | os.PathLike[str] | None,
    progress: LockProgress | None,
    stats: LockStats,
) -> Resolved:
    """Resolve every platform (jointly unless same-versions = "no"), render the files of those
    that could be locked (what it did counted in `stats`). Raises a bad-input error (exit 2) as it is."""
    from kernodeck.resolve import ResolveSettings, Session

    routing, per_platform, back = _routings(plan)
    targets = {t.name: t for t in _targets(plan.manifest, plan.names)}
    if progress is not None:
        progress.start(plan.names)
    session = Session(
        routing,
        ResolveSettings.from_packages(plan.manifest.packages, plan.sources.platform_requirements),
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        offline=offline,
        refresh=refresh,
        per_platform=per_platform,
    )
    locker = _Locker(plan, session, targets, progress)
    try:
        locker.run_all()
        usage = [
            locker.errors[n]
            for n in plan.names
            if n in locker.errors and locker.errors[n].exit_code == EXIT_USAGE
        ]
        if usage:
            raise _combine(usage)
        differences, held = locker.align()
        if progress is not None:
            for n, res in locker.results.items():
                if n not in locker.errors:
                    progress.done(n, len(res.pins))
        locks = locker.platform_locks(differences, back)
        metadata_reads = session.metadata_reads
        # a lock without an optional index that was down is not replayed once it answers again
        pages = None if session.skipped else session.client.used_pages()
        plan.notices.extend(
            f"index {src.name!r} ({strip_userinfo(redact(src.url))}) could not be reached ({why}); it is "
            "optional = true, so this lock was made without it"
            for src, why in sorted(session.skipped.items(), key=lambda kv: kv[0].name)
        )
    finally:
        session.close()
        stats.take(session)  # after the lookahead's last request: every request counted
        if progress is not None:
            progress.close()
        _note_refused_cache(session.client.cache, plan.notices)
    errors = locker.errors
    return Resolved(
        rendered={n: render(lock, fmt) for n, lock in locks.items()},
        failures={
            n: _failure(n, errors[n], per_platform.get(n, routing), targets[n])
            for n in plan.names
            if n in errors
        },
        differences=differences,
        held=held,
        metadata_reads=metadata_reads,
        pages=pages,
    )


def _note_refused_cache(cache: IndexCache, notices: list[str]) -> None:
    """One notice when the index cache could not be written (another user's cache, a read-only
    or full disk): the lock went on, keeping nothing of what it fetched."""
    refused = cache.refused
    if refused is None or cache.root is None or any(n.startswith("the cache in ") for n in notices):
        return
    why = (refused.strerror or str(refused)).lower()
    notices.append(
        f"the cache in {cache.root.parent} cannot be written ({why}): this lock kept nothing it "
        "fetched, and the next one fetches it again; set KERNODECK_CACHE_DIR to a folder you may write"
    )


def _targets(manifest: Manifest, names: Sequence[str]) -> list[Target]:
    from kernodeck.targets import Target

    return [Target.from_platform(p, manifest.python) for p in manifest.platform if p.name in names]


_URL = re.compile(r"(?:https?|file)://[^\s'\")]+")


def _failure(name: str, error: KernodeckError, routing: Routing, target: Target) -> PlatformFailure:
    """The platform, the index involved (named in the error, else the platform's first index)
    and the first cause."""
    from kernodeck.resolve.joint import first_cause

    found = _URL.findall(" ".join([error.message, *error.context]))
    backend = routing.backend_source(target)
    known = [*routing.defaults, *routing.pinned.values(), *([backend] if backend is not None else [])]
    if found:
        # The index itself rather than the page or file that failed (or the proxy on the way),
        # when one of the URLs is under a known index.
        bare = [strip_userinfo(s.url).rstrip("/") for s in known]
        under = [max(p, key=len) for u in found if (p := [b for b in bare if u.startswith(b)])]
        url = under[0] if under else found[0]
    else:
        url = backend.url if backend is not None and "torch" in error.message else routing.defaults[0].url
    return PlatformFailure(name, strip_userinfo(redact(url)), first_cause(error, name), error)


def _finish(
    path: Path,
    out_dir: Path,
    names: Sequence[str],
    rendered: Mapping[str, Rendered],
    *,
    manifest: Manifest,
    fmt: Format,
    check: bool,
    started: float,
    metadata_reads: int,
    failed: tuple[PlatformFailure, ...] = (),
    differences: tuple[Difference, ...] = (),
    held: tuple[Held, ...] = (),
    notices: tuple[str, ...] = (),
    left: Sequence[LeftOver] = (),
    own: Mapping[str, tuple[str, ...]] | None = None,
) -> LockResult:
    """Compare each platform's files with those on disk: with `check`, say which are stale and
    why; else write every changed file as one set and remove the files left over. `own`: the
    requirements each platform's own extras add (a hand-edited pin is checked against them too)."""
    pending: list[tuple[Path, str]] = []
    compare = _Compare(
        out_dir,
        manifest,
        fmt,
        check,
        targets={t.name: t for t in _targets(manifest, names)} if check else {},
        joint_change=_platforms_changed(manifest, out_dir, left) if check else None,
        torn=check and interrupted_set(out_dir),
        own=own or {},
    )
    out = [compare.platform(name, rendered[name], pending) for name in names]
    if not check and (pending or interrupted_set(out_dir)):
        # every file of this lock moves together: the whole old set or the whole new set (an
        # unchanged set is left alone: no journal, no fsync; an interrupted one is finished)
        write_set(out_dir, [(f.name, c.encode("utf-8")) for f, c in pending], is_lock_file)
    if not check:
        remove(left)
    return LockResult(
        manifest_path=path,
        platforms=tuple(out),
        check=check,
        seconds=time.perf_counter() - started,
        metadata_reads=metadata_reads,
        failed=failed,
        differences=differences,
        held=held,
        notices=notices,
        left_over=tuple(left),
    )


@dataclass(frozen=True)
class _Compare:
    """How `_finish` compares one platform's files with those on disk."""

    out_dir: Path
    manifest: Manifest
    fmt: Format
    check: bool
    targets: Mapping[str, Target]  # --check: for the stale reasons
    joint_change: str | None  # --check: platforms added or removed, in words
    torn: bool  # --check: an earlier lock was interrupted while it replaced the files
    own: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # platform -> its extras' requirements

    def platform(self, name: str, r: Rendered, pending: list[tuple[Path, str]]) -> PlatformResult:
        """One platform's result; the files a lock would write are added to `pending`."""
        req_path = self.out_dir / requirements_filename(name)
        files = [(req_path, r.text)]
        py_path: Path | None = None
        if self.fmt == "pylock":
            py_path = self.out_dir / pylock_filename(name)
            files.append((py_path, r.pylock or ""))
        diffs: list[str] = []
        missing = False
        reasons: list[str] = []
        notes: list[str] = []
        for fpath, content in files:
            old = _read(fpath)
            merged = conflict_note(old, fpath.name) if old is not None and not self.check else None
            if merged is not None:
                notes.append(merged)
            if old == content:
                continue
            missing = missing or old is None
            diffs.append(diff(old, content, fpath.name))
            if not self.check:
                pending.append((fpath, content))
            elif old is not None:
                reasons.extend(self._reasons(name, old, content, fpath))
        if self.torn:
            reasons.append(
                "an earlier `kernodeck lock` was interrupted while it replaced the files: they may be a mix"
                " of two runs; run `kernodeck lock` to finish it"
            )
        return PlatformResult(
            platform=name,
            summary=r.summary,
            requirements_path=req_path,
            pylock_path=py_path,
            status=self._status(bool(diffs), missing),
            pins=r.pins,
            hash_lines=r.hash_lines,
            text=r.text,
            diff="".join(diffs) if self.check else "",
            reasons=tuple(dict.fromkeys(reasons)),
            warnings=(*r.warnings, *notes),
        )

    def _reasons(self, name: str, old: str, content: str, fpath: Path) -> list[str]:
        manifest = self.manifest
        if self.own.get(name):  # the platform's own extras' requirements are its requirements too
            packages = manifest.packages.model_copy(
                update={"requirements": [*manifest.packages.requirements, *self.own[name]]}
            )
            manifest = manifest.model_copy(update={"packages": packages})
        return stale_reasons(
            old,
            content,
            manifest,
            self.targets[name],
            fpath.suffix,
            fpath.name,
            platforms_changed=self.joint_change,
        )

    def _status(self, differs: bool, missing: bool) -> Status:
        if not self.check:
            return "written" if differs else "unchanged"
        if not differs and not self.torn:
            return "fresh"
        return "missing" if missing else "stale"


def _platforms_changed(manifest: Manifest, out_dir: Path, left: Sequence[LeftOver]) -> str | None:
    """With platforms locked together, which were added (no lock file yet) or removed (files
    left over) since the files on disk were written, in words; None when none or not together."""
    if manifest.packages.same_versions == "no":
        return None
    added = [p.name for p in manifest.platform if not (out_dir / requirements_filename(p.name)).is_file()]
    removed = [entry.platform for entry in left]
    if not added and not removed:
        return None
    parts = [*(f"{n} added" for n in added), *(f"{n} removed" for n in removed)]
    return (
        f"the platforms changed ({', '.join(parts)}): they are locked together "
        f'(same-versions = "{manifest.packages.same_versions}"), so each can move the others\' versions'
    )


def _combine_failures(fails: list[PlatformFailure], default_index: str | None = None) -> KernodeckError:
    """One error for a lock that could lock nothing; with `default_index` (no mirror in use), an
    unreachable default index also says how to lock through the mirror the locker's pip reads."""
    first = fails[0].error
    context = [*first.context, f"index: {fails[0].index_url}"]
    context.extend(f"also: {f.message()}" for f in fails[1:])
    context.extend(f.on_disk for f in fails if f.on_disk is not None)
    cls = ResolutionError if all(isinstance(f.error, ResolutionError) for f in fails) else type(first)
    hint = first.hint
    if default_index is not None and isinstance(first, IndexError_):
        from kernodeck.index.sources import locker_pip_settings

        through = mirror_hint(fails[0].index_url, default_index, locker_pip_settings())
        if through is not None:
            hint = f"{hint}; or {through}" if hint else through
    combined = cls(first.message, context=context, hint=hint)
    combined.exit_code = first.exit_code
    return combined


def _combine(errs: list[KernodeckError]) -> KernodeckError:
    if len(errs) == 1:
        return errs[0]
    first = errs[0]
    context = list(first.context)
    for e in errs[1:]:
        context.append(f"also: {e.message}")
        context.extend(f"  {c}" for c in e.context)
    cls = ResolutionError if all(isinstance(e, ResolutionError) for e in errs) else type(first)
    combined = cls(first.message, context=context, hint=first.hint)
    combined.exit_code = first.exit_code
    return combined
