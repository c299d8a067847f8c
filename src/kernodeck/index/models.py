"""What an index says: project pages (PEP 691 JSON / PEP 503 HTML), their files, and core metadata.

Values only, no I/O. Parsing a page never fails because of one file: an entry with a malformed
field becomes a `(filename, reason)` pair in `ProjectPage.rejected` and the rest of the page stays.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from kernodeck.errors import IndexError_
from kernodeck.support.urls import strip_userinfo

JSON_CONTENT_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_CONTENT_TYPE = "application/vnd.pypi.simple.v1+html"
ACCEPT = f"{JSON_CONTENT_TYPE}, {HTML_CONTENT_TYPE};q=0.2, text/html;q=0.01"

_HEX = re.compile(r"^[0-9a-fA-F]+$")
_HASH_LENGTHS = {
    "sha256": 64,
    "sha384": 96,
    "sha512": 128,
    "sha224": 56,
    "sha1": 40,
    "md5": 32,
    "blake2b": 128,
}
SDIST_SUFFIXES = (".tar.gz", ".zip")


# Filename parsing is the hot spot of reading a project page (tens of thousands of files): a
# filename is split by the wheel/sdist rules and each part (name, version, build, tag set) is
# validated once per distinct text by packaging itself, on a filename made of that part and
# known-good others. The verdict is packaging's; a failure is re-raised by packaging on the real
# filename, so the message is packaging's too.
_GOOD_WHEEL = ("x", "0", "py3-none-any")
_part_cache: dict[tuple[str, str], Any] = {}
_part_lock = threading.Lock()
_FAILED = object()


def _remember(key: tuple[str, str], value: Any) -> Any:
    """Keep a verdict on a filename part (the cache is emptied past 200,000 of them)."""
    with _part_lock:
        if len(_part_cache) > 200_000:
            _part_cache.clear()
        _part_cache[key] = value
    return value


def _version_part(text: str) -> Any:
    """packaging's verdict on the version part of a wheel or sdist filename: `Version(text)` is
    all either parser asks of it (no tag set or name parsed to judge one version text)."""
    hit = _part_cache.get(("version", text))
    if hit is not None:
        return hit
    try:
        value: Any = Version(text)
    except InvalidVersion:
        value = _FAILED
    return _remember(("version", text), value)


def _wheel_part(kind: str, text: str) -> Any:
    if kind == "version" and "-" not in text:
        return _version_part(text)
    key = (kind, text)
    hit = _part_cache.get(key)
    if hit is not None:
        return hit
    name, version, tag = _GOOD_WHEEL
    build = ""
    if kind == "name":
        name = text
    elif kind == "version":
        version = text
    elif kind == "build":
        build = f"-{text}"
    else:
        tag = text
    try:
        n, v, b, t = parse_wheel_filename(f"{name}-{version}{build}-{tag}.whl")
        value: Any = {"name": n, "version": v, "build": b, "tag": t}[kind]
    except (InvalidWheelFilename, InvalidVersion):
        value = _FAILED
    return _remember(key, value)


def _sdist_part(kind: str, text: str) -> Any:
    if kind == "version" and "-" not in text:
        return _version_part(text)
    key = ("sdist-" + kind, text)
    hit = _part_cache.get(key)
    if hit is not None:
        return hit
    try:
        n, v = parse_sdist_filename(f"{text}-0.tar.gz" if kind == "name" else f"x-{text}.tar.gz")
        value: Any = n if kind == "name" else v
    except (InvalidSdistFilename, InvalidVersion):
        value = _FAILED
    return _remember(key, value)


def _parse_filename_fast(filename: str) -> tuple[NormalizedName, Version, frozenset[Tag] | None] | None:
    """packaging's verdict on `filename` from cached verdicts on its parts; None when invalid."""
    if filename.endswith(".whl"):
        stem = filename[:-4]
        dashes = stem.count("-")
        if dashes not in (4, 5):
            return None
        parts = stem.split("-", dashes - 2)
        name = _wheel_part("name", parts[0])
        version = _wheel_part("version", parts[1])
        tags = _wheel_part("tag", parts[-1])
        if name is _FAILED or version is _FAILED or tags is _FAILED:
            return None
        if dashes == 5 and _wheel_part("build", parts[2]) is _FAILED:
            return None
        return name, version, tags
    if filename.endswith(".tar.gz"):
        stem = filename[:-7]
    elif filename.endswith(".zip"):
        stem = filename[:-4]
    else:
        return None
    name_part, sep, version_part = stem.rpartition("-")
    if not sep or not name_part:
        return None
    name = _sdist_part("name", name_part)
    version = _sdist_part("version", version_part)
    if name is _FAILED or version is _FAILED:
        return None
    return name, version, None


def _parse_filename_slow(filename: str) -> tuple[NormalizedName, Version, frozenset[Tag] | None]:
    if filename.endswith(".whl"):
        name, version, _build, tags = parse_wheel_filename(filename)
        return name, version, tags
    if filename.endswith(SDIST_SUFFIXES):
        name, version = parse_sdist_filename(filename)
        return name, version, None
    raise ValueError(f"not a wheel or sdist: {filename!r}")


