"""`kernodeck lock` as a Python API: manifest -> targets -> resolve -> write.

    result = lock_manifest("repro.toml")                      # every platform
    result = lock_manifest("repro.toml", ["linux-x86_64-cpu"], check=True)
    result.ok, result.platforms[0].status, result.platforms[0].diff

Every requested platform is resolved before anything is written. A platform that cannot be
locked (an unreachable index, no solution, no wheel) leaves its previous files untouched and is
reported in `result.failed`; the other platforms are still written.

Freshness: each file's header records `lock-inputs-sha256` (kernodeck.lockinputs), the digest of
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

Replay: a finished lock is recorded in the index cache under a key made of everything it was
computed from (the lock inputs of each platform, the platforms, the options, the pins it preferred, the
default index, the kernodeck sources and the Python/packaging versions), with the cached project
pages it read. While every one of those pages is still on disk unchanged and would still answer
without the network (fetched after exclude-newer, or within its time-to-live), a lock with the
same key reproduces the recorded files without resolving: the metadata it read is immutable (keyed
by artifact hash), so the resolution could only come out the same. `refresh` never replays; locks
that read local folders, download files to hash them, or use credentials are never recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.errors import EXIT_USAGE, KernodeckError, ResolutionError, UsageError
from kernodeck.fsio import interrupted_set, write_set
from kernodeck.index.cache import DEFAULT_PAGE_TTL, IndexCache, default_cache_dir, page_is_fresh
from kernodeck.lockfile.names import is_lock_file, pylock_filename, requirements_filename
from kernodeck.lockfile.write import (
    IndexLine,
    LockedFile,
    LockedPackage,
    PlatformLock,
    render_pylock,
    render_requirements,
)
from kernodeck.lockinputs import (
    HEADER_KEY,
    OLD_HEADER_KEY,
    default_index_for,
    lock_inputs_sha256,
    unsatisfied_pins,
)
from kernodeck.manifest.adopt import first_lock_source
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.pinreport import PinReport, first_lock_reports
from kernodeck.manifest.sources import apply_sources
from kernodeck.resolve.joint import Difference
from kernodeck.urls import redact, strip_userinfo

if TYPE_CHECKING:
    from kernodeck.index.models import IndexSource
    from kernodeck.manifest.schema import Manifest, Packages
    from kernodeck.resolve import Resolution, Routing, Session
    from kernodeck.targets import Target

Format = Literal["requirements", "pylock"]
Status = Literal["written", "unchanged", "fresh", "stale", "missing"]

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s\\;#]+)")


class LockProgress(Protocol):
    """What lock_manifest reports while it works (the command shows it with rich)."""

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

    def message(self) -> str:
        return f"cannot lock platform {self.platform}: {self.cause} (index {self.index_url})"


@dataclass(frozen=True)
class LockResult:
    manifest_path: Path
    platforms: tuple[PlatformResult, ...]
    check: bool
    seconds: float
    metadata_reads: int  # core metadata documents read (cache or network) in this lock
    failed: tuple[PlatformFailure, ...] = ()
    differences: tuple[Difference, ...] = ()  # versions that still differ across platforms
    notices: tuple[str, ...] = ()  # e.g. the locker's pip settings that were not used
    adopted: tuple[PinReport, ...] = ()  # first lock after init: the preferred pins kept/changed

    @property
    def ok(self) -> bool:
        return not self.stale and not self.failed

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


def read_pins(path: Path) -> dict[str, Version]:
    """`name==version` lines of an existing requirements file (for minimal churn)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return pins_of_text(text)


def pins_of_text(text: str) -> dict[str, Version]:
    """`name==version` lines of a requirements file's text."""
    out: dict[str, Version] = {}
    for line in text.splitlines():
        m = _PIN.match(line.strip())
        if m:
            try:
                out[canonicalize_name(m.group(1))] = Version(m.group(2))
            except InvalidVersion:
                continue
    return out


def _manifest_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p / "repro.toml" if p.is_dir() else p


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


def _requires_python(version: str) -> str:
    parts = version.split(".")
    return f"=={version}.*" if len(parts) == 2 else f"=={version}"


