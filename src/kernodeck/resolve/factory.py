"""The factory: the only caller of `kernodeck.index`. It decides where each project is looked up,
turns index files into candidates for one target, and reads dependencies from core metadata.

Routing, in order (the first rule that applies decides, and only its index is asked):

1. a project listed in an index's `packages` or in `[packages] sources` comes from that index only;
2. on a platform whose backend uses a PyTorch index (cpu, cuNNN, rocmX.Y, xpu), the torch family
   (`kernodeck.backends.routes_to_backend`) comes from `<pytorch-index base>/<backend>` only;
3. everything else comes from the default indexes: the one marked `default = true` (else the one
   pip is configured to use), then every declared index without `packages`, asked in that order;
   the first index that has the project is the only one used for it ("first index", as uv does:
   a name on a later index can never shadow a name on an earlier one).

I/O runs on two thread pools shared by every platform of one lock: one for index requests
(project pages, metadata), one for look-ahead (load a newly seen project's page, evaluate it for
the target and prefetch the metadata of its most likely version). Neither pool's tasks wait on
their own pool, so they cannot deadlock. Pages and metadata are cached for the whole lock;
metadata by file hash, so the same wheel serves every platform that can install it.

Dependencies come from the metadata of the best-ranked compatible file of a version for each
target (per file, as pip and uv read them), never from another platform's wheel: wheels of one
version may legitimately declare different dependencies.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.backends import PYTORCH_INDEX_BASE, routes_to_backend
from kernodeck.errors import IndexError_, ResolutionError
from kernodeck.index.buildenv import BuildSources
from kernodeck.index.evaluate import Accepted, Rejected, evaluate
from kernodeck.index.models import (
    CoreMetadata,
    IndexFile,
    IndexSource,
    IndexUnreachable,
    NotFound,
    ProjectPage,
)
from kernodeck.index.sources import default_index_url
from kernodeck.lockfile.write import strip_credentials
from kernodeck.resolve.candidates import (
    PYTHON_IDENTIFIER,
    BaseCandidate,
    Candidate,
    ExtrasCandidate,
    PythonCandidate,
    base_of,
)
from kernodeck.resolve.requirements import (
    BaseRequirement,
    ExactBaseRequirement,
    RequiresPythonRequirement,
    SpecifierRequirement,
    pins_exactly,
    strip_marker,
)
from kernodeck.resolve.rounds import Counts

if TYPE_CHECKING:
    import httpx

    from kernodeck.manifest.schema import Packages
    from kernodeck.targets import Target

#: The most metadata reads started ahead while the resolver backtracks through one project.
BACKTRACK_AHEAD = 32

# --- settings and routing ----------------------------------------------------------------------


@dataclass(frozen=True)
class ResolveSettings:
    """What the manifest says about resolution (the same for every platform)."""

    requirements: tuple[Requirement, ...]
    constraints: tuple[Requirement, ...] = ()
    allow_sdist: frozenset[NormalizedName] = frozenset()
    prereleases: bool = False
    exclude_newer: datetime | None = None
    build_constraints: tuple[str, ...] = ()  # on an sdist build's requirements
    # platform -> the requirements its own `[[platform]] extras` add (`SourceSet.platform_requirements`)
    platform_requirements: Mapping[str, tuple[Requirement, ...]] = field(default_factory=dict)

    def requirements_of(self, platform: str) -> tuple[Requirement, ...]:
        """The root requirements of `platform`: every platform's, then its own extras'."""
        return (*self.requirements, *self.platform_requirements.get(platform, ()))

    @classmethod
    def from_packages(
        cls, packages: Packages, platform_requirements: Mapping[str, Sequence[str]] | None = None
    ) -> ResolveSettings:
        return cls(
            requirements=tuple(Requirement(r) for r in packages.requirements),
            constraints=tuple(Requirement(r) for r in packages.constraints),
            allow_sdist=frozenset(canonicalize_name(n) for n in packages.allow_sdist),
            prereleases=packages.prereleases,
            exclude_newer=packages.exclude_newer,
            build_constraints=tuple(packages.build_constraints),
            platform_requirements={
                name: tuple(Requirement(r) for r in reqs)
                for name, reqs in (platform_requirements or {}).items()
            },
        )


@dataclass(frozen=True)
class Routing:
    """Which indexes are asked for which project (see the module docstring)."""

    defaults: tuple[IndexSource, ...]
    pinned: Mapping[NormalizedName, IndexSource] = field(default_factory=dict)
    pytorch_base: str = PYTORCH_INDEX_BASE

    @classmethod
    def from_packages(cls, packages: Packages, default_url: Callable[[], str] = default_index_url) -> Routing:
        by_name: dict[str, IndexSource] = {}
        pinned: dict[NormalizedName, IndexSource] = {}
        primary: IndexSource | None = None
        extra: list[IndexSource] = []
        for ix in packages.index:
            src = IndexSource(
                name=ix.name, url=ix.url or default_url(), format=ix.format, optional=ix.optional
            )
            by_name[ix.name] = src
            for p in ix.packages:
                pinned[canonicalize_name(p)] = src
            if ix.default:
                primary = src
            elif not ix.packages:
                extra.append(src)
        for pkg, ixname in packages.sources.items():
            pinned[canonicalize_name(pkg)] = by_name[ixname]
        if primary is None:
            primary = IndexSource(name="default", url=default_url(), format="simple")
        return cls(
            defaults=(primary, *extra),
            pinned=pinned,
            pytorch_base=packages.pytorch_index or PYTORCH_INDEX_BASE,
        )

    def backend_source(self, target: Target) -> IndexSource | None:
        b = target.backend
        if b is None:
            return None
        url = b.index_url(self.pytorch_base)
        if url is None:
            return None
        return IndexSource(name=f"pytorch-{b.name}", url=url, format="simple")

    def sources_for(self, name: NormalizedName, target: Target) -> tuple[IndexSource, ...]:
        if name in self.pinned:
            return (self.pinned[name],)
        if routes_to_backend(name):
            src = self.backend_source(target)
            if src is not None:
                return (src,)
        return self.defaults


# --- the shared session ------------------------------------------------------------------------


_K = TypeVar("_K")
_T = TypeVar("_T")
_R = TypeVar("_R")


def once(
    lock: threading.Lock,
    table: dict[_K, Future[_T]],
    key: _K,
    quick: Callable[[], _T | None],
    pool: ThreadPoolExecutor,
    fn: Callable[..., _T],
    *args: object,
) -> Future[_T]:
    """The future of one read, started once per `key` of `table`: `quick()` in the caller's thread
    (what memory or the cache answers), else `fn(*args)` in `pool` (what needs the index). A warm
    lock thus reads everything in the resolver's own thread: no hand-over to another thread and
    back for each of the hundreds of reads of a resolution. Only the table is touched under `lock`.
    Raises the pool's RuntimeError once it is shut down."""
    fut = table.get(key)
    if fut is not None:
        return fut
    with lock:
        fut = table.get(key)
        if fut is not None:
            return fut
        fut = table[key] = Future()
    try:
        hit = quick()
    except BaseException as e:  # what the pool's thread would have raised too
        fut.set_running_or_notify_cancel()
        fut.set_exception(e)
        return fut
    if hit is not None:
        fut.set_running_or_notify_cancel()
        fut.set_result(hit)
        return fut
    try:
        pool.submit(_settle, fut, fn, *args)
    except BaseException as e:
        with lock:
            table.pop(key, None)
        fut.set_running_or_notify_cancel()
        fut.set_exception(e)
        raise
    return fut