@functools.lru_cache(maxsize=65536)
def _parse_filename(
    filename: str,
) -> tuple[NormalizedName, Version, frozenset[Tag] | None]:
    """(project, version, tags or None for an sdist); raises ValueError for an unusable name."""
    fast = _parse_filename_fast(filename)
    if fast is not None:
        return fast
    return _parse_filename_slow(filename)  # raises packaging's error for this filename


def parse_filename(filename: str) -> tuple[NormalizedName, Version, frozenset[Tag] | None]:
    """Project, version and (for wheels) tags from a distribution filename; ValueError when invalid."""
    try:
        return _parse_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion) as e:
        raise ValueError(f"invalid distribution filename {filename!r}: {e}") from None


@dataclass(frozen=True, eq=True)
class IndexFile:
    """One downloadable file of one project on one index."""

    filename: str
    url: str  # absolute, never with credentials
    hashes: Mapping[str, str]
    requires_python: str | None
    yanked: str | None  # None: not yanked; "": yanked without a reason
    upload_time: datetime | None
    size: int | None
    core_metadata: Mapping[str, str] | bool | None  # hashes of the PEP 658 file, True without hashes
    index: str  # the source name

    def __hash__(self) -> int:
        return hash((self.index, self.url, self.filename))

    @property
    def sha256(self) -> str | None:
        return self.hashes.get("sha256")

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def is_sdist(self) -> bool:
        return self.filename.endswith(SDIST_SUFFIXES)

    @property
    def project(self) -> NormalizedName:
        return parse_filename(self.filename)[0]

    @property
    def version(self) -> Version:
        return parse_filename(self.filename)[1]

    @property
    def tags(self) -> frozenset[Tag]:
        """The wheel's tags; empty for an sdist."""
        return parse_filename(self.filename)[2] or frozenset()

    @property
    def tag_text(self) -> str:
        """The tag part of a wheel filename ("cp312-cp312-win_amd64"); "" for an sdist."""
        if not self.is_wheel:
            return ""
        return "-".join(self.filename[: -len(".whl")].split("-")[-3:])

    @property
    def has_metadata_file(self) -> bool:
        return bool(self.core_metadata)

    @property
    def metadata_url(self) -> str:
        return self.url + ".metadata"

    @property
    def metadata_sha256(self) -> str | None:
        if isinstance(self.core_metadata, Mapping):
            return self.core_metadata.get("sha256")
        return None


# One validated file of a page, in a compact form that marshal can store (see cache.py):
# (filename, absolute url without credentials, hashes, requires-python, yanked, upload-time text,
#  size, core-metadata, version text). `IndexFile`s are built from it only when asked for.
Entry = tuple[str, str, dict[str, str], "str | None", "str | None", "str | None", "int | None", Any, str]


def file_from_entry(e: Entry, index: str) -> IndexFile:
    cm = e[7]
    return IndexFile(
        filename=e[0],
        url=e[1],
        hashes=e[2],
        requires_python=e[3],
        yanked=e[4],
        upload_time=_parse_time(e[5]) if e[5] is not None else None,
        size=e[6],
        core_metadata=cm,
        index=index,
    )


# A JSON page's file entry as written, its fields picked out but not validated yet: (filename,
# url, hashes, requires-python, yanked, upload-time, size, core-metadata); None for an entry that
# is not an object. A lazy `ProjectPage` validates one version's entries when they are asked for.
RawEntry = tuple[Any, Any, Any, Any, Any, Any, Any, Any] | None


def _version_key(filename: Any) -> str | None:
    """The version text of what looks like a distribution filename (the grouping key of a lazy
    page; validation decides); None when it cannot be one."""
    if not isinstance(filename, str):
        return None
    if filename.endswith(".whl"):
        parts = filename.split("-")
        return parts[1] if len(parts) in (5, 6) else None
    if filename.endswith(".tar.gz"):
        return filename[:-7].rpartition("-")[2]
    if filename.endswith(".zip"):
        return filename[:-4].rpartition("-")[2]
    return None


def _version_of(text: str, filename: str) -> Version:
    v = _wheel_part("version", text)
    if v is _FAILED:  # cannot happen for a validated entry; packaging decides
        return _parse_filename(filename)[1]
    assert isinstance(v, Version)
    return v


def _later_by_text(text: str, cut: str) -> bool:
    """Whether an upload time as indexes write it is later than `cut` by whole seconds (whatever
    the fractions); False when the text alone cannot tell."""
    return len(text) >= 20 and text[-1] == "Z" and bool(_PLAIN_TIME.match(text)) and text[:19] > cut


# Reads parts of a page body back: (start, end) character offsets -> that text, one per run.
SpanReader = Callable[[Sequence[tuple[int, int]]], list[str]]
# Runs of a page body closer than this many characters are read as one.
_RUN_GAP = 16 * 1024
_SCAN: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's own scanner: the same objects, the same verdicts


def _raw_entry(entry: Any) -> RawEntry:
    """A JSON page's file entry with its fields picked out (None when it is not an object)."""
    if not isinstance(entry, dict):
        return None
    return (
        entry.get("filename"),
        entry.get("url"),
        entry.get("hashes", {}),
        entry.get("requires-python"),
        entry.get("yanked"),
        entry.get("upload-time"),
        entry.get("size"),
        entry.get("core-metadata", entry.get("dist-info-metadata")),
    )