def _environment(target: Target) -> str:
    mk = target.markers
    return (
        f"sys_platform == '{mk['sys_platform']}' and platform_machine == '{mk['platform_machine']}'"
        f" and implementation_name == '{mk['implementation_name']}' and python_version == '{mk['python_version']}'"
    )


def _index_lines(routing: Routing, target: Target, used: Iterable[IndexSource]) -> tuple[IndexLine, ...]:
    used_urls = {s.url for s in used}
    primary = routing.defaults[0]
    ordered: list[IndexSource] = [primary, *routing.defaults[1:]]
    for src in routing.pinned.values():
        if src.url not in {s.url for s in ordered}:
            ordered.append(src)
    backend = routing.backend_source(target)
    if backend is not None:
        ordered.append(backend)
    lines: list[IndexLine] = []
    seen: set[str] = set()
    for i, src in enumerate(ordered):
        if src.url in seen or (i > 0 and src.url not in used_urls):
            continue
        seen.add(src.url)
        if src.format == "find-links":
            lines.append(IndexLine("find-links", src.url))
        else:
            kind = "index-url" if not any(ln.kind == "index-url" for ln in lines) else "extra-index-url"
            lines.append(IndexLine(kind, src.url))
    return tuple(lines)


def _platform_lock(
    res: Resolution,
    session: Session,
    *,
    manifest_name: str,
    lock_inputs: str,
    python_version: str,
    notes: tuple[str, ...] = (),
    inputs: dict[str, str] | None = None,
    unmirror: Callable[[str], str] = lambda url: url,
) -> PlatformLock:
    packages: list[LockedPackage] = []
    for pin in res.pins:
        cand = pin.candidate
        files = tuple(
            LockedFile(
                filename=f.filename,
                url=unmirror(f.url),
                sha256=session.sha256(f),
                is_wheel=f.is_wheel,
                size=f.size,
                upload_time=f.upload_time,
            )
            for f in cand.files
        )
        rp = cand.metadata_file.requires_python
        yanked = [f.yanked for f in cand.files if f.yanked is not None]
        packages.append(
            LockedPackage(
                name=cand.name,
                version=cand.version,
                index=unmirror(cand.source.url),
                files=files,
                via=pin.via,
                requires_python=str(rp) if rp else None,
                yanked=(next((y for y in yanked if y), "") if yanked else None),
            )
        )
    target = res.target
    return PlatformLock(
        platform=target.name,
        summary=target.summary(),
        manifest_name=manifest_name,
        lock_inputs_sha256=lock_inputs,
        notes=notes,
        exclude_newer=session.settings.exclude_newer,
        indexes=tuple(
            IndexLine(line.kind, unmirror(line.url))
            for line in _index_lines(
                session.routing_for(target), target, (p.candidate.source for p in res.pins)
            )
        ),
        packages=tuple(packages),
        requires_python=_requires_python(python_version),
        environment=_environment(target),
        inputs=tuple(sorted((inputs or {}).items())),
    )


