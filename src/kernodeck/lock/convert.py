"""One platform's resolution as lock files: pins -> `PlatformLock` -> rendered text, and why a
file on disk differs from it.

    lock = platform_lock(resolution, session, manifest_name=..., lock_inputs=..., python_version=...)
    rendered = render(lock, "pylock")       # Rendered: the texts, counts and warnings
    stale_reasons(old_text, rendered.text, manifest, target, ".txt")

No I/O: the renderers themselves are `kernodeck.lockfile.write`; `kernodeck.lock.orchestrate` writes the
files. `Rendered` is also what the replay cache (`kernodeck.lock.replay`) records and restores.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kernodeck.lock.inputs import changed_inputs, unsatisfied_pins
from kernodeck.lockfile.header import (
    EXCLUDE_NEWER_KEY,
    OLD_HEADER_KEY,
    PLATFORM_KEY,
    file_inputs,
    has_old_header,
    header_digest,
    header_values,
)
from kernodeck.lockfile.write import (
    IndexLine,
    LockedFile,
    LockedPackage,
    PlatformLock,
    render_pylock,
    render_requirements,
)

if TYPE_CHECKING:
    from kernodeck.index.models import IndexSource
    from kernodeck.lockfile.read import LockFile
    from kernodeck.manifest.schema import Manifest
    from kernodeck.resolve import Resolution, Routing, Session
    from kernodeck.targets import Target

Format = Literal["requirements", "pylock"]


@dataclass(frozen=True)
class Rendered:
    """One platform's lock, rendered (what a replay restores)."""

    summary: str
    text: str
    pylock: str | None
    pins: int
    hash_lines: int
    warnings: tuple[str, ...] = ()


def requires_python(version: str) -> str:
    parts = version.split(".")
    return f"=={version}.*" if len(parts) == 2 else f"=={version}"


def environment(target: Target) -> str:
    mk = target.markers
    return (
        f"sys_platform == '{mk['sys_platform']}' and platform_machine == '{mk['platform_machine']}'"
        f" and implementation_name == '{mk['implementation_name']}' and python_version == '{mk['python_version']}'"
    )


def index_lines(routing: Routing, target: Target, used: Iterable[IndexSource]) -> tuple[IndexLine, ...]:
    """The index options of a file: the primary index, then the others the pins came from."""
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


def platform_lock(
    res: Resolution,
    session: Session,
    *,
    manifest_name: str,
    lock_inputs: str,
    python_version: str,
    notes: tuple[str, ...] = (),
    inputs: dict[str, str] | None = None,
    via: Mapping[str, tuple[str, ...]] | None = None,
    unmirror: Callable[[str], str] = lambda url: url,
) -> PlatformLock:
    """A resolution as the model both renderers take (URLs under a mirror mapped back). `via`
    names where each requirement of the manifest comes from (`-r requirements.txt`: the manifest's
    `from` sources, `kernodeck.manifest.sources.root_via`); without it, `-r <manifest_name>`."""
    packages: list[LockedPackage] = []
    manifest_parent = f"-r {manifest_name}"
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
                via=_root_via(pin.via, (via or {}).get(cand.name), manifest_parent),
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
            for line in index_lines(
                session.routing_for(target), target, (p.candidate.source for p in res.pins)
            )
        ),
        packages=tuple(packages),
        requires_python=requires_python(python_version),
        environment=environment(target),
        inputs=tuple(sorted((inputs or {}).items())),
    )


def _root_via(via: tuple[str, ...], roots: tuple[str, ...] | None, manifest_parent: str) -> tuple[str, ...]:
    """A pin's `via` with the manifest named by where it requires the project (roots first)."""
    if not roots or manifest_parent not in via:
        return via
    return (*roots, *(v for v in via if v != manifest_parent))


def render(lock: PlatformLock, fmt: Format) -> Rendered:
    """The texts of a platform's files, its counts and its warnings (a yanked release pinned)."""
    return Rendered(
        summary=lock.summary,
        text=render_requirements(lock),
        pylock=render_pylock(lock) if fmt == "pylock" else None,
        pins=len(lock.packages),
        hash_lines=sum(len(p.hashes) for p in lock.packages),
        warnings=tuple(
            f"{p.name}=={p.version} is a yanked release"
            + (f" ({' '.join(p.yanked.split())})" if p.yanked else "")
            for p in lock.packages
            if p.yanked is not None
        ),
    )


def diff(old: str | None, new: str, name: str) -> str:
    """A unified diff of a file on disk (None: missing) and the text locked now."""
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