def _judge_raw(name: str, page_url: str, r: RawEntry, i: int) -> Entry | tuple[str, str]:
    """The validated entry of raw entry `r` at position `i`, or its (label, reason)."""
    if r is None:
        return (f"entry {i}", "entry is not an object")
    try:
        return _entry(
            name,
            page_url,
            filename=r[0],
            url=r[1],
            hashes=r[2],
            requires_python=r[3],
            yanked=r[4],
            upload_time=r[5],
            size=r[6],
            core_metadata=r[7],
        )
    except ValueError as err:
        return (str(r[0]) if r[0] else f"entry {i}", str(err))


def _swapped(starts: array[int]) -> bytes:
    copy = array("q", starts)
    copy.byteswap()
    return copy.tobytes()


def _grouped(
    by_key: Mapping[Any, list[int]], firsts: Mapping[Any, tuple[int, Version]]
) -> dict[Version, tuple[int, ...]]:
    """Positions by version, as an eager parse groups them: each version text's positions under
    the Version of its first valid file, the versions in the order of those first files (equal
    versions share the first spelling's key), positions in page order."""
    groups: dict[Version, list[int]] = {}
    for _first, ver, key in sorted((f, v, k) for k, (f, v) in firsts.items()):
        groups.setdefault(ver, []).extend(by_key[key])
    return {v: tuple(sorted(ix)) for v, ix in groups.items()}


