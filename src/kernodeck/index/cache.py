"""The on-disk index cache: project pages (revalidated or with a time-to-live) and immutable metadata.

Layout under the cache root (`KERNODECK_CACHE_DIR`, else `platformdirs.user_cache_dir("kernodeck")`)::

    index-v2/pages/<key[:2]>/<key>.json          one project page: a JSON line (url, validators,
                                                fetched-at), then the body as received
    index-v2/pages/<key[:2]>/<key>.pyXY.parsed   the same page parsed (marshal): validated compact
                                                entries, or a JSON page's raw ones (validated when read)
    index-v2/metadata/<key[:2]>/<key>             core metadata of one file as one index serves it
    index-v2/lock-records/<key[:2]>/<key>.json    a finished lock, replayable while its pages stand

Every entry starts with a one-line seal, `KDC2 sha256:<digest of the rest>`, written with it. An
entry whose content does not match its seal (truncated, edited, half-copied) is deleted and
reported as `CorruptEntry`: online the client fetches it again, offline the error names it. A
damaged entry is never used.

Metadata is keyed by what vouches for it, never by the artifact hash alone (an index may claim any
artifact hash): the index it came from (its URL as written, `${VAR}` placeholders unexpanded), the
file's URL and artifact hash, and the PEP 658 metadata hash the page declared (checked again against
the content on every read). So metadata read from one index can never answer for another.

Keys and contents hold URLs only in their public form (user-info removed, expanded placeholder
values replaced by their `${NAME}`, see `kernodeck.urls`): nothing secret reaches the disk.

The parsed form lets a warm lock skip decoding and validating big pages (tens of thousands of
files); it records the size and mtime of the .json it was made from and is ignored when that file
changed or is gone, so the .json stays the single source of truth. Metadata never changes for a
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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kernodeck.fsio import atomic_write_bytes

_LAYOUT = "index-v2"
_SEAL = b"KDC2 sha256:"
_SEAL_LEN = len(_SEAL) + 64 + 1  # the seal line, newline included
DEFAULT_PAGE_TTL = 600.0  # seconds a cached page without validators answers without the network
_PARSED_FORMAT = 2  # 2: + whether the entries are a JSON page's raw ones
_PARSED_SUFFIX = f".py{sys.version_info[0]}{sys.version_info[1]}.parsed"  # marshal is per version


def default_cache_dir() -> Path:
    env = os.environ.get("KERNODECK_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernodeck"))


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
    return _SEAL + hashlib.sha256(content).hexdigest().encode() + b"\n" + content


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
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _discard(path, f"unreadable ({e.strerror})") from None
    try:
        return unseal(data)
    except ValueError as e:
        raise _discard(path, str(e)) from None


def write_sealed(path: Path, content: bytes) -> None:
    atomic_write_bytes(path, seal(content), fsync=False)


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


@dataclass(frozen=True)
class ParsedPage:
    """A cached page without its body, and its validated entries (see `kernodeck.index.models`)."""

    head: CachedPage  # body is empty
    entries: list[Any]
    rejected: list[tuple[str, str]]
    fingerprint: tuple[int, int]  # of the .json it was parsed from
    raw: bool = False  # entries are a JSON page's unvalidated ones (`models.RawEntry`)


class IndexCache:
    """Pages and metadata on disk. `root=None` disables the disk cache (memory only, in the client)."""

    def __init__(self, root: Path | None) -> None:
        self.root = (root / _LAYOUT) if root is not None else None
        self._thread_locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.root is not None

    # -- pages ---------------------------------------------------------------------------------------

    def page_path(self, url: str) -> Path | None:
        if self.root is None:
            return None
        k = _key("page", url)
        return self.root / "pages" / k[:2] / f"{k}.json"

    def get_page(self, url: str) -> CachedPage | None:
        """The cached page of `url` (public form); CorruptEntry when it fails its check."""
        path = self.page_path(url)
        if path is None:
            return None
        data = read_sealed(path)
        if data is None:
            return None
        try:
            page = CachedPage.from_json(data)
        except (ValueError, KeyError, TypeError) as e:
            raise _discard(path, f"not a cached page ({type(e).__name__})") from None
        if page.url != url:
            raise _discard(path, "holds the page of another url")
        return page

    def put_page(self, page: CachedPage) -> None:
        path = self.page_path(page.url)
        if path is not None:
            write_sealed(path, page.to_json())

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
            fmt, fp, head, entries, rejected, raw = doc
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
            return ParsedPage(
                page,
                list(entries),
                [(str(a), str(b)) for a, b in rejected],
                (int(fp[0]), int(fp[1])),
                raw=bool(raw),
            )
        except (OSError, ValueError, EOFError, TypeError):
            return None

    def put_parsed(
        self, page: CachedPage, entries: Any, rejected: Any, *, raw: bool = False
    ) -> tuple[int, int] | None:
        """Store the parsed form of `page` (already written with `put_page`); its fingerprint.
        `raw`: the entries are a JSON page's unvalidated ones (validated again when read)."""
        path = self.page_path(page.url)
        fp = self._fingerprint(page.url)
        if path is None or fp is None:
            return fp
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
            data = marshal.dumps((_PARSED_FORMAT, fp, head, list(entries), [tuple(r) for r in rejected], raw))
        except ValueError:
            return fp  # something marshal cannot store: the .json alone serves
        write_sealed(path.with_name(path.stem + _PARSED_SUFFIX), data)
        return fp

    # -- finished locks ------------------------------------------------------------------------------

    def _lock_path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / "lock-records" / key[:2] / f"{key}.json"

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
            write_sealed(path, json.dumps(record, sort_keys=True).encode("utf-8"))

    # -- metadata ------------------------------------------------------------------------------------

    @staticmethod
    def metadata_key(index_url: str, file_url: str, sha256: str | None, metadata_sha256: str | None) -> str:
        """The key of one file's metadata as one index serves it (see the module docstring); all
        URLs in their public form."""
        return _key("metadata", index_url, file_url, sha256 or "", metadata_sha256 or "")

    def metadata_path(self, key: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / "metadata" / key[:2] / key

    def get_metadata(self, key: str, metadata_sha256: str | None = None) -> bytes | None:
        """The cached metadata under `key`; when the index declared its hash, the content must
        have it. CorruptEntry (after deleting it) when it fails either check."""
        path = self.metadata_path(key)
        if path is None:
            return None
        data = read_sealed(path)
        if (
            data is not None
            and metadata_sha256 is not None
            and hashlib.sha256(data).hexdigest() != metadata_sha256
        ):
            raise _discard(path, "content does not match the metadata hash its index declared")
        return data

    def put_metadata(self, key: str, data: bytes) -> None:
        path = self.metadata_path(key)
        if path is not None:
            write_sealed(path, data)

    # -- locking ---------------------------------------------------------------------------------------

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
            path = self.root / "locks" / f"{k[:3]}.lock"  # 4096 buckets, not one file per name
            path.parent.mkdir(parents=True, exist_ok=True)
            import filelock

            flock = filelock.FileLock(str(path), timeout=timeout)
            try:
                flock.acquire()
            except filelock.Timeout:
                yield
                return
            try:
                yield
            finally:
                flock.release()
