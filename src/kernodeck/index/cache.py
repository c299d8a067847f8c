"""The on-disk index cache: project pages (revalidated or with a time-to-live) and immutable metadata.

Layout under the cache root (`KERNODECK_CACHE_DIR`, else `platformdirs.user_cache_dir("kernodeck")`)::

    index-v3/pages/<key[:1]>/<key>.json          one project page: a JSON line (url, validators,
                                                fetched-at), then the body as received
    index-v3/pages/<key[:1]>/<key>.pyXY.parsed   the same page parsed (marshal): validated compact
                                                entries, or a JSON page's raw ones (validated when read)
    index-v3/metadata/<key[:1]>/<key>             core metadata of one file as one index serves it
    index-v3/lock-records/<key[:1]>/<key>.json    a finished lock, replayable while its pages stand
    index-v3/locks.slots                          the named locks: one byte of it per page or file

One folder level of 16 keeps the files a cold lock creates few (each new file or folder is a new
inode, a cost of the system's, not Kernodeck's); with 256 per kind a cold lock of 50 projects
made 332 folders, and their mkdir took 4 % of its CPU on an ext4 disk.

Every entry starts with a one-line seal, `KDC2 sha256:<digest of the rest>`, written with it. An
entry whose content does not match its seal (truncated, edited, half-copied) is deleted and
reported as `CorruptEntry`: online the client fetches it again, offline the error names it. A
damaged entry is never used.

Metadata is keyed by what vouches for it, never by the artifact hash alone (an index may claim any
artifact hash): the index it came from (its URL as written, `${VAR}` placeholders unexpanded), the
file's URL and artifact hash, and the PEP 658 metadata hash the page declared (checked again against
the content on every read). So metadata read from one index can never answer for another.

Keys and contents hold URLs only in their public form (user-info removed, expanded placeholder
values replaced by their `${NAME}`, see `kernodeck.support.urls`): nothing secret reaches the disk.

The parsed form lets a warm lock skip decoding and validating big pages (tens of thousands of
files); it records the size and mtime of the .json it was made from and is ignored when that file
changed or is gone, so the .json stays the single source of truth. For a JSON page it holds only
where each file entry starts in the body and the versions grouped (see `models.ProjectPage`):
the entries a lock asks about are read back from the .json (`PageBody`): the same file (seal
line, URL, body length), and each 64 KiB block of the body read checked against the CRC-32 kept
for it when the page was parsed (a block that fails is damage: the file is discarded); a lock
keeps no page body in memory and checks only what it reads. Metadata never changes for a
given artifact hash, so it is written once and read forever. Writes go
to a unique temporary file and are renamed into place, so two processes (or threads) sharing the
cache never see half a file; `lock()` serialises fetching the same page across processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import sys
import threading
import time
import zlib
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from kernodeck.errors import IndexError_
from kernodeck.support.filelocks import held_slot
from kernodeck.support.fsio import atomic_write_bytes
from kernodeck.support.urls import redact

_LAYOUT = "index-v3"  # v3: 16 shard folders per kind (v2 had 256), named locks in one file
_SEAL = b"KDC2 sha256:"
_SEAL_LEN = len(_SEAL) + 64 + 1  # the seal line, newline included
DEFAULT_PAGE_TTL = 600.0  # seconds a cached page without validators answers without the network
# 2: + whether the entries are a JSON page's raw ones; 4: JSON pages by spans; 5: a CRC per block
_PARSED_FORMAT = 5
_SLOTS = "locks.slots"  # the named locks (`IndexCache.lock`), one byte each
_BLOCK = 64 * 1024  # a cached page's body is checked in blocks of this many bytes as it is read
_PARSED_SUFFIX = f".py{sys.version_info[0]}{sys.version_info[1]}.parsed"  # marshal is per version


def page_is_fresh(
    fetched_at: float,
    etag: str | None,
    last_modified: str | None,
    *,
    exclude_newer: datetime | None,
    ttl: float,
    now: float | None = None,
) -> bool:
    """Whether a cached page may answer without the network: fetched after exclude-newer (it
    already lists every file a lock may use), else not revalidatable and younger than `ttl`."""
    if exclude_newer is not None and fetched_at > exclude_newer.timestamp():
        return True
    if etag or last_modified:
        return False  # revalidate
    return ((time.time() if now is None else now) - fetched_at) < ttl


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class CorruptEntry(Exception):
    """A cache entry failed its check; it has been deleted. `path` names it, `reason` says how."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def seal(content: bytes) -> bytes:
    """`content` with its seal line in front (see the module docstring)."""
    return seal_line(content) + content