def _settle(fut: Future[_T], fn: Callable[..., _T], *args: object) -> None:
    if not fut.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args)
    except BaseException as e:
        fut.set_exception(e)
    else:
        fut.set_result(result)


def _cancel_pending(table: Mapping[Any, Future[Any]]) -> None:
    """Cancel the futures of `once` whose work a pool dropped when it shut down (`cancel_futures`):
    their waiters and callbacks hear CancelledError, as from the pool's own futures."""
    for fut in list(table.values()):
        fut.cancel()


class Session:
    """One index client, caches and thread pools shared by every platform of one lock."""

    def __init__(
        self,
        routing: Routing,
        settings: ResolveSettings,
        *,
        cache_dir: Path | None = None,
        offline: bool = False,
        refresh: bool = False,
        transport: httpx.BaseTransport | None = None,
        concurrency: int = 16,
        per_platform: Mapping[str, Routing] | None = None,
    ) -> None:
        self.routing = routing
        self.per_platform = dict(per_platform or {})  # platform name -> its own routing
        self.settings = settings
        from kernodeck.index.client import IndexClient  # httpx: only when a lock resolves

        self.client = IndexClient(
            cache_dir=cache_dir,
            offline=offline,
            refresh=refresh,
            exclude_newer=settings.exclude_newer,
            transport=transport,
            concurrency=concurrency,
        )
        # an sdist's build requirements: from the indexes an unrouted package resolves from
        self.client.build_sources = BuildSources.of(
            ((s.format, s.url) for s in routing.defaults),
            settings.exclude_newer,
            constraints=settings.build_constraints,
        )
        self._lock = threading.Lock()
        self._pages: dict[tuple[str, str], Future[ProjectPage | NotFound]] = {}
        self._metadata: dict[str, Future[CoreMetadata]] = {}
        self._hashes: dict[str, Future[str]] = {}
        self._io = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kernodeck-io")
        self.lookahead = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kernodeck-ahead")
        self.metadata_reads = 0
        # `lock --stats`: the resolvers' rounds, and thread CPU seconds per kind of work
        self.counts = Counts()
        self.cpu = {"pages": 0.0, "metadata": 0.0, "resolution": 0.0}
        self._hits = self._misses = 0  # reads the cache answered in the asking thread, and not
        self.skipped: dict[IndexSource, str] = {}  # optional indexes that could not be reached

    def skip(self, source: IndexSource, error: IndexUnreachable) -> None:
        """An optional index that could not be reached: the lock goes on without it."""
        with self._lock:
            self.skipped.setdefault(source, _first_line(error))

    def routing_for(self, target: Target) -> Routing:
        """The routing of one platform (per-platform indexes), else the shared one."""
        return self.per_platform.get(target.name, self.routing)

    def close(self) -> None:
        self.lookahead.shutdown(wait=True, cancel_futures=True)
        self._io.shutdown(wait=True, cancel_futures=True)
        for table in (self._pages, self._metadata, self._hashes):
            _cancel_pending(table)
        self.client.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def page_future(self, source: IndexSource, name: NormalizedName) -> Future[ProjectPage | NotFound]:
        def quick() -> ProjectPage | NotFound | None:
            return self._cached(lambda disk: self.client.cached_page(source, name, disk=disk))

        return once(
            self._lock,
            self._pages,
            (source.url, name),
            quick,
            self._io,
            self._read_page,
            source,
            name,
        )

    def _read_page(self, source: IndexSource, name: NormalizedName) -> ProjectPage | NotFound:
        start = time.thread_time()
        try:
            return self.client.project_page(source, name)
        finally:
            self.add_cpu("pages", time.thread_time() - start)

    def add_cpu(self, kind: str, seconds: float) -> None:
        with self._lock:
            self.cpu[kind] += seconds

    def add_counts(self, counts: Counts) -> None:
        """One resolution's rounds, backtracks and restarts, added to the lock's."""
        with self._lock:
            self.counts.rounds += counts.rounds
            self.counts.backtracks += counts.backtracks
            self.counts.restarts += counts.restarts

    def page(self, source: IndexSource, name: NormalizedName) -> ProjectPage | NotFound:
        return self.page_future(source, name).result()

    def metadata_future(self, file: IndexFile) -> Future[CoreMetadata]:
        key = f"{file.index}\0{file.sha256 or file.url}"  # per index: another may claim the same hash

        def quick() -> CoreMetadata | None:
            md = self._cached(lambda disk: self.client.cached_metadata(file, disk=disk))
            if md is not None:
                self._count_read()
            return md

        return once(self._lock, self._metadata, key, quick, self._io, self._read_metadata, file)

    def _cached(self, read: Callable[[bool], _R]) -> _R:
        """`read(disk)` in the asking thread: memory, and the cache on disk while it answers at
        least as often as it misses. A cold lock stops looking on disk after a few misses (each
        look a syscall in the resolver's thread, which hands the interpreter to the threads
        parsing pages)."""
        disk = self._misses < 8 or self._hits >= self._misses
        hit = read(disk)
        if disk:
            with self._lock:
                if hit is None:
                    self._misses += 1
                else:
                    self._hits += 1
        return hit

    def _read_metadata(self, file: IndexFile) -> CoreMetadata:
        start = time.thread_time()
        try:
            md = self.client.metadata(file)
        finally:
            self.add_cpu("metadata", time.thread_time() - start)
        self._count_read()
        return md

    def _count_read(self) -> None:
        with self._lock:
            self.metadata_reads += 1

    def metadata(self, file: IndexFile) -> CoreMetadata:
        return self.metadata_future(file).result()

    def sha256(self, file: IndexFile) -> str:
        """The file's sha256: from the index, else by downloading it (find-links folders)."""
        if file.sha256:
            return file.sha256
        return once(
            self._lock, self._hashes, file.url, lambda: None, self._io, self.client.file_sha256, file
        ).result()