def stale_reasons(
    old: str,
    new: str,
    manifest: Manifest,
    target: Target,
    suffix: str,
    filename: str = "requirements.txt",
    *,
    platforms_changed: str | None = None,
) -> list[str]:
    """Why a file on disk differs from the lock computed now, in words. `platforms_changed` says
    which platforms were added or removed when they are locked together (every file depends on
    them then)."""
    out: list[str] = []
    if has_old_header(old):
        return [
            f"written with the old header ({OLD_HEADER_KEY}); re-run `kernodeck lock`: the header format changed"
        ]
    a, b = header_digest(old), header_digest(new)
    files = changed_inputs(old, file_inputs(new)) if a != b else []
    out.extend(files)
    if (a is None or b is None or a != b) and not files:
        named = _changed_header(old, new, filename if suffix == ".txt" else None)
        if platforms_changed is not None:
            named.append(platforms_changed)
        out.extend(
            named
            or [
                "the lock inputs changed (Python, [packages] requirements, constraints, indexes or "
                "exclude-newer, the platforms, or the backend table)"
            ]
        )
    if suffix == ".txt":
        # a requirement added to the manifest is said once ("repro.toml requires idna now")
        added = {n for names in _root_changes(old, new, filename)[0].values() for n in names}
        out.extend(
            line
            for line in unsatisfied_pins(old, manifest, target, filename)
            if line.removesuffix(" is required by the manifest but not pinned") not in added
        )
    if not out:
        if suffix == ".txt" and _installs_alike(old, new, filename):
            out.append(
                "only comments differ (`# via` and notes; written by another Kernodeck version): "
                "the same pins, hashes and options"
            )
        else:
            out.append("the pins or hashes differ from a fresh lock (edited by hand, or the index changed)")
    return out


def _changed_header(old: str, new: str, filename: str | None) -> list[str]:
    """Which lock inputs the headers (and, for a requirements file, its index options and `# via
    -r repro.toml` lines) show changed, in words: the platform's Python and tags, exclude-newer,
    the indexes, the requirements written in the manifest."""
    was, now = header_values(old), header_values(new)
    out: list[str] = []
    for key, what in ((PLATFORM_KEY, "the platform"), (EXCLUDE_NEWER_KEY, "exclude-newer")):
        a, b = was.get(key), now.get(key)
        if a is not None and b is not None and a != b:
            if key == PLATFORM_KEY:
                a, b = a.partition(" ")[2].strip("()"), b.partition(" ")[2].strip("()")
            out.append(f"{what} is now {b} (was {a})")
    if filename is None:
        return out
    from kernodeck.lockfile.read import LockfileError, parse_lockfile

    try:
        a_ix, b_ix = (parse_lockfile(t, filename, lenient=True).index_options() for t in (old, new))
    except LockfileError:
        return out
    if a_ix != b_ix:
        out.append(f"the indexes are now {' '.join(b_ix) or 'none'} (were {' '.join(a_ix) or 'none'})")
    added, gone = _root_changes(old, new, filename)
    for manifest in sorted(added.keys() | gone.keys()):
        if added.get(manifest):
            out.append(f"{manifest} requires {', '.join(added[manifest])} now")
        if gone.get(manifest):
            out.append(f"{manifest} no longer requires {', '.join(gone[manifest])}")
    return out


def _root_changes(old: str, new: str, filename: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({manifest: requirements added}, {manifest: requirements taken out}), as the pins' `# via
    -r repro.toml` lines of two requirements files say (a changed specifier does not show)."""
    from kernodeck.lockfile.read import LockfileError, parse_lockfile

    def roots(text: str) -> dict[str, set[str]]:
        by: dict[str, set[str]] = {}
        try:
            pins = parse_lockfile(text, filename, lenient=True).pins
        except LockfileError:
            return by
        for pin in pins:
            for v in pin.via:
                if v.startswith("-r ") and v.endswith(".toml"):
                    by.setdefault(v[3:], set()).add(pin.name)
        return by

    was, now = roots(old), roots(new)
    names = was.keys() | now.keys()
    added = {m: sorted(now.get(m, set()) - was.get(m, set())) for m in names}
    gone = {m: sorted(was.get(m, set()) - now.get(m, set())) for m in names}
    return {m: v for m, v in added.items() if v}, {m: v for m, v in gone.items() if v}


def _installs_alike(old: str, new: str, filename: str) -> bool:
    """Whether two requirements files install the same: the same options and the same pins with
    the same hashes, whatever their comments say."""
    from kernodeck.lockfile.read import LockfileError, parse_lockfile

    try:
        a, b = parse_lockfile(old, filename), parse_lockfile(new, filename)
    except LockfileError:
        return False

    def pins(lock: LockFile) -> list[tuple[object, ...]]:
        return sorted((p.key, p.version, sorted(p.hashes), p.marker, p.extras, p.url) for p in lock.pins)

    return a.options == b.options and pins(a) == pins(b)