def _diff(old: str | None, new: str, name: str) -> str:
    a = [] if old is None else old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    return "".join(
        difflib.unified_diff(
            a,
            b,
            fromfile=f"{name} (on disk)" if old is not None else "/dev/null",
            tofile=f"{name} (locked now)",
        )
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


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
    quiet: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: LockProgress | None = None,
    extra_inputs: Mapping[str, str] | None = None,
    mirrors: Sequence[str] | None = None,
) -> LockResult:
    """Lock a manifest for its platforms; raises ManifestError/UsageError (bad input). A platform
    that cannot be locked (failed resolution, unreadable index) is reported in `result.failed`.
    `extra_inputs` (name -> sha256) join each platform's lock-inputs digest."""
    started = time.perf_counter()
    if fmt not in ("requirements", "pylock"):
        raise UsageError(f"unknown format {fmt!r}", hint="use --format requirements or --format pylock")
    path = _manifest_path(manifest_path)
    manifest, inputs = apply_sources(load_manifest(path), path)  # [packages] from: files read now
    names = _select(manifest, platforms)
    out_dir = Path(output_dir) if output_dir is not None else path.parent
    upgrades = [_upgrade_requirement(u) for u in upgrade_packages]
    skip_pref = {canonicalize_name(r.name) for r in upgrades}
    default_index = default_index_for(manifest)
    mirror_map = parse_mirrors(
        manifest, os.environ.get("KERNODECK_MIRRORS", "").split() if mirrors is None else mirrors
    )
    notices = _pip_notices(manifest)
    # The digest is of the manifest as written: --upgrade-package constraints are a one-off choice.
    digests = {
        n: lock_inputs_sha256(
            manifest, n, default_index=default_index, extra={**inputs, **(extra_inputs or {})}
        )
        for n in names
    }
    # `--upgrade-package NAME<SPEC>` (as in pip-compile and uv) also constrains NAME for this lock.
    extra_constraints = [str(r) for r in upgrades if r.specifier]
    if extra_constraints:
        packages = manifest.packages.model_copy(
            update={"constraints": [*manifest.packages.constraints, *extra_constraints]}
        )
        manifest = manifest.model_copy(update={"packages": packages})
    prefs: dict[str, dict[str, Version]] = {}
    firsts: dict[str, tuple[str, dict[str, Version]]] = {}  # first locks: the adopted pins' source
    for n in names:
        # a platform's first lock prefers the pins of the project's uv.lock/pylock.toml/poetry.lock
        pinned = {} if upgrade else read_pins(out_dir / requirements_filename(n))
        first = None if upgrade or pinned else first_lock_source(path.parent)
        if first is not None:
            firsts[n] = first
            pinned = first[1]
        prefs[n] = {k: v for k, v in pinned.items() if k not in skip_pref}

    cache = IndexCache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    key = (
        None
        if extra_constraints
        else _replay_key(manifest, digests, path.name, names, fmt, prefs, mirror_map)
    )
    record = None if (key is None or refresh) else _replayable(cache, key, manifest, offline)
    failures: dict[str, PlatformFailure] = {}
    if record is not None:
        if progress is None and not quiet and sys.stderr.isatty():
            progress = RichProgress()
        if progress is not None:
            progress.start(names)
            for n in names:
                progress.done(n, int(record["platforms"][n]["pins"]))
            progress.close()
        rendered = {n: _Rendered(**record["platforms"][n]) for n in names}
        differences = [_difference_from_json(d) for d in record["differences"]]
        metadata_reads = 0
    else:
        rendered, failures, differences, metadata_reads, pages = _resolve_and_render(
            manifest,
            path,
            names,
            prefs,
            digests=digests,
            default_index=default_index,
            inputs=inputs,
            mirrors=mirror_map,
            fmt=fmt,
            offline=offline,
            refresh=refresh,
            quiet=quiet,
            cache_dir=cache_dir,
            progress=progress,
        )
        if failures and len(failures) == len(names):
            # Nothing could be locked: the error itself, as for a single platform.
            raise _combine_failures([failures[n] for n in names])
        if key is not None and pages is not None and not failures:
            entry = {
                "pages": pages,
                "platforms": {n: dataclasses.asdict(r) for n, r in rendered.items()},
                "differences": [d.to_json() for d in differences],
            }
            # The next run prefers the pins this run writes: record the lock under that run's key
            # too, so the first re-lock after a lock replays (the resolution, with its own output
            # preferred, can only come out the same).
            next_prefs = {n: pins_of_text(rendered[n].text) for n in names}
            next_key = (
                None
                if check
                else _replay_key(manifest, digests, path.name, names, fmt, next_prefs, mirror_map)
            )
            with contextlib.suppress(OSError):
                for k in dict.fromkeys(k for k in (key, next_key) if k is not None):
                    cache.put_lock_record(k, entry)
    result = _finish(
        path,
        out_dir,
        [n for n in names if n not in failures],
        rendered,
        manifest=manifest,
        fmt=fmt,
        check=check,
        started=started,
        metadata_reads=metadata_reads,
        failed=tuple(failures[n] for n in names if n in failures),
        differences=tuple(differences),
        notices=tuple(notices),
    )
    locked = {n: pins_of_text(rendered[n].text) for n in names if n not in failures and not check}
    return dataclasses.replace(result, adopted=first_lock_reports(manifest, path, firsts, locked))