# --- one target --------------------------------------------------------------------------------


class _Verdicts:
    """The verdicts on one version's files. `rejected` may be judged only when asked for (it
    serves messages): for a version whose files were all uploaded after exclude-newer."""

    __slots__ = ("_later", "accepted", "yanked_ok")

    def __init__(
        self,
        accepted: list[Accepted],
        yanked_ok: list[Accepted],  # usable only when pinned exactly
        rejected: list[Rejected] | Callable[[], list[Rejected]],
    ) -> None:
        self.accepted = accepted
        self.yanked_ok = yanked_ok
        self._later = rejected

    @property
    def rejected(self) -> list[Rejected]:
        if callable(self._later):
            self._later = self._later()
        return self._later


class ProjectFiles:
    """A project's files on the index chosen for it, judged for one target lazily, one version at
    a time, newest first: a resolution usually needs one or two versions of a project whose page
    lists thousands of files, so the others are never judged."""

    def __init__(
        self,
        name: NormalizedName,
        source: IndexSource | None,
        asked: tuple[IndexSource, ...],
        not_found: tuple[NotFound, ...] = (),
        page: ProjectPage | None = None,
        judge: Callable[[IndexFile, bool], Accepted | Rejected] | None = None,
        exclude_newer: datetime | None = None,
        skipped: tuple[tuple[IndexSource, str], ...] = (),  # optional indexes not reached, why
    ) -> None:
        self.name = name
        self.skipped = skipped
        self._exclude_newer = exclude_newer
        self.source = source
        self.asked = asked
        self.not_found = not_found
        self._judge = judge
        self._page = page
        # version -> positions on the page; files are built only for the versions judged
        self._by_version: Mapping[Version, tuple[int, ...]] = page.versions() if page is not None else {}
        self.all_versions: tuple[Version, ...] = page.newest_first() if page is not None else ()
        self._verdicts: dict[Version, _Verdicts] = {}
        self._only_pre: bool | None = None

    def known(self, version: Version) -> bool:
        """Whether the page lists `version` at all."""
        return version in self._by_version

    def listed_as(self, version: Version | None) -> Version | None:
        """A preferred `version` as this page lists it: itself; or, for one without a local label
        (`2.5.1`, from a lock of the default index's build), the one release of that public
        version the page has (`2.5.1+cu124` on a PyTorch index); None when it lists neither."""
        if version is None or version in self._by_version:
            return version
        if version.local is not None:
            return None
        same = [v for v in self.all_versions if v.public == version.public]
        return same[0] if len(same) == 1 else None

    def verdicts(self, version: Version) -> _Verdicts:
        hit = self._verdicts.get(version)
        if hit is not None:
            return hit
        cutoff = self._exclude_newer
        if cutoff is not None and self._page is not None and self._page.uploaded_after(version, cutoff):
            # every file is too new, pinned or not: nothing to judge unless a message asks
            v = _Verdicts([], [], lambda: self._judge_files(version).rejected)
        else:
            v = self._judge_files(version)
        self._verdicts[version] = v  # a race computes the same value twice: harmless
        return v

    def _judge_files(self, version: Version) -> _Verdicts:
        accepted: list[Accepted] = []
        yanked_ok: list[Accepted] = []
        rejected: list[Rejected] = []
        assert self._judge is not None
        files = self._page.files_of(version) if self._page is not None else ()
        for f in files:
            res = self._judge(f, False)
            if isinstance(res, Accepted):
                accepted.append(res)
                continue
            if f.yanked is not None:
                again = self._judge(f, True)
                if isinstance(again, Accepted):
                    yanked_ok.append(again)
                    continue
            rejected.append(res)
        return _Verdicts(accepted, yanked_ok, rejected)

    def too_new(self, version: Version) -> bool:
        """Whether every file of `version` was uploaded after exclude-newer (it does not exist yet)."""
        cutoff = self._exclude_newer
        return cutoff is not None and self._page is not None and self._page.uploaded_after(version, cutoff)

    @property
    def only_prereleases(self) -> bool:
        """Whether every version that existed at exclude-newer is a prerelease (then prereleases
        are allowed without asking, as pip and uv do)."""
        hit = self._only_pre
        if hit is None:
            # newest first, stopping at the first final release that existed at exclude-newer
            existing = any(not v.is_prerelease and not self.too_new(v) for v in self.all_versions)
            hit = self._only_pre = bool(self.all_versions) and not existing
        return hit

    def usable(self, version: Version, pinned_exactly: bool) -> bool:
        v = self.verdicts(version)
        return bool(v.accepted or (pinned_exactly and v.yanked_ok))

    def versions(self, pinned_exactly: bool) -> list[Version]:
        """Every usable version, newest first (judges every version: for messages only)."""
        return [v for v in self.all_versions if self.usable(v, pinned_exactly)]

    @property
    def rejected(self) -> list[Rejected]:
        return [r for v in self.all_versions for r in self.verdicts(v).rejected]

    def files(self, version: Version, pinned_exactly: bool) -> tuple[IndexFile, ...]:
        v = self.verdicts(version)
        acc = list(v.accepted) + (list(v.yanked_ok) if pinned_exactly else [])
        acc.sort(key=lambda a: (not a.file.is_wheel, a.rank, a.file.filename))
        return tuple(a.file for a in acc)

    def all_yanked(self, version: Version) -> bool:
        v = self.verdicts(version)
        return not v.accepted and bool(v.yanked_ok)