def seal_line(content: bytes) -> bytes:
    """The seal line of `content` (see the module docstring), newline included."""
    return _SEAL + hashlib.sha256(content).hexdigest().encode() + b"\n"


def unseal(data: bytes) -> bytes:
    """The content of sealed `data`; ValueError when the seal is missing or does not match."""
    if not data.startswith(_SEAL) or len(data) < _SEAL_LEN or data[_SEAL_LEN - 1 : _SEAL_LEN] != b"\n":
        raise ValueError("no checksum line")
    want = data[len(_SEAL) : _SEAL_LEN - 1].decode("ascii", errors="replace")
    content = data[_SEAL_LEN:]
    if hashlib.sha256(content).hexdigest() != want:
        raise ValueError("content does not match its checksum")
    return content


def _discard(path: Path, reason: str) -> CorruptEntry:
    with contextlib.suppress(OSError):
        path.unlink()
    return CorruptEntry(path, reason)


def read_sealed(path: Path) -> bytes | None:
    """The checked content of the entry at `path`; None when there is none; CorruptEntry (after
    deleting it) when it fails its check."""
    found = _read_sealed(path)
    return None if found is None else found[1]


def _read_sealed(path: Path) -> tuple[bytes, bytes] | None:
    """(seal line, checked content) of the entry at `path` (see `read_sealed`)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _discard(path, f"unreadable ({e.strerror})") from None
    try:
        return data[:_SEAL_LEN], unseal(data)
    except ValueError as e:
        raise _discard(path, str(e)) from None


def _body_at_end(content: bytes, body: bytes) -> bool:
    """Whether `content` (a cached page's) holds `body` as received, after its head line."""
    return bool(body) and content.find(b"\n") + 1 == len(content) - len(body)


def write_sealed(path: Path, content: bytes) -> bytes:
    """Write `content` sealed; the seal line written."""
    line = seal_line(content)
    atomic_write_bytes(path, line + content, fsync=False)
    return line


@dataclass(frozen=True)
class CachedPage:
    url: str
    body: bytes
    content_type: str
    fetched_at: float  # epoch seconds
    etag: str | None = None
    last_modified: str | None = None
    base: str | None = None  # the final URL after redirects, when it differs from `url`
    not_found: bool = False  # the index answered 404/410: remembered like a page
    # the seal line of the cache file that holds this page with its body as received after the
    # head line (see `to_json`); empty when no such file is known
    seal: bytes = field(default=b"", compare=False, repr=False)

    def to_json(self) -> bytes:
        """One JSON line of everything but the body, then the body as received: the body is
        stored without re-encoding (a large page is not escaped into a JSON string)."""
        head = json.dumps(
            {
                "url": self.url,
                "content_type": self.content_type,
                "fetched_at": self.fetched_at,
                "etag": self.etag,
                "last_modified": self.last_modified,
                "base": self.base,
                "not_found": self.not_found,
            }
        ).encode("utf-8", errors="surrogateescape")
        return head + b"\n" + self.body

    @classmethod
    def from_json(cls, data: bytes) -> CachedPage:
        """The page from `to_json`'s form, or from the older one (one JSON object, body in it)."""
        line, _, rest = data.partition(b"\n")
        d: dict[str, Any] = json.loads(line)
        # the older form is one line (json.dumps escapes newlines) with the body in it
        body = str(d["body"]).encode("utf-8", errors="surrogateescape") if "body" in d else rest
        return cls(
            url=str(d["url"]),
            body=body,
            content_type=str(d["content_type"]),
            fetched_at=float(d["fetched_at"]),
            etag=d.get("etag"),
            last_modified=d.get("last_modified"),
            base=d.get("base"),
            not_found=bool(d.get("not_found", False)),
        )


class PageBody:
    """Parts of a cached page's body read back from its cache file (a `models.SpanReader`), so a
    lock keeps no page body in memory. The body's CRC-32 is kept per block of `_BLOCK` bytes
    (`block_crcs`); a read checks the seal line, the head's URL and the body's length (the same
    file), then the CRC of every block it reads that is not checked yet, unless the body was just
    written by this process. A block that does not match is damage: the file is discarded. When
    the file was rewritten since (another run revalidated the page: another seal line), it is used
    only when its body has the same length and the blocks read the same CRCs as the one parsed.
    Otherwise (or gone) the read is an IndexError_ and the lock is run again. A lock reads a few
    versions of a page of thousands of files: it no longer hashes the whole file for them."""

    def __init__(
        self, path: Path, url: str, seal: bytes, length: int, block_crcs: bytes, *, checked: bool = True
    ) -> None:
        self._path = path
        self._url = url
        self._seal = seal
        self._length = length
        self._block_crcs = block_crcs  # as `block_crcs` gives them (kept in the parsed form)
        self._crcs = array("I")
        self._crcs.frombytes(block_crcs)
        if sys.byteorder != "little":
            self._crcs.byteswap()
        # the blocks known to hold the body parsed (all of them for a body this process wrote),
        # in the file whose seal line is `_seal`
        self._good: set[int] | None = None if checked else set()

    @staticmethod
    def block_crcs(body: bytes) -> bytes:
        """The CRC-32 of each `_BLOCK` bytes of `body`, little-endian 4-byte integers."""
        view = memoryview(body)
        crcs = array("I", (zlib.crc32(view[i : i + _BLOCK]) for i in range(0, len(body), _BLOCK)))
        if sys.byteorder != "little":
            crcs.byteswap()
        return crcs.tobytes()

    @property
    def form(self) -> tuple[bytes, int, bytes]:
        """(seal line, length, block CRCs): what `IndexCache.put_parsed` keeps of it."""
        return self._seal, self._length, self._block_crcs

    def __call__(self, runs: Sequence[tuple[int, int]]) -> list[str]:
        got = None
        with contextlib.suppress(OSError, UnicodeDecodeError), open(self._path, "rb") as f:
            got = self._read(f, runs)
        if got is None:
            raise IndexError_(
                f"the cached page {redact(self._url)} changed or went away while this lock read it",
                context=[f"cache entry: {self._path}"],
                hint="another kernodeck run may have refreshed the cache meanwhile; run the lock again",
            )
        return got

    def _read(self, f: Any, runs: Sequence[tuple[int, int]]) -> list[str] | None:
        line = f.read(_SEAL_LEN)
        head = f.readline()
        base = len(line) + len(head)
        if os.fstat(f.fileno()).st_size - base != self._length:
            return None
        same_file = line == self._seal
        good = self._good
        if not same_file:
            if not self._same_page(head):
                return None
            good = set()  # another file: every block read is checked against the body parsed
        out: list[str] = []
        for a, b in runs:
            if good is not None:
                first, last = a // _BLOCK, (b - 1) // _BLOCK if b > a else a // _BLOCK
                todo = [k for k in range(first, last + 1) if k not in good]
                if todo and not self._check_blocks(f, base, todo, good, same_file):
                    return None
            f.seek(base + a)
            data = f.read(b - a)
            if len(data) != b - a:
                return None
            out.append(data.decode("ascii"))
        if not same_file and good is not None:
            self._seal, self._good = line, good  # a race sets equal values
        return out

    def _same_page(self, head: bytes) -> bool:
        try:
            return bool(head.endswith(b"\n") and json.loads(head).get("url") == self._url)
        except (ValueError, AttributeError):
            return False

    def _check_blocks(self, f: Any, base: int, blocks: list[int], good: set[int], same_file: bool) -> bool:
        """Whether `blocks` of the body hold what was parsed; `good` gains them. Damage in the
        file that was parsed (the same seal line) discards it."""
        for k in blocks:
            if k >= len(self._crcs):
                return False
            f.seek(base + k * _BLOCK)
            if zlib.crc32(f.read(min(_BLOCK, self._length - k * _BLOCK))) != self._crcs[k]:
                if same_file:
                    _discard(self._path, f"block {k} of the body does not match the page parsed")
                return False
            good.add(k)
        return True


@dataclass(frozen=True)
class ParsedPage:
    """A cached page without its body, and its validated entries (see `kernodeck.index.models`)."""

    head: CachedPage  # body is empty
    entries: list[Any]
    rejected: list[tuple[str, str]]
    fingerprint: tuple[int, int]  # of the .json it was parsed from
    raw: bool = False  # entries are a JSON page's unvalidated ones (`models.RawEntry`)
    # a JSON page by spans: `models.ProjectPage.take_span_form()` (then `entries` is empty) and the
    # reader of its body from the .json
    spans: tuple[Any, Any, Any] | None = None
    body: PageBody | None = None


class IndexCache:
    """Pages and metadata on disk. `root=None` disables the disk cache (memory only, in the client)."""

    def __init__(self, root: Path | None) -> None:
        self.root = (root / _LAYOUT) if root is not None else None
        self._thread_locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        # the first write this cache could not make (another user's cache, a read-only or full
        # disk): the run goes on without keeping what it fetched, and says so once
        self.refused: OSError | None = None

    def _store(self, path: Path, content: bytes) -> bytes | None:
        """Write a sealed entry; its seal line, or None when the cache cannot be written."""
        try:
            return write_sealed(path, content)
        except OSError as e:
            if self.refused is None:
                self.refused = e
            return None

    @property
    def enabled(self) -> bool:
        return self.root is not None

    # -- pages ---------------------------------------------------------------------------------------

    def page_path(self, url: str) -> Path | None:
        if self.root is None:
            return None
        k = _key("page", url)
        return self.root / "pages" / k[:1] / f"{k}.json"

    def get_page(self, url: str) -> CachedPage | None:
        """The cached page of `url` (public form); CorruptEntry when it fails its check."""
        path = self.page_path(url)
        if path is None:
            return None
        found = _read_sealed(path)
        if found is None:
            return None
        line, data = found
        try:
            page = CachedPage.from_json(data)
        except (ValueError, KeyError, TypeError) as e:
            raise _discard(path, f"not a cached page ({type(e).__name__})") from None
        if page.url != url:
            raise _discard(path, "holds the page of another url")
        if _body_at_end(data, page.body):
            page = replace(page, seal=line)  # the body as received: readable in place
        return page

    def put_page(self, page: CachedPage) -> CachedPage:
        """Store `page`; the page with the seal line of its cache file (unchanged without a disk
        cache)."""
        path = self.page_path(page.url)
        if path is None:
            return page
        seal = self._store(path, page.to_json())
        return page if seal is None else replace(page, seal=seal)

    def body_reader(self, page: CachedPage) -> PageBody | None:
        """A reader of parts of `page`'s body from its cache file (see `PageBody`); None when
        there is none to read from."""
        path = self.page_path(page.url)
        if path is None or not page.seal or not page.body.isascii():
            return None
        return PageBody(path, page.url, page.seal, len(page.body), PageBody.block_crcs(page.body))

    def fingerprint(self, url: str) -> tuple[int, int] | None:
        """(size, mtime) of the cached page of `url`; None when there is none."""
        return self._fingerprint(url)

    def _fingerprint(self, url: str) -> tuple[int, int] | None:
        path = self.page_path(url)
        if path is None:
            return None
        try:
            st = path.stat()
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)

    def get_parsed(self, url: str) -> ParsedPage | None:
        """The parsed form of the cached page of `url`, when it matches the page on disk."""
        path = self.page_path(url)
        if path is None:
            return None
        parsed_path = path.with_name(path.stem + _PARSED_SUFFIX)
        try:
            data = read_sealed(parsed_path)
        except CorruptEntry:
            return None  # made again from the page
        if data is None:
            return None
        try:
            doc = marshal.loads(data)
            fmt, fp, head, entries, rejected, raw, spans = doc
            if fmt != _PARSED_FORMAT or tuple(fp) != self._fingerprint(url):
                return None
            url_, ctype, fetched_at, etag, last_modified, base, not_found = head
            if url_ != url:
                return None
            page = CachedPage(
                url=url_,
                body=b"",
                content_type=ctype,
                fetched_at=float(fetched_at),
                etag=etag,
                last_modified=last_modified,
                base=base,
                not_found=bool(not_found),
            )
            body = None
            if spans is not None:
                form, (seal_, length, crcs) = spans
                starts, groups, bad = form
                if not isinstance(starts, bytes) or len(starts) % 8 or not len(starts):
                    return None
                if not isinstance(crcs, bytes) or len(crcs) != 4 * -(-int(length) // _BLOCK):
                    return None
                spans = (starts, list(groups), list(bad))
                body = PageBody(path, url, bytes(seal_), int(length), crcs, checked=False)
            return ParsedPage(
                page,
                list(entries),
                [(str(a), str(b)) for a, b in rejected],
                (int(fp[0]), int(fp[1])),
                raw=bool(raw),
                spans=spans,
                body=body,
            )
        except (OSError, ValueError, EOFError, TypeError):
            return None

    def put_parsed(
        self,
        page: CachedPage,
        entries: Any,
        rejected: Any,
        *,
        raw: bool = False,
        spans: tuple[Any, Any, Any] | None = None,
        body: PageBody | None = None,
    ) -> tuple[int, int] | None:
        """Store the parsed form of `page` (already written with `put_page`); its fingerprint.
        `raw`: the entries are a JSON page's unvalidated ones (validated again when read).
        `spans`: a JSON page by spans (`models.ProjectPage.take_span_form()`), read back by `body`."""
        path = self.page_path(page.url)
        fp = self._fingerprint(page.url)
        if path is None or fp is None:
            return fp
        if (spans is None) != (body is None):
            return fp  # the .json alone serves
        head = (
            page.url,
            page.content_type,
            page.fetched_at,
            page.etag,
            page.last_modified,
            page.base,
            page.not_found,
        )
        try:
            extra = None if spans is None or body is None else (spans, body.form)
            data = marshal.dumps(
                (_PARSED_FORMAT, fp, head, list(entries), [tuple(r) for r in rejected], raw, extra)
            )
        except ValueError:
            return fp  # something marshal cannot store: the .json alone serves
        self._store(path.with_name(path.stem + _PARSED_SUFFIX), data)
        return fp

    # -- finished locks ------------------------------------------------------------------------------

    def _lock_path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / "lock-records" / key[:1] / f"{key}.json"

    def get_lock_record(self, key: str) -> dict[str, Any] | None:
        path = self._lock_path(key)
        if path is None:
            return None
        try:
            data = read_sealed(path)
            doc = json.loads(data) if data is not None else None
        except (CorruptEntry, ValueError):
            with contextlib.suppress(OSError):
                path.unlink()
            return None  # the lock is resolved again
        return doc if isinstance(doc, dict) else None

    def put_lock_record(self, key: str, record: dict[str, Any]) -> None:
        path = self._lock_path(key)
        if path is not None:
            self._store(path, json.dumps(record, sort_keys=True).encode("utf-8"))

    # -- metadata ------------------------------------------------------------------------------------

    @staticmethod
    def metadata_key(index_url: str, file_url: str, sha256: str | None, metadata_sha256: str | None) -> str:
        """The key of one file's metadata as one index serves it (see the module docstring); all
        URLs in their public form."""
        return _key("metadata", index_url, file_url, sha256 or "", metadata_sha256 or "")

    def metadata_path(self, key: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / "metadata" / key[:1] / key

    def get_metadata(self, key: str, metadata_sha256: str | None = None) -> bytes | None:
        """The cached metadata under `key`; when the index declared its hash, the content must
        have it. CorruptEntry (after deleting it) when it fails either check."""
        path = self.metadata_path(key)
        if path is None:
            return None
        found = _read_sealed(path)
        if found is None:
            return None
        line, data = found
        # the seal holds the content's sha256, checked as it was read: no second hashing
        if (
            metadata_sha256 is not None
            and line[len(_SEAL) : _SEAL_LEN - 1].decode() != metadata_sha256.lower()
        ):
            raise _discard(path, "content does not match the metadata hash its index declared")
        return data

    def put_metadata(self, key: str, data: bytes) -> None:
        path = self.metadata_path(key)
        if path is not None:
            self._store(path, data)

    # -- locking ---------------------------------------------------------------------------------------

    def lock_slot(self, name: str) -> tuple[Path, int]:
        """Where the lock named `name` is taken: one byte of one file (names are hashed onto
        2**28 bytes, so two names held at once share one with a chance of about 1e-6)."""
        assert self.root is not None
        return self.root / _SLOTS, int(_key("lock", name)[:7], 16)

    @contextlib.contextmanager
    def lock(self, name: str, timeout: float = 120) -> Iterator[None]:
        """Hold an inter-process (and inter-thread) lock named `name`; a no-op without a disk cache.

        On timeout the work goes ahead unlocked: the writes are atomic, so the worst case is
        fetching the same thing twice.
        """
        k = _key("lock", name)
        with self._guard:
            tlock = self._thread_locks.setdefault(k, threading.Lock())
        with tlock:
            if self.root is None:
                yield
                return
            path, slot = self.lock_slot(name)
            with contextlib.ExitStack() as stack:
                try:
                    stack.enter_context(held_slot(path, slot, timeout))
                except OSError as e:  # a cache this user may not write: unlocked, nothing kept
                    if self.refused is None:
                        self.refused = e
                yield