class ProjectPage:
    """The files of one project on one index, in page order; `rejected` lists malformed entries.

    A page parsed from an index keeps its files as compact entries and builds `IndexFile`s lazily:
    `versions()` groups the entries by version without building any, `files_of(version)` builds
    one version's files. `files` builds them all (page order).

    A JSON page is lazier still: its entries are validated only when a version is asked about.
    Such a page keeps either its entries as decoded (`raw`) or, the usual case, no entry at all:
    only where each entry starts in the page's text (`spans`) and a reader of that text (the
    cached page on disk, or the text in memory), with its versions grouped while it was parsed
    (the first valid file of each version validated there). `files_of` and `uploaded_after` read
    and validate that version's entries; `rejected`, `files`, `entries` and `len()` all of them.
    The verdict on each entry is the same as an eager parse's, so is every answer."""

    __slots__ = (
        "_after",
        "_all",
        "_bad",
        "_built",
        "_earliest",
        "_entries",
        "_files",
        "_groups",
        "_groups_lock",
        "_heads",
        "_newest",
        "_ok",
        "_raw",
        "_read",
        "_rejected",
        "_starts",
        "index",
        "name",
        "url",
    )

    def __init__(
        self,
        name: str,
        index: str,
        files: tuple[IndexFile, ...] = (),
        rejected: tuple[tuple[str, str], ...] = (),
        url: str = "",
        *,
        entries: list[Entry] | tuple[Entry, ...] | None = None,
        raw: list[RawEntry] | None = None,
        spans: Sequence[int] | None = None,
        read: SpanReader | None = None,
        groups: Mapping[Version, tuple[int, ...]] | None = None,
        bad: Mapping[int, tuple[str, str]] | None = None,
        earliest: Mapping[Version, str] | None = None,
    ) -> None:
        self.name = name  # canonical for a page of one project
        self.index = index
        self._rejected = tuple((a, b) for a, b in rejected)  # (filename or entry number, reason)
        self.url = url  # the page URL (no credentials): links resolve against it
        self._raw = raw
        # a page by spans: entry i is the JSON object at _starts[i] (len + 1 offsets) of the text
        self._starts: array[int] | None = None
        if spans is not None:
            assert read is not None and groups is not None
            self._starts = spans if isinstance(spans, array) else array("q", spans)
        self._read = read
        self._ok: dict[int, Entry] = {}  # raw position -> validated entry
        self._bad: dict[int, tuple[str, str]] = dict(bad or {})  # raw position -> (label, reason)
        self._entries = entries
        lazy = raw is not None or spans is not None
        self._files: tuple[IndexFile, ...] | None = tuple(files) if entries is None and not lazy else None
        self._built: dict[int, IndexFile] = {}
        self._all: tuple[IndexFile, ...] | None = None
        self._groups: dict[Version, tuple[int, ...]] | None = dict(groups) if groups is not None else None
        self._groups_lock = threading.Lock()  # the platforms of a lock ask for one page at once
        self._newest: tuple[Version, ...] | None = None
        # of a page by spans just parsed: each version's first valid file as (version text,
        # filename), until `take_span_form` takes them
        self._heads: dict[Version, tuple[str, str]] | None = None
        # of a page by spans: each version's earliest upload time to the second as written
        # ("2025-05-31T12:34:56"), "" when one of its entries has no such time (see uploaded_after)
        self._earliest: dict[Version, str] | None = dict(earliest) if earliest is not None else None
        self._after: dict[tuple[Version, datetime], bool] = {}  # the exclude-newer cut, once per page

    @property
    def raw(self) -> list[RawEntry] | None:
        """The unvalidated entries of a lazy JSON page kept as decoded (None otherwise)."""
        return self._raw

    @property
    def spans(self) -> array[int] | None:
        """Where each entry of a page by spans starts in its text, then where the last ends."""
        return self._starts

    def take_span_form(
        self,
    ) -> tuple[bytes, list[tuple[str, str, list[int], str]], list[tuple[int, str, str]]]:
        """What a page by spans keeps besides its text, in a form marshal stores: the offsets
        (little-endian 8-byte integers),
        the groups as (version text, filename of its first valid file, positions, earliest upload
        time), and the
        verdicts on the entries rejected while grouping; `from_span_form` makes the page again.
        Taken once, from a page just parsed (it then forgets the first files' names)."""
        assert self._starts is not None
        groups = self.versions()
        heads, self._heads = self._heads or {}, None
        earliest = self._earliest or {}
        out = []
        for ver, positions in groups.items():
            head = heads.get(ver)
            if head is None:
                first = next(i for i in positions if self._check(i) is not None)
                head = (self._ok[first][8], self._ok[first][0])
            out.append((head[0], head[1], list(positions), earliest.get(ver, "")))
        starts = self._starts.tobytes() if sys.byteorder == "little" else _swapped(self._starts)
        return starts, out, [(i, a, b) for i, (a, b) in sorted(self._bad.items())]

    @classmethod
    def from_span_form(
        cls,
        name: str,
        index: str,
        url: str,
        form: tuple[Any, Any, Any],
        read: SpanReader,
    ) -> ProjectPage:
        packed, groups, bad = form
        starts = array("q")
        starts.frombytes(packed)  # little-endian 8-byte offsets: no int object per entry
        if sys.byteorder != "little":
            starts.byteswap()
        by_version: dict[Version, tuple[int, ...]] = {}
        earliest: dict[Version, str] = {}
        for text, filename, positions, first_time in groups:
            ver = _version_of(str(text), str(filename))
            by_version[ver] = tuple(positions)
            earliest[ver] = str(first_time)
        return cls(
            name,
            index,
            url=url,
            spans=starts,
            read=read,
            groups=by_version,
            bad={int(i): (str(a), str(b)) for i, a, b in bad},
            earliest=earliest,
        )

    def use_reader(self, read: SpanReader) -> None:
        """Read the text of a page by spans with `read` from now on (the cached page on disk,
        in place of the text held in memory)."""
        assert self._starts is not None
        self._read = read

    def _count(self) -> int:
        if self._starts is not None:
            return len(self._starts) - 1
        if self._raw is not None:
            return len(self._raw)
        return len(self._entries) if self._entries is not None else len(self._files or ())

    def _raws(self, positions: Sequence[int]) -> list[RawEntry]:
        """The unvalidated entries at `positions` (sorted): read back from the text, nearby ones
        in one read."""
        if self._starts is None:
            assert self._raw is not None
            return [self._raw[i] for i in positions]
        starts = self._starts
        runs: list[tuple[int, int]] = []
        members: list[list[int]] = []
        for i in positions:
            if runs and starts[i] - runs[-1][1] <= _RUN_GAP:
                runs[-1] = (runs[-1][0], starts[i + 1])
                members[-1].append(i)
            else:
                runs.append((starts[i], starts[i + 1]))
                members.append([i])
        assert self._read is not None
        out: list[RawEntry] = []
        for (begin, _end), text, ix in zip(runs, self._read(runs), members, strict=True):
            for i in ix:
                try:
                    obj, _stop = _SCAN(text, starts[i] - begin)
                except (StopIteration, ValueError):
                    raise IndexError_(
                        f"the page for {self.name!r} on index {self.index!r} could not be read back "
                        f"(entry {i} is not the JSON it was)",
                        hint="the cache changed under this lock; run it again",
                    ) from None
                out.append(_raw_entry(obj))
        return out

    def _check_many(self, positions: Iterable[int]) -> None:
        """Validate the entries at `positions` not judged yet (a race judges one twice, to the
        same verdict: harmless)."""
        todo = sorted(i for i in positions if i not in self._ok and i not in self._bad)
        if not todo:
            return
        for i, r in zip(todo, self._raws(todo), strict=True):
            self._judge(i, r)

    def _judge(self, i: int, r: RawEntry) -> None:
        got = _judge_raw(self.name, self.url, r, i)
        if len(got) == 2:
            self._bad[i] = got
        else:
            self._ok[i] = got

    def _check(self, i: int) -> Entry | None:
        """The validated entry at raw position `i`; None when it is rejected."""
        hit = self._ok.get(i)
        if hit is not None or i in self._bad:
            return hit
        self._check_many((i,))
        return self._ok.get(i)

    def _lazy(self) -> bool:
        return self._raw is not None or self._starts is not None

    def _valid_positions(self) -> list[int]:
        if self._lazy():
            n = self._count()
            self._check_many(range(n))
            return [i for i in range(n) if i in self._ok]
        return list(range(self._count()))

    @property
    def rejected(self) -> tuple[tuple[str, str], ...]:
        if self._lazy():
            self._valid_positions()
            return tuple(self._bad[i] for i in sorted(self._bad))
        return self._rejected

    @property
    def entries(self) -> tuple[Entry, ...] | list[Entry] | None:
        """The compact entries (None for a page built from `IndexFile`s)."""
        if self._lazy():
            return [self._ok[i] for i in self._valid_positions()]
        return self._entries

    def __len__(self) -> int:
        return len(self._valid_positions())

    def _entry_at(self, i: int) -> Entry:
        if self._lazy():
            e = self._check(i)
            assert e is not None
            return e
        assert self._entries is not None
        return self._entries[i]

    def _file(self, i: int) -> IndexFile:
        if self._files is not None:
            return self._files[i]
        hit = self._built.get(i)
        if hit is None:
            hit = file_from_entry(self._entry_at(i), self.index)
            self._built[i] = hit  # a race builds an equal file twice: harmless
        return hit

    def _present(self, positions: Iterable[int]) -> list[int]:
        """The positions whose entries are valid (all of them on an eager page)."""
        if not self._lazy():
            return list(positions)
        positions = list(positions)
        self._check_many(positions)
        return [i for i in positions if i in self._ok]

    @property
    def files(self) -> tuple[IndexFile, ...]:
        if self._files is not None:
            return self._files
        if self._all is None:  # kept apart from `_files`: positions index the page, not this
            self._all = tuple(self._file(i) for i in self._valid_positions())
        return self._all

    def versions(self) -> dict[Version, tuple[int, ...]]:
        """Positions of the files of each version, in page order (equal versions share one key:
        the first spelling on the page). Grouped once, whichever platform asks first."""
        if self._groups is not None:
            return self._groups
        with self._groups_lock:
            if self._groups is None:
                self._groups = self._group()
            return self._groups

    def newest_first(self) -> tuple[Version, ...]:
        """The versions of `versions()`, newest first: sorted once, whichever platform asks first."""
        if self._newest is None:
            self._newest = tuple(sorted(self.versions(), reverse=True))  # a race sorts twice: harmless
        return self._newest

    def _group(self) -> dict[Version, tuple[int, ...]]:
        if self._raw is not None:
            by_key: dict[str | None, list[int]] = {}
            for i, r in enumerate(self._raw):
                by_key.setdefault(_version_key(r[0]) if r is not None else None, []).append(i)
            firsts: dict[str | None, tuple[int, Version]] = {}
            for key, positions in by_key.items():
                first = next((i for i in positions if self._check(i) is not None), None)
                if first is not None:
                    e = self._ok[first]
                    firsts[key] = (first, _version_of(e[8], e[0]))
            return _grouped(by_key, firsts)
        groups: dict[Version, list[int]] = {}
        if self._entries is not None:
            by_text: dict[str, Version] = {}
            for i, e in enumerate(self._entries):
                v = by_text.get(e[8])
                if v is None:
                    v = by_text[e[8]] = _version_of(e[8], e[0])
                groups.setdefault(v, []).append(i)
        else:
            for i, f in enumerate(self._files or ()):
                groups.setdefault(f.version, []).append(i)
        return {v: tuple(ix) for v, ix in groups.items()}

    def uploaded_after(self, version: Version, cutoff: datetime) -> bool:
        """Whether every file of `version` has an upload time later than `cutoff` (False when
        one has none), judged from the entries without building files where the text allows.
        Judged once per page: every platform of a lock shares the verdict."""
        key = (version, cutoff)
        hit = self._after.get(key)
        if hit is None:
            hit = self._after[key] = self._uploaded_after(version, cutoff)  # a race: same value
        return hit

    def _uploaded_after(self, version: Version, cutoff: datetime) -> bool:
        positions = self.versions().get(version, ())  # a version listed has a valid file
        if not positions:
            return False
        if not self._lazy() and self._entries is None:
            return all((t := self._file(i).upload_time) is not None and t > cutoff for i in positions)
        cut = cutoff.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        if self._earliest is not None and self._earliest.get(version, "") > cut:
            return True  # every entry's time as written is later by whole seconds: nothing to read
        unjudged: dict[int, RawEntry] = {}
        if self._lazy():
            todo = [i for i in positions if i not in self._ok and i not in self._bad]
            unjudged = dict(zip(todo, self._raws(todo), strict=True)) if todo else {}
        for i in positions:
            if i in unjudged:
                # judged on the text as written; an entry is validated only when its time would
                # decide the answer (a rejected entry does not count)
                r = unjudged[i]
                text = r[5] if r is not None else None
                if isinstance(text, str) and _later_by_text(text, cut):
                    continue
                self._judge(i, r)
            if self._lazy():
                e = self._ok.get(i)
                if e is None:
                    continue
            else:
                e = self._entry_at(i)
            text = e[5]
            if text is None:
                return False
            if _later_by_text(text, cut):
                continue
            if not _parse_time(text) > cutoff:
                return False
        return True

    def files_of(self, version: Version) -> tuple[IndexFile, ...]:
        return tuple(self._file(i) for i in self._present(self.versions().get(version, ())))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProjectPage):
            return NotImplemented
        return (self.name, self.index, self.files, self.rejected, self.url) == (
            other.name,
            other.index,
            other.files,
            other.rejected,
            other.url,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ProjectPage(name={self.name!r}, index={self.index!r}, files={len(self)}, url={self.url!r})"


@dataclass(frozen=True)
class NotFound:
    """The index has no page for this project."""

    name: str
    index: str
    reason: str


@dataclass(frozen=True)
class IndexSource:
    """A named index. `url` may hold ${VAR} placeholders; they are expanded only in memory."""

    name: str
    url: str
    format: Literal["simple", "find-links"] = "simple"
    optional: bool = False  # `optional = true`: a lock goes on without it when it is unreachable


@dataclass(frozen=True)
class CoreMetadata:
    """The parts of a distribution's core metadata the resolver needs."""

    name: str
    version: Version
    requires_dist: tuple[Requirement, ...]
    requires_python: SpecifierSet | None
    provides_extra: frozenset[str]
    raw: bytes = field(default=b"", repr=False, compare=False)


class MetadataError(IndexError_):
    """A distribution's core metadata is missing, malformed, or does not match its file."""


class IndexUnreachable(IndexError_):
    """An index gave no answer: connection refused, DNS, a timeout, a proxy or a certificate that
    did not let the request through (not an answer it gave, such as a 500 or a malformed page)."""


# --- pages -------------------------------------------------------------------------------------------


def _parse_time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"upload-time {value!r} is not a string")
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    # Python 3.10's fromisoformat wants 0, 3 or 6 fractional digits
    m = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if m and m.group(2):
        frac = (m.group(2)[1:] + "000000")[:6]
        text = f"{m.group(1)}.{frac}{m.group(3)}"
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"upload-time {value!r} is not an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