def parse_mirrors(manifest: Manifest, specs: Sequence[str]) -> dict[str, str]:
    """`NAME=URL` items: NAME a declared index, `default` (the default index) or `pytorch` (the
    PyTorch index base)."""
    known = {ix.name for ix in manifest.packages.index} | {"default", "pytorch"}
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, url = spec.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise UsageError(
                f"mirror {redact(spec)!r} is not NAME=URL",
                hint="e.g. --mirror default=https://mirror.example/simple",
            )
        if name not in known:
            raise UsageError(
                f"mirror for unknown index {name!r}",
                context=[f"indexes: {', '.join(sorted(known))}"],
                hint="name an index of repro.toml, `default` or `pytorch`",
            )
        if not url.startswith(("http://", "https://", "file://")):
            raise UsageError(f"mirror url {redact(url)!r} must start with https://, http:// or file://")
        out[name] = url
    return out


def _mirrored(routing: Routing, mirrors: Mapping[str, str]) -> tuple[Routing, list[tuple[str, str]]]:
    """The routing with mirrored URLs, and (mirror URL, declared URL) pairs to map back."""
    back: list[tuple[str, str]] = []

    def swap(src: IndexSource) -> IndexSource:
        url = mirrors.get(src.name)
        if url is None:
            return src
        back.append((url, src.url))
        return dataclasses.replace(src, url=url)

    base = routing.pytorch_base
    if "pytorch" in mirrors:
        back.append((mirrors["pytorch"], base))
        base = mirrors["pytorch"]
    mirrored = dataclasses.replace(
        routing,
        defaults=tuple(swap(s) for s in routing.defaults),
        pinned={k: swap(s) for k, s in routing.pinned.items()},
        pytorch_base=base,
    )
    return mirrored, back


def _unmirror(back: Sequence[tuple[str, str]]) -> Callable[[str], str]:
    """Map a URL under a mirror back to the declared index (longest mirror first)."""
    pairs = sorted(((m.rstrip("/"), d.rstrip("/")) for m, d in back), key=lambda p: -len(p[0]))

    def unmirror(url: str) -> str:
        for m, d in pairs:
            if url == m or url.startswith(m + "/"):
                return d + url[len(m) :]
        return url

    return unmirror


def _replace_all(text: str, back: Sequence[tuple[str, str]]) -> str:
    """`text` naming the declared indexes instead of their mirrors (what a file may say)."""
    for m, d in sorted(back, key=lambda p: -len(p[0])):
        text = text.replace(m.rstrip("/"), strip_userinfo(d).rstrip("/"))
    return text


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


def _difference_from_json(d: dict[str, Any]) -> Difference:
    return Difference(
        canonicalize_name(d["package"]), {p: Version(v) for p, v in d["versions"].items()}, str(d["reason"])
    )


@dataclass(frozen=True)
class _Rendered:
    """One platform's lock, rendered (what a replay restores)."""

    summary: str
    text: str
    pylock: str | None
    pins: int
    hash_lines: int
    warnings: tuple[str, ...] = ()


_REPLAY_FORMAT = 2