def names_prerelease(spec: SpecifierSet) -> bool:
    """Whether a specifier names a pre-release version (then it admits pre-releases)."""
    for s in spec:
        text = s.version[:-2] if s.version.endswith(".*") else s.version
        try:
            if Version(text).is_prerelease:
                return True
        except InvalidVersion:
            continue
    return False


def _first_line(error: IndexError_) -> str:
    """An unreachable index's cause in one line: the error's first context line (e.g.
    `ConnectError: [Errno 111] Connection refused`), else its message."""
    return error.context[0] if error.context else error.message


def _unreachable_error(
    name: NormalizedName,
    failed: tuple[IndexSource, IndexUnreachable],
    answers: Sequence[tuple[IndexSource, ProjectPage | NotFound | IndexUnreachable]],
    declared: bool,
) -> IndexUnreachable:
    """A required index that cannot be reached: its error (which names it), with every index
    asked for `name` and whether it answered when there were several, and how to let a lock go
    on without it when the manifest (or a requirement file) declares it."""
    src, error = failed
    asked = []
    for s, a in answers if len(answers) > 1 else ():
        where = f"{s.name} ({strip_credentials(s.url)})"
        if isinstance(a, IndexUnreachable):
            asked.append(f"asked {where}: no answer ({_first_line(a)})")
        elif isinstance(a, NotFound):
            asked.append(f"asked {where}: answered, no project {name!r}")
        else:
            asked.append(f"asked {where}: answered, has {name}")
    hint = error.hint
    if declared:
        optional = (
            f"if the lock may go on without index {src.name!r}, mark it `optional = true` in its "
            "[[packages.index]] (an index a requirement file names: declare it there with the same url)"
        )
        hint = f"{hint}; {optional}" if hint else optional
    return IndexUnreachable(error.message, context=[*error.context, *asked], hint=hint)