def _check_hashes(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValueError(f"hashes {value!r} is not a mapping")
    out: dict[str, str] = {}
    for algo, digest in value.items():
        if not isinstance(algo, str) or not isinstance(digest, str):
            raise ValueError(f"hash {algo!r}={digest!r} is not text")
        algo = algo.lower()
        want = _HASH_LENGTHS.get(algo)
        if not _HEX.match(digest) or (want is not None and len(digest) != want):
            raise ValueError(f"{algo} hash {digest!r} is not {want or 'a'} hex digits")
        out[algo] = digest.lower()
    return out


@functools.lru_cache(maxsize=4096)
def _valid_specifier(text: str) -> bool:
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return False
    return True


def _check_requires_python(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"requires-python {value!r} is not text")
    text = value.strip()
    if not text:
        return None
    if not _valid_specifier(text):
        raise ValueError(f"requires-python {value!r} is not a valid specifier")
    return text


def _check_yanked(value: Any) -> str | None:
    if value is None or value is False:
        return None
    if value is True:
        return ""
    if isinstance(value, str):
        return value
    raise ValueError(f"yanked {value!r} is neither a boolean nor a reason")


def _check_core_metadata(value: Any) -> Mapping[str, str] | bool | None:
    if value is None or value is False:
        return None
    if value is True:
        return True
    if isinstance(value, Mapping):
        return _check_hashes(value) or True
    raise ValueError(f"core-metadata {value!r} is neither a boolean nor hashes")


# An absolute http(s) URL that urljoin/urldefrag leave as it is: no fragment, query, params,
# user-info or whitespace (the usual case on an index page; anything else takes the long way).
_PLAIN_URL = re.compile(r"^https?://[^/?#;@\s]+/[^?#;\s]*\Z")
# Upload times as indexes write them ("2025-05-31T12:34:56.123456Z"), checked without the regex.
_PLAIN_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z\Z")


def _check_link_scheme(page_url: str, absolute: str, written: str) -> None:
    """A link on an http(s) page stays on http(s) (no file://: a page must not make the client
    read local files), and an https page does not send the client to plain http."""
    page = page_url[: page_url.find(":")].lower()
    if page not in ("http", "https"):
        return
    link = absolute[: absolute.find(":")].lower()
    if link not in ("http", "https"):
        raise ValueError(
            f"url {written!r} leaves the index: a page served over {page} may link only to http(s) files"
        )
    if page == "https" and link == "http":
        raise ValueError(f"url {written!r} downgrades an https index to plain http")


def _version_text(filename: str) -> str:
    """The version part of a valid distribution filename, as written."""
    if filename.endswith(".whl"):
        return filename.split("-", 2)[1]
    stem = filename[: -len(".tar.gz")] if filename.endswith(".tar.gz") else filename[: -len(".zip")]
    return stem.rpartition("-")[2]


def _check_filename(filename: Any, canon_project: str) -> None:
    """Raise ValueError unless `filename` is a file name (no path) of a distribution of `canon_project`."""
    if not isinstance(filename, str) or not filename:
        raise ValueError(f"filename {filename!r} is not text")
    if "/" in filename or "\\" in filename:
        raise ValueError(f"filename {filename!r} contains a path separator")
    name, _version, _tags = parse_filename(filename)
    if name != canon_project:
        raise ValueError(f"file {filename!r} belongs to {name!r}, not {canon_project!r}")


def _entry(
    canon_project: str,
    page_url: str,
    *,
    filename: Any,
    url: Any,
    hashes: Any,
    requires_python: Any = None,
    yanked: Any = None,
    upload_time: Any = None,
    size: Any = None,
    core_metadata: Any = None,
) -> Entry:
    """One page entry, validated; raises ValueError naming the first bad field."""
    _check_filename(filename, canon_project)
    if not isinstance(url, str) or not url:
        raise ValueError(f"url {url!r} is not text")
    if _PLAIN_URL.match(url):
        absolute, fragment = url, ""
    else:
        absolute, fragment = urldefrag(urljoin(page_url, url))
        if urlsplit(absolute).scheme not in ("http", "https", "file"):
            raise ValueError(f"url {url!r} has an unsupported scheme")
        absolute = strip_userinfo(absolute)
    _check_link_scheme(page_url, absolute, url)
    hashes = _check_hashes(hashes)
    if fragment:
        algo, _, digest = fragment.partition("=")
        if algo.lower() in _HASH_LENGTHS and not hashes:
            hashes = _check_hashes({algo: digest})
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ValueError(f"size {size!r} is not a non-negative integer")
    rp = _check_requires_python(requires_python)
    yk = _check_yanked(yanked)
    if upload_time is not None and not (isinstance(upload_time, str) and _PLAIN_TIME.match(upload_time)):
        _parse_time(upload_time)  # raises ValueError when unusable
    return (
        filename,
        absolute,
        hashes,
        rp,
        yk,
        upload_time,
        size,
        _check_core_metadata(core_metadata),
        _version_text(filename),
    )


_WS = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json.loads skips it
_WS_CHARS = frozenset(" \t\n\r")


def _skip(text: str, i: int) -> int:
    """The position after the whitespace at `i`."""
    if text[i : i + 1] not in _WS_CHARS:
        return i
    m = _WS.match(text, i)
    assert m is not None  # matches the empty text too
    return m.end()


def _walk_json_page(text: str, files: Callable[[int], int]) -> Any:
    """Walk a JSON page as json.loads reads it, handing the position of the last "files" array's
    first element to `files` (which returns where the array's text ends), the other values
    decoded; the "meta" value, or raises ValueError where json.loads would not give an object
    with a "files" list (the caller then lets json.loads say why)."""
    ws = _skip
    meta: Any = None
    found = False
    i = ws(text, 0)
    if text[i : i + 1] != "{":
        raise ValueError("not an object")
    i = ws(text, i + 1)
    if text[i : i + 1] == "}":
        raise ValueError("no files")
    while True:
        if text[i : i + 1] != '"':
            raise ValueError("not a key")
        key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        i = ws(text, i)
        if text[i : i + 1] != ":":
            raise ValueError("no colon")
        i = ws(text, i + 1)
        if key == "files" and text[i : i + 1] == "[":
            i = files(ws(text, i + 1))
            found = True
        else:
            try:
                value, i = _SCAN(text, i)
            except StopIteration:
                raise ValueError("not a value") from None
            if key == "files":
                found = False  # the last "files" counts, as with json.loads
            elif key == "meta":
                meta = value
        i = ws(text, i)
        c = text[i : i + 1]
        if c == ",":
            i = ws(text, i + 1)
            continue
        if c == "}":
            break
        raise ValueError("no comma")
    if ws(text, i + 1) != len(text) or not found:
        raise ValueError("trailing text or no files")
    return meta


def _check_api(meta: Any, index: str) -> None:
    api = str(meta.get("api-version", "1.0")) if isinstance(meta, dict) else "1.0"
    if api.split(".")[0] != "1":
        raise IndexError_(
            f"index {index!r} speaks simple API version {api}, which kernodeck does not know",
            hint="only version 1.x of the simple repository API (PEP 691) is supported",
        )


def _json_page_by_spans(body: bytes, *, canon: str, index: str, page_url: str) -> ProjectPage | None:
    """A JSON page kept as where its entries start (see `ProjectPage`), its versions grouped as
    it is walked; None when the page is not plain ASCII JSON with a "files" list (json.loads
    then reads it whole)."""
    if not body.isascii() or json.detect_encoding(body) != "utf-8":
        return None
    text = body.decode("ascii")
    ws = _skip
    state: dict[str, Any] = {}

    def files(i: int) -> int:
        # nothing kept per entry but its start and its version text's number, in arrays: the
        # page's objects are made after the walk, not between the walk's passing ones
        starts = array("q")
        kinds = array("l")
        key_ids: dict[str | None, int] = {}
        firsts: dict[int, tuple[int, Version, str, str]] = {}  # key id -> the first valid file's
        earliest: dict[int, str] = {}  # key id -> its earliest plain upload time, "" when one is not
        bad: dict[int, tuple[str, str]] = {}
        # the loop below runs once per file of the page (tens of thousands): names bound locally
        plain_time, scan, version_key = _PLAIN_TIME.match, _SCAN, _version_key
        add_start, add_kind, id_of = starts.append, kinds.append, key_ids.get
        if text[i : i + 1] != "]":
            n = 0
            while True:
                try:
                    obj, end = scan(text, i)
                except StopIteration:
                    raise ValueError("not a value") from None
                add_start(i)
                if type(obj) is dict:
                    key = version_key(obj.get("filename"))
                    t = obj.get("upload-time")
                    t = t[:19] if type(t) is str and plain_time(t) else ""
                else:
                    key, t = None, ""
                kid = id_of(key)
                if kid is None:
                    kid = key_ids[key] = len(key_ids)
                    earliest[kid] = t
                elif t < earliest[kid]:
                    earliest[kid] = t
                add_kind(kid)
                if kid not in firsts:  # the version's first valid file proves it exists
                    got = _judge_raw(canon, page_url, _raw_entry(obj), n)
                    if len(got) == 2:
                        bad[n] = got
                    else:
                        firsts[kid] = (n, _version_of(got[8], got[0]), got[8], got[0])
                n += 1
                if text.startswith(", {", end):  # the next entry, as indexes write it
                    i = end + 2
                    continue
                c = text[end : end + 1]
                if c in _WS_CHARS:
                    end = ws(text, end)
                    c = text[end : end + 1]
                if c == ",":
                    i = end + 1
                    if text[i : i + 1] in _WS_CHARS:
                        # one space, as indexes write it (", "), else whatever whitespace
                        i = i + 1 if text[i] == " " and text[i + 1 : i + 2] not in _WS_CHARS else ws(text, i)
                    continue
                if c == "]":
                    starts.append(end)
                    i = end
                    break
                raise ValueError("no comma")
        else:
            starts.append(i)
        by_key: dict[int, list[int]] = {kid: [] for kid in firsts}
        for n, kid in enumerate(kinds):
            positions = by_key.get(kid)
            if positions is not None:
                positions.append(n)
        groups = _grouped(by_key, {k: (f[0], f[1]) for k, f in firsts.items()})
        heads: dict[Version, tuple[str, str]] = {}
        times: dict[Version, str] = {}
        for kid, (_first, ver, text_, filename) in sorted(firsts.items(), key=lambda f: f[1][0]):
            heads.setdefault(ver, (text_, filename))
            times[ver] = min(times.get(ver, earliest[kid]), earliest[kid])
        state["page"] = (starts, groups, bad, heads, times)
        return i + 1

    try:
        meta = _walk_json_page(text, files)
    except (ValueError, IndexError):
        return None
    _check_api(meta, index)
    starts, groups, bad, heads, times = state["page"]

    def read(runs: Sequence[tuple[int, int]]) -> list[str]:
        return [text[a:b] for a, b in runs]

    page = ProjectPage(
        canon, index, url=page_url, spans=starts, read=read, groups=groups, bad=bad, earliest=times
    )
    page._heads = heads
    return page


def parse_json_page(body: bytes, *, project: str, index: str, page_url: str) -> ProjectPage:
    """A PEP 691 JSON project page. Raises IndexError_ only when the page itself is unusable.

    The usual page (ASCII JSON) is kept by spans over its text (see `ProjectPage`); any other
    is decoded whole and kept as its raw entries."""
    canon = str(canonicalize_name(project))
    by_spans = _json_page_by_spans(body, canon=canon, index=index, page_url=page_url)
    if by_spans is not None:
        return by_spans
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise IndexError_(
            f"the page for {project!r} on index {index!r} is not valid JSON", context=[str(e)]
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise IndexError_(f"the page for {project!r} on index {index!r} has no 'files' list")
    _check_api(doc.get("meta"), index)
    raw: list[RawEntry] = [_raw_entry(entry) for entry in doc["files"]]
    # validated lazily, one version at a time, as the resolver asks (see ProjectPage)
    return ProjectPage(name=canon, index=index, url=page_url, raw=raw)


@functools.cache
def _anchors_class() -> Any:
    """The parser of an HTML page's anchors and first `<base href>`; html.parser is imported with
    the first HTML page (a JSON index never needs it)."""
    from html.parser import HTMLParser

    class Anchors(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.anchors: list[dict[str, str | None]] = []
            self.base: str | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                self.anchors.append(dict(attrs))
            elif tag == "base" and self.base is None:
                self.base = dict(attrs).get("href")

    return Anchors


def _html_core_metadata(value: str | None) -> Any:
    if value is None:
        return None
    v = value.strip()
    if v.lower() == "true":
        return True
    if v.lower() == "false" or not v:
        return None
    if "=" in v:
        algo, _, digest = v.partition("=")
        return {algo: digest}
    raise ValueError(f"data-core-metadata {value!r} is neither 'true' nor '<hash>=<digest>'")


def parse_html_page(body: bytes, *, project: str | None, index: str, page_url: str) -> ProjectPage:
    """A PEP 503 HTML page. With `project=None` (a find-links page) keep files of every project."""
    parser = _anchors_class()()
    parser.feed(body.decode("utf-8", errors="replace"))
    base = urljoin(page_url, parser.base) if parser.base else page_url
    entries: list[Entry] = []
    rejected: list[tuple[str, str]] = []
    for i, a in enumerate(parser.anchors):
        href = a.get("href")
        if not href:
            continue
        path = urlsplit(urldefrag(href)[0]).path
        filename = unquote(path.rsplit("/", 1)[-1])
        label = filename or f"link {i}"
        try:
            proj = project
            if proj is None:
                try:
                    proj = parse_filename(filename)[0]
                except ValueError:
                    continue  # find-links pages list anything; only distributions count
            cm = a.get("data-core-metadata", a.get("data-dist-info-metadata"))
            entries.append(
                _entry(
                    str(canonicalize_name(proj)),
                    base,
                    filename=filename,
                    url=href,
                    hashes={},
                    requires_python=a.get("data-requires-python"),
                    yanked=(a.get("data-yanked") or "") if "data-yanked" in a else None,
                    core_metadata=_html_core_metadata(cm),
                )
            )
        except ValueError as e:
            rejected.append((label, str(e)))
    name = str(canonicalize_name(project)) if project else ""
    return ProjectPage(name=name, index=index, rejected=tuple(rejected), url=page_url, entries=entries)