def _sources_fingerprint() -> str:
    """Size and mtime of every module of kernodeck: a changed source never replays an old lock."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                st = os.stat(os.path.join(dirpath, fn))
                h.update(
                    f"{os.path.relpath(os.path.join(dirpath, fn), root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()
                )
    return h.hexdigest()


def _replay_key(
    manifest: Manifest,
    digests: Mapping[str, str],
    manifest_name: str,
    names: Sequence[str],
    fmt: str,
    prefs: dict[str, dict[str, Version]],
    mirrors: Mapping[str, str] | None = None,
) -> str | None:
    """The key of a lock's record; None when it must not be recorded (credentials in play)."""
    import packaging

    pk = manifest.packages
    urls = [ix.url or "" for ix in pk.index] + [pk.pytorch_index or ""]
    default = default_index_for(manifest) or ""
    urls.append(default)
    urls.extend((mirrors or {}).values())
    if any("${" in u or "@" in u for u in urls):
        return None
    doc = {
        "format": _REPLAY_FORMAT,
        "python": list(sys.version_info[:2]),
        "packaging": packaging.__version__,
        "sources": _sources_fingerprint(),
        "lock_inputs": {n: digests[n] for n in names},
        "manifest_name": manifest_name,
        "platforms": list(names),
        "fmt": fmt,
        "default_index": default,
        "mirrors": sorted((mirrors or {}).items()),
        "preferred": {n: sorted((k, str(v)) for k, v in prefs[n].items()) for n in names},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _replayable(cache: IndexCache, key: str, manifest: Manifest, offline: bool) -> dict[str, Any] | None:
    """The record under `key` when every page it read still stands and may answer offline."""
    record = cache.get_lock_record(key)
    if record is None:
        return None
    try:
        exclude_newer = manifest.packages.exclude_newer
        for page in record["pages"]:
            if cache.fingerprint(page["url"]) != tuple(page["fingerprint"]):
                return None
            if not offline and not page_is_fresh(
                float(page["fetched_at"]),
                page["etag"],
                page["last_modified"],
                exclude_newer=exclude_newer,
                ttl=DEFAULT_PAGE_TTL,
            ):
                return None
        for r in record["platforms"].values():
            _Rendered(**r)
        for d in record["differences"]:
            _difference_from_json(d)
    except (KeyError, TypeError, ValueError):
        return None
    return record


def _resolve_and_render(
    manifest: Manifest,
    path: Path,
    names: Sequence[str],
    prefs: dict[str, dict[str, Version]],
    *,
    digests: Mapping[str, str],
    default_index: str | None,
    inputs: dict[str, str] | None = None,
    fmt: Format,
    offline: bool,
    refresh: bool,
    quiet: bool,
    cache_dir: str | os.PathLike[str] | None,
    progress: LockProgress | None,
    mirrors: Mapping[str, str] | None = None,
) -> tuple[
    dict[str, _Rendered], dict[str, PlatformFailure], list[Difference], int, list[dict[str, Any]] | None
]:
    """Resolve every platform (jointly unless same-versions = "no"), render the files of those
    that could be locked; (rendered, failures, differences, metadata reads, pages read or None
    when the lock cannot be replayed). Raises a bad-input error (exit 2) as it is."""
    from kernodeck.resolve import ResolveSettings, Routing, Session, resolve_target
    from kernodeck.resolve.joint import Constraints, align

    settings = ResolveSettings.from_packages(manifest.packages)

    def route(packages: Packages) -> Routing:
        if default_index is not None:
            fixed = default_index
            return Routing.from_packages(packages, default_url=lambda: fixed)
        return Routing.from_packages(packages)

    routing, back = _mirrored(route(manifest.packages), mirrors or {})
    # A platform that some index is restricted away from (or to) routes on its own.
    per_platform: dict[str, Routing] = {}
    for n in names:
        own = manifest.packages_for(n)
        if own is not manifest.packages:
            per_platform[n], more = _mirrored(route(own), mirrors or {})
            back.extend(more)
    unmirror = _unmirror(back)
    targets = {t.name: t for t in _targets(manifest, names)}
    if progress is None and not quiet and sys.stderr.isatty():
        progress = RichProgress()
    if progress is not None:
        progress.start(names)

    results: dict[str, Resolution] = {}
    errors: dict[str, KernodeckError] = {}
    lock = threading.Lock()
    session = Session(
        routing,
        settings,
        cache_dir=Path(cache_dir) if cache_dir is not None else None,
        offline=offline,
        refresh=refresh,
        per_platform=per_platform,
    )
    same = manifest.packages.same_versions
    differences: list[Difference] = []
    try:

        def resolve(name: str, extra: Constraints) -> Resolution:
            target = targets[name]
            return resolve_target(
                session,
                target,
                preferred=prefs[name],
                manifest_name=path.name,
                on_pin=(lambda what: progress.pinned(name, what)) if progress else None,
                on_metadata=(lambda: progress.metadata(name)) if progress else None,
                extra_constraints=[Requirement(f"{n}{spec}") for n, spec in sorted(extra.items())],
            )

        def run(name: str) -> None:
            try:
                res = resolve(name, {})
            except KernodeckError as e:
                with lock:
                    errors[name] = e
                return
            with lock:
                results[name] = res

        with ThreadPoolExecutor(
            max_workers=max(1, min(len(targets), 8)), thread_name_prefix="kernodeck-lock"
        ) as pool:
            list(pool.map(run, list(targets)))
        usage = [errors[n] for n in names if n in errors and errors[n].exit_code == EXIT_USAGE]
        if usage:
            raise _combine(usage)
        if same != "no" and len(results) > 1:
            aligned, differences = align(results, resolve)
            results.update(aligned)
        if same == "require":
            for d in differences:
                for n in d.versions:
                    errors.setdefault(
                        n,
                        ResolutionError(
                            f"cannot lock platform {n}: {d.describe()} "
                            '(same-versions = "require" allows no difference)'
                        ),
                    )
        if progress is not None:
            for n, res in results.items():
                if n not in errors:
                    progress.done(n, len(res.pins))

        ok = [n for n in names if n not in errors]
        locks = {
            n: _platform_lock(
                results[n],
                session,
                manifest_name=path.name,
                lock_inputs=digests[n],
                inputs=inputs,
                python_version=next(
                    p.python or manifest.python.version for p in manifest.platform if p.name == n
                ),
                notes=tuple(_replace_all(d.note_for(n), back) for d in differences if n in d.versions),
                unmirror=unmirror,
            )
            for n in ok
        }
        metadata_reads = session.metadata_reads
        pages = session.client.used_pages()
    finally:
        session.close()
        if progress is not None:
            progress.close()

    rendered = {
        n: _Rendered(
            summary=locks[n].summary,
            text=render_requirements(locks[n]),
            pylock=render_pylock(locks[n]) if fmt == "pylock" else None,
            pins=len(locks[n].packages),
            hash_lines=sum(len(p.hashes) for p in locks[n].packages),
            warnings=tuple(
                f"{p.name}=={p.version} is a yanked release"
                + (f" ({' '.join(p.yanked.split())})" if p.yanked else "")
                for p in locks[n].packages
                if p.yanked is not None
            ),
        )
        for n in ok
    }
    failures = {
        n: _failure(n, errors[n], per_platform.get(n, routing), targets[n]) for n in names if n in errors
    }
    return rendered, failures, differences, metadata_reads, pages


def _targets(manifest: Manifest, names: Sequence[str]) -> list[Target]:
    from kernodeck.targets import Target

    return [Target.from_platform(p, manifest.python) for p in manifest.platform if p.name in names]


_URL = re.compile(r"(?:https?|file)://[^\s'\")]+")


def _failure(name: str, error: KernodeckError, routing: Routing, target: Target) -> PlatformFailure:
    """The platform, the index involved (named in the error, else the platform's first index)
    and the first cause."""
    from kernodeck.resolve.joint import first_cause

    found = _URL.search(" ".join([error.message, *error.context]))
    backend = routing.backend_source(target)
    known = [*routing.defaults, *routing.pinned.values(), *([backend] if backend is not None else [])]
    if found:
        url = found.group(0)
        # The index itself rather than the page or file that failed, when it is a known one.
        bare = [strip_userinfo(s.url) for s in known]
        prefixes = [u for u in bare if url.startswith(u.rstrip("/"))]
        if prefixes:
            url = max(prefixes, key=len)
    else:
        url = backend.url if backend is not None and "torch" in error.message else routing.defaults[0].url
    return PlatformFailure(name, strip_userinfo(redact(url)), first_cause(error, name), error)


def _finish(
    path: Path,
    out_dir: Path,
    names: Sequence[str],
    rendered: dict[str, _Rendered],
    *,
    manifest: Manifest,
    fmt: Format,
    check: bool,
    started: float,
    metadata_reads: int,
    failed: tuple[PlatformFailure, ...] = (),
    differences: tuple[Difference, ...] = (),
    notices: tuple[str, ...] = (),
) -> LockResult:
    out: list[PlatformResult] = []
    pending: list[tuple[Path, str]] = []
    targets = {t.name: t for t in _targets(manifest, names)} if check else {}
    torn = check and interrupted_set(out_dir)
    for name in names:
        r = rendered[name]
        text = r.text
        req_path = out_dir / requirements_filename(name)
        files = [(req_path, text)]
        py_path: Path | None = None
        if fmt == "pylock":
            py_path = out_dir / pylock_filename(name)
            files.append((py_path, r.pylock or ""))
        diffs = []
        missing = False
        reasons: list[str] = []
        for fpath, content in files:
            old = _read(fpath)
            if old != content:
                missing = missing or old is None
                diffs.append(_diff(old, content, fpath.name))
                if not check:
                    pending.append((fpath, content))
                elif old is not None:
                    reasons.extend(_stale_reasons(old, content, manifest, targets[name], fpath.suffix))
        if torn:
            reasons.append(
                "an earlier `kernodeck lock` was interrupted while it replaced the files: they may be a mix"
                " of two runs; run `kernodeck lock` to finish it"
            )
        status: Status
        if check:
            status = "fresh" if not diffs and not torn else ("missing" if missing else "stale")
        else:
            status = "written" if diffs else "unchanged"
        out.append(
            PlatformResult(
                platform=name,
                summary=r.summary,
                requirements_path=req_path,
                pylock_path=py_path,
                status=status,
                pins=r.pins,
                hash_lines=r.hash_lines,
                text=text,
                diff="".join(diffs) if check else "",
                reasons=tuple(dict.fromkeys(reasons)),
                warnings=tuple(r.warnings),
            )
        )
    if not check:
        # every file of this lock moves together: the whole old set or the whole new set
        write_set(out_dir, [(f.name, c.encode("utf-8")) for f, c in pending], is_lock_file)
    return LockResult(
        manifest_path=path,
        platforms=tuple(out),
        check=check,
        seconds=time.perf_counter() - started,
        metadata_reads=metadata_reads,
        failed=failed,
        differences=differences,
        notices=notices,
    )


_HEADER_DIGEST = re.compile(rf"(?:{HEADER_KEY}|{OLD_HEADER_KEY}):\s*([0-9a-f]{{64}})")


def _stale_reasons(old: str, new: str, manifest: Manifest, target: Target, suffix: str) -> list[str]:
    """Why a file on disk differs from the lock computed now, in words."""
    out: list[str] = []
    if HEADER_KEY not in old and OLD_HEADER_KEY in old:
        return [
            "written with the old header (manifest-sha256); re-run `kernodeck lock`: the header format changed"
        ]
    a, b = _HEADER_DIGEST.search(old), _HEADER_DIGEST.search(new)
    if a is None or b is None or a.group(1) != b.group(1):
        out.append(
            "the lock inputs changed (Python, [packages] requirements, constraints, indexes or "
            "exclude-newer, the platforms, or the backend table)"
        )
    if suffix == ".txt":
        out.extend(unsatisfied_pins(old, manifest, target))
    if not out:
        out.append("the pins or hashes differ from a fresh lock (edited by hand, or the index changed)")
    return out


def _combine_failures(fails: list[PlatformFailure]) -> KernodeckError:
    first = fails[0].error
    context = [*first.context, f"index: {fails[0].index_url}"]
    context.extend(f"also: {f.message()}" for f in fails[1:])
    cls = ResolutionError if all(isinstance(f.error, ResolutionError) for f in fails) else type(first)
    combined = cls(first.message, context=context, hint=first.hint)
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


class RichProgress:
    """Progress on stderr: packages pinned and metadata read, per platform."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn("{task.fields[pins]} pinned, {task.fields[meta]} metadata"),
            TextColumn("{task.fields[last]}", style="dim"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._tasks: dict[str, int] = {}
        self._counts: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def start(self, platforms: Sequence[str]) -> None:
        self._progress.start()
        for p in platforms:
            self._tasks[p] = int(self._progress.add_task(p, total=None, pins=0, meta=0, last=""))
            self._counts[p] = [0, 0]

    def pinned(self, platform: str, what: str) -> None:
        with self._lock:
            c = self._counts[platform]
            c[0] += 1
            self._progress.update(self._tasks[platform], pins=c[0], last=what)  # type: ignore[arg-type]

    def metadata(self, platform: str) -> None:
        with self._lock:
            c = self._counts[platform]
            c[1] += 1
            self._progress.update(self._tasks[platform], meta=c[1])  # type: ignore[arg-type]

    def done(self, platform: str, pins: int) -> None:
        with self._lock:
            self._progress.update(self._tasks[platform], pins=pins, last="done", total=1, completed=1)  # type: ignore[arg-type]

    def close(self) -> None:
        self._progress.stop()
