"""The on-disk index cache: project pages (revalidated or with a time-to-live) and immutable metadata.

Layout under the cache root (`KERNODECK_CACHE_DIR`, else `platformdirs.user_cache_dir("kernodeck")`)::

    index-v1/pages/<key[:2]>/<key>.json          one project page: url, body, validators, fetched-at
    index-v1/pages/<key[:2]>/<key>.pyXY.parsed   the same page parsed: validated compact entries (marshal)
    index-v1/metadata/<sha[:2]>/<sha256>          core metadata of the artifact with that sha256
    index-v1/metadata-url/<key[:2]>/<key>         core metadata of a file published without hashes
    index-v1/lock-records/<key[:2]>/<key>.json    a finished lock, replayable while its pages stand

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

import filelock
import platformdirs

from kernodeck.fsio import atomic_write_bytes

_LAYOUT = "index-v1"
DEFAULT_PAGE_TTL = 600.0  # seconds a cached page without validators answers without the network
_PARSED_FORMAT = 1
_PARSED_SUFFIX = f".py{sys.version_info[0]}{sys.version_info[1]}.parsed"  # marshal is per version


def default_cache_dir() -> Path:
    env = os.environ.get("KERNODECK_CACHE_DIR")
    if env:
        return Path(env)
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
        return json.dumps(
            {
                "url": self.url,
                "body": self.body.decode("utf-8", errors="surrogateescape"),
                "content_type": self.content_type,
                "fetched_at": self.fetched_at,
                "etag": self.etag,
                "last_modified": self.last_modified,
                "base": self.base,
                "not_found": self.not_found,
            }
        ).encode("utf-8", errors="surrogateescape")

    @classmethod
    def from_json(cls, data: bytes) -> CachedPage:
        d: dict[str, Any] = json.loads(data)
        return cls(
            url=str(d["url"]),
            body=str(d["body"]).encode("utf-8", errors="surrogateescape"),
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
        path = self.page_path(url)
        if path is None:
            return None
        try:
            return CachedPage.from_json(path.read_bytes())
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put_page(self, page: CachedPage) -> None:
        path = self.page_path(page.url)
        if path is not None:
            atomic_write_bytes(path, page.to_json(), fsync=False)

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
        try:
            data = path.with_name(path.stem + _PARSED_SUFFIX).read_bytes()
            doc = marshal.loads(data)
            fmt, fp, head, entries, rejected = doc
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
                page, list(entries), [(str(a), str(b)) for a, b in rejected], (int(fp[0]), int(fp[1]))
            )
        except (OSError, ValueError, EOFError, TypeError):
            return None

    def put_parsed(self, page: CachedPage, entries: Any, rejected: Any) -> tuple[int, int] | None:
        """Store the parsed form of `page` (already written with `put_page`); its fingerprint."""
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
            data = marshal.dumps((_PARSED_FORMAT, fp, head, list(entries), [tuple(r) for r in rejected]))
        except ValueError:
            return fp  # something marshal cannot store: the .json alone serves
        atomic_write_bytes(path.with_name(path.stem + _PARSED_SUFFIX), data, fsync=False)
        return fp

    # -- finished locks ------------------------------------------------------------------------------

    def _lock_path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / "lock-records" / key[:2] / f"{key}.json"

    def get_lock_record(self, key: str) -> dict[str, Any] | None:
        path = self._lock_path(key)
        if path is None:
            return None
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def put_lock_record(self, key: str, record: dict[str, Any]) -> None:
        path = self._lock_path(key)
        if path is not None:
            atomic_write_bytes(path, json.dumps(record, sort_keys=True).encode("utf-8"), fsync=False)

    # -- metadata ------------------------------------------------------------------------------------

    def metadata_path(self, sha256: str | None, url: str) -> Path | None:
        if self.root is None:
            return None
        if sha256:
            return self.root / "metadata" / sha256[:2] / sha256
        k = _key("metadata-url", url)
        return self.root / "metadata-url" / k[:2] / k

    def get_metadata(self, sha256: str | None, url: str) -> bytes | None:
        path = self.metadata_path(sha256, url)
        if path is None:
            return None
        try:
            return path.read_bytes()
        except OSError:
            return None

    def put_metadata(self, sha256: str | None, url: str, data: bytes) -> None:
        path = self.metadata_path(sha256, url)
        if path is not None and not path.exists():
            atomic_write_bytes(path, data, fsync=False)

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