class Factory:
    """Candidates and dependencies for one target; what the provider calls."""

    def __init__(
        self,
        session: Session,
        target: Target,
        *,
        preferred: Mapping[str, Version] | None = None,
        on_metadata: Callable[[], None] | None = None,
        extra_constraints: Sequence[Requirement] = (),
    ) -> None:
        self.session = session
        self.target = target
        self.settings = session.settings
        self.preferred = {canonicalize_name(k): v for k, v in (preferred or {}).items()}
        self.python = PythonCandidate(Version(target.python_full_version), target.name)
        self._lock = threading.Lock()
        self._projects: dict[NormalizedName, Future[ProjectFiles]] = {}
        self._candidates: dict[tuple[NormalizedName, Version, bool], Candidate] = {}
        self.constraints: dict[NormalizedName, list[Requirement]] = {}
        for c in (*self.settings.constraints, *extra_constraints):
            if c.marker is None or target.evaluate_marker(c.marker):
                self.constraints.setdefault(canonicalize_name(c.name), []).append(c)
        self.required_by: dict[NormalizedName, dict[str, str]] = {}  # dep -> {parent: requirement}
        self.direct: set[NormalizedName] = set()
        self._on_metadata = on_metadata
        # prefetch the dependencies of each likely version too (a follower reads what its leader
        # pinned instead)
        self.deep_lookahead = True
        # told of each version whose metadata is prefetched (followers read their own files of
        # it while this factory's resolution is still under way)
        self.on_likely: Callable[[NormalizedName, Version], None] | None = None

    # -- roots -----------------------------------------------------------------------------------

    def root_requirements(self) -> list[BaseRequirement]:
        out: list[BaseRequirement] = []
        for r in self.settings.requirements_of(self.target.name):
            if r.url:
                raise ResolutionError(
                    f"direct URL requirement {str(r)!r} cannot be locked with hashes from an index",
                    hint="publish the package on an index (or a find-links folder) and require it by name",
                )
            if r.marker is not None and not self.target.evaluate_marker(r.marker):
                continue
            req = SpecifierRequirement(strip_marker(r))
            self.direct.add(req.name)
            out.append(req)
        for name in self.direct:
            self.lookahead(name, None)
        return out

    # -- projects --------------------------------------------------------------------------------

    def project(self, name: NormalizedName) -> ProjectFiles:
        return self._project_future(name).result()

    def _project_future(self, name: NormalizedName) -> Future[ProjectFiles]:
        def quick() -> ProjectFiles | None:
            # Ask every candidate index at once; here when the cache answered each of them
            sources, futures = self._pages_of(name)
            return self._project_from(name, sources, futures) if all(f.done() for f in futures) else None

        return once(self._lock, self._projects, name, quick, self.session.lookahead, self._load_project, name)

    def _pages_of(
        self, name: NormalizedName
    ) -> tuple[tuple[IndexSource, ...], list[Future[ProjectPage | NotFound]]]:
        sources = self.session.routing_for(self.target).sources_for(name, self.target)
        return sources, [self.session.page_future(src, name) for src in sources]

    def _load_project(self, name: NormalizedName) -> ProjectFiles:
        return self._project_from(name, *self._pages_of(name))

    def _project_from(
        self,
        name: NormalizedName,
        sources: tuple[IndexSource, ...],
        futures: list[Future[ProjectPage | NotFound]],
    ) -> ProjectFiles:
        """The project from the first index (in order) that has it. Every index asked must
        answer: one that cannot be reached fails the lock (naming every index asked and what it
        answered) unless it is `optional`; then it is left out and said (`Session.skipped`)."""
        answers: list[tuple[IndexSource, ProjectPage | NotFound | IndexUnreachable]] = []
        for src, fut in zip(sources, futures, strict=True):
            try:
                answers.append((src, fut.result()))
            except IndexUnreachable as e:
                answers.append((src, e))
        unreachable = tuple((s, a) for s, a in answers if isinstance(a, IndexUnreachable))
        required = [(s, a) for s, a in unreachable if not s.optional]
        if required:
            routing = self.session.routing_for(self.target)
            declared = required[0][0] in (*routing.defaults, *routing.pinned.values())
            raise _unreachable_error(name, required[0], answers, declared)
        for s, a in unreachable:
            self.session.skip(s, a)
        not_found = tuple(a for _, a in answers if isinstance(a, NotFound))
        skipped = tuple((s, _first_line(a)) for s, a in unreachable)
        for src, page in answers:
            if isinstance(page, ProjectPage):
                return ProjectFiles(
                    name,
                    src,
                    sources,
                    not_found,
                    page,
                    self._judge_for(name),
                    exclude_newer=self.settings.exclude_newer,
                    skipped=skipped,
                )
        return ProjectFiles(name, None, sources, not_found, skipped=skipped)

    def _judge_for(self, name: NormalizedName) -> Callable[[IndexFile, bool], Accepted | Rejected]:
        allow_sdist = name in self.settings.allow_sdist

        def judge(f: IndexFile, pinned: bool) -> Accepted | Rejected:
            return evaluate(
                f,
                self.target,
                allow_sdist=allow_sdist,
                exclude_newer=self.settings.exclude_newer,
                pinned_exactly=pinned,
            )

        return judge

    def lookahead(self, name: NormalizedName, requirement: BaseRequirement | None) -> None:
        """Load a project in the background and prefetch the metadata of its likely version."""
        with self._lock:
            seen = name in self._projects
        fut = self._project_future(name)
        if seen:
            return

        def prefetch(done: Future[ProjectFiles]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            pf = done.result()
            best = self._likely_version(pf, requirement)
            md = self._read_ahead(pf, best) if best is not None else None
            if md is not None and best is not None:
                if self.deep_lookahead:
                    md.add_done_callback(self._look_deeper)
                if self.on_likely is not None:
                    self.on_likely(pf.name, best)

        fut.add_done_callback(prefetch)

    def _look_deeper(self, done: Future[CoreMetadata]) -> None:
        """The likely version's own dependencies, ahead of the resolver: a cold lock fetches the
        graph at the network's pace instead of one resolver round at a time."""
        if done.cancelled() or done.exception() is not None:
            return
        for r in done.result().requires_dist:
            if r.url or (r.marker is not None and not self.target.evaluate_marker(r.marker, ())):
                continue
            with contextlib.suppress(RuntimeError):
                self.lookahead(canonicalize_name(r.name), SpecifierRequirement(r))  # marker unused

    def prefetch_version(self, name: NormalizedName, version: Version) -> None:
        """Load a project in the background and prefetch the metadata of this platform's first
        file of `version` (public version: a local label may differ here), if it has one."""

        def prefetch(done: Future[ProjectFiles]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            pf = done.result()
            for v in pf.all_versions:
                if v.public == version.public and pf.usable(v, False):
                    self._read_ahead(pf, v)
                    return

        with contextlib.suppress(RuntimeError):
            self._project_future(name).add_done_callback(prefetch)

    def _read_ahead(self, pf: ProjectFiles, version: Version) -> Future[CoreMetadata] | None:
        """Start reading the metadata of this platform's first file of `version`; None when it
        has none here, or the pools are shut down (nothing more to prefetch)."""
        files = pf.files(version, False)
        if not files:
            return None
        try:
            return self.session.metadata_future(files[0])
        except RuntimeError:
            return None

    def _likely_version(self, pf: ProjectFiles, requirement: BaseRequirement | None) -> Version | None:
        order = list(pf.all_versions)
        pref = pf.listed_as(self.preferred.get(pf.name))
        if pref is not None:
            order.remove(pref)
            order.insert(0, pref)
        for v in order:
            if v.is_prerelease and not self.settings.prereleases and v != pref and not pf.only_prereleases:
                continue
            if requirement is not None and not requirement.allows(v):
                continue
            if pf.usable(v, False):
                return v
        return None

    # -- what the provider calls -----------------------------------------------------------------

    def prereleases_allowed(self, name: NormalizedName, requirements: Sequence[BaseRequirement]) -> bool:
        """Whether pre-releases of `name` may be candidates: the manifest allows them, a
        requirement or constraint names one, or the project has nothing else (as pip and uv)."""
        return (
            self.settings.prereleases
            or any(names_prerelease(r.specifier) for r in requirements)
            or any(names_prerelease(c.specifier) for c in self.constraints.get(name, []))
            or self.project(name).only_prereleases
        )

    def first_choice(self, name: NormalizedName, preferred: Version | None) -> Version | None:
        """The version a resolution of this target alone would try first for a requirement of
        `name` without a specifier: `preferred` when it is usable, else the newest usable one
        (pre-releases only where allowed, the manifest's constraints applied)."""
        pf = self.project(name)
        allow_pre = self.prereleases_allowed(name, [])
        cons = [c.specifier for c in self.constraints.get(name, [])]
        order = list(pf.all_versions)
        preferred = pf.listed_as(preferred)
        if preferred is not None:
            order.remove(preferred)
            order.insert(0, preferred)
        for v in order:
            if v != preferred and not allow_pre and v.is_prerelease:
                continue
            if all(c.contains(v, prereleases=True) for c in cons) and pf.usable(v, False):
                return v
        return None

    def installable(self, name: NormalizedName) -> list[Version]:
        """The public versions of `name` this target has files for, newest first, as a
        requirement without a specifier would see them (pre-releases only where allowed, the
        manifest's constraints applied)."""
        pf = self.project(name)
        allow_pre = self.prereleases_allowed(name, [])
        cons = [c.specifier for c in self.constraints.get(name, [])]
        out: dict[Version, None] = {}
        for v in pf.all_versions:
            allowed = (allow_pre or not v.is_prerelease) and all(
                c.contains(v, prereleases=True) for c in cons
            )
            if allowed and pf.usable(v, False):
                out.setdefault(Version(v.public), None)
        return list(out)

    def find_matches(
        self,
        identifier: str,
        requirements: Sequence[BaseRequirement],
        incompatibilities: Sequence[BaseCandidate],
    ) -> Callable[[], Iterator[BaseCandidate]]:
        """Candidates newest first (an existing pin first), built lazily as the resolver asks."""
        if identifier == PYTHON_IDENTIFIER:
            ok = (
                all(r.allows(self.python.version) for r in requirements)
                and self.python not in incompatibilities
            )
            return lambda: iter([self.python] if ok else [])
        if not requirements:
            return lambda: iter([])
        name = requirements[0].name
        extras = requirements[0].extras
        pf = self.project(name)
        constraints = self.constraints.get(name, [])
        # Yanked files only for an exact pin, in a requirement or a constraint (as pip and uv).
        pinned = any(r.permits_yanked for r in requirements) or any(
            pins_exactly(c.specifier) for c in constraints
        )
        bad = {c.version for c in incompatibilities}
        allow_pre = self.prereleases_allowed(name, requirements)
        cons = [c.specifier for c in constraints]

        def wanted(v: Version) -> bool:
            return (
                v not in bad
                and (allow_pre or not v.is_prerelease)
                and all(c.contains(v, prereleases=True) for c in cons)
                and all(r.allows(v) for r in requirements)
            )

        pref = pf.listed_as(self.preferred.get(name))
        if pref is not None and not wanted(pref):
            pref = None

        def ordered() -> Iterable[Version]:
            if pref is None:
                return pf.all_versions
            # the existing pin first
            return itertools.chain((pref,), (v for v in pf.all_versions if v != pref))

        def usable() -> Iterator[Version]:
            return (v for v in ordered() if wanted(v) and pf.usable(v, pinned))

        def matches() -> Iterator[BaseCandidate]:
            # Filtered lazily, newest first: the resolver usually takes the first candidate, and
            # asks again (a fresh iterator) each time a criterion of this project changes, so a
            # project with thousands of versions is not filtered whole on every ask.
            ahead: Iterator[Version] | None = None  # the versions whose metadata is read ahead
            started = 0
            for n, v in enumerate(usable(), start=1 + len(bad)):
                cand = self._candidate(pf, v, pinned)
                self.session.metadata_future(cand.metadata_file)
                if n > 1:
                    # The resolver rejected the candidates before this one (their dependencies
                    # conflict with what it has pinned) and walks down this project's versions,
                    # one metadata read at a time: read the next ones now, twice as many each
                    # time it asks again (as uv batches its prefetches), so a walk down 60
                    # releases waits for a handful of reads, not 60 in a row.
                    if ahead is None:
                        ahead = usable()
                        started = len(bad)
                    started = self._read_ahead_of_walk(pf, ahead, started, n, pinned)
                yield ExtrasCandidate(cand, extras) if extras else cand

        return matches

    def _read_ahead_of_walk(
        self, pf: ProjectFiles, ahead: Iterator[Version], started: int, at: int, pinned: bool
    ) -> int:
        """Start the metadata reads of the versions `ahead` yields (the same order the resolver
        walks, `started` of them already taken) up to `at + 2**(at-1)` (at most BACKTRACK_AHEAD
        past `at`, the position of the candidate given now); returns how many are taken. Source
        distributions are skipped: reading theirs means building them."""
        until = at + min(2 ** min(at - 1, 8), BACKTRACK_AHEAD)
        while started < until:
            v = next(ahead, None)
            if v is None:
                break
            started += 1
            file = self._candidate(pf, v, pinned).metadata_file
            if started <= at or file.is_sdist:
                continue
            try:
                self.session.metadata_future(file)
            except RuntimeError:  # the pools are shut down: nothing more to read
                break
        return started

    def _candidate(self, pf: ProjectFiles, version: Version, pinned: bool) -> Candidate:
        key = (pf.name, version, pinned)
        cand = self._candidates.get(key)
        if cand is None:
            assert pf.source is not None
            cand = Candidate(
                pf.name,
                version,
                pf.source,
                pf.files(version, pinned),
                yanked=pf.all_yanked(version),
                allow_yanked=pinned,
            )
            self._candidates[key] = cand
        return cand

    def get_dependencies(self, candidate: BaseCandidate) -> list[BaseRequirement]:
        if isinstance(candidate, PythonCandidate):
            return []
        base = base_of(candidate)
        assert base is not None
        md = self.session.metadata(base.metadata_file)
        if self._on_metadata is not None:
            self._on_metadata()
        if canonicalize_name(md.name) != base.name:
            raise ResolutionError(
                f"{base.metadata_file.filename} on {base.source.name} declares the name {md.name!r}, not {base.name!r}",
                hint="the index serves inconsistent metadata; report it to the index's owner",
            )
        out: list[BaseRequirement] = []
        if isinstance(candidate, ExtrasCandidate):
            out.append(ExactBaseRequirement(base))
            deps = [
                r
                for r in md.requires_dist
                if r.marker is not None
                and self.target.evaluate_marker(r.marker, candidate.extras)
                and not self.target.evaluate_marker(r.marker, ())
            ]
        else:
            deps = [r for r in md.requires_dist if self.target.evaluate_marker(r.marker, ())]
            if md.requires_python:
                try:
                    spec = SpecifierSet(str(md.requires_python))
                except InvalidSpecifier:
                    spec = None
                if spec is not None and str(spec):
                    out.append(RequiresPythonRequirement(spec))
        parent = candidate.describe()
        for r in deps:
            if r.url:
                raise ResolutionError(
                    f"{parent} depends on a direct URL ({r}), which cannot be locked from an index",
                    context=[f"platform {self.target.name}"],
                )
            req = SpecifierRequirement(strip_marker(r))
            with self._lock:
                self.required_by.setdefault(req.name, {}).setdefault(parent, req.describe())
            self.lookahead(req.name, req)
            out.append(req)
        return out
