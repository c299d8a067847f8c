"""Content fingerprints (sha256) of files and directories, with a stat-keyed cache.

Files are hashed as a stream in large blocks. A directory's digest is the sha256 of the lines
`<file sha256>  <relative posix path>\\n`, one per regular file below it, sorted by the UTF-8
bytes of the path; the same as::

    (cd DIR && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum) | sha256sum

Directory symlinks are not followed; file symlinks are hashed by their content.

Those lines are a directory's *listing*. `kernodeck capture` keeps the reference's listing beside
the manifest, as `.kernodeck/listings/<directory sha256>.sha256` (`listing_path`): a listing is used
only when its own sha256 is the digest the manifest records, so a stale or edited one is never
believed. With it, verify names the files added, removed and changed (`compare_listings`).

The cache maps an absolute path to (size, mtime_ns, inode, ctime_ns, sha256): an unchanged
multi-GB file is not read again. It lives in ``platformdirs.user_cache_dir("kernodeck")`` or in
``$KERNODECK_CACHE_DIR``; ``rehash=True`` ignores what it holds (and refreshes it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernodeck.lockfile.names import LISTINGS_DIR
from kernodeck.support.envvars import cache_dir
from kernodeck.support.fsio import atomic_write_bytes, open_regular

#: Read size for streaming hashes. Large enough to amortise syscalls, small enough for the cache.
BLOCK_SIZE = 4 * 1024 * 1024

CACHE_FILE = "fingerprints-v1.json"

StatKey = tuple[int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    """What must be unchanged for a cached digest to stand: size, mtime_ns, inode, ctime_ns."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


_local = threading.local()


def _buffer(size: int) -> tuple[bytearray, memoryview]:
    """This thread's read buffer (one per thread, reused for every file it hashes)."""
    held: tuple[bytearray, memoryview] | None = getattr(_local, "buf", None)
    if held is None or len(held[0]) != size:
        buf = bytearray(size)
        held = _local.buf = (buf, memoryview(buf))
    return held


def sha256_file(path: str | os.PathLike[str], *, block_size: int = BLOCK_SIZE) -> str:
    """The hex sha256 of a regular file, read in `block_size` blocks into this thread's buffer.

    A FIFO, a device or a socket raises fsio.NotRegularFile (an OSError) instead of blocking or
    never ending."""
    h = hashlib.sha256()
    buf, view = _buffer(block_size)
    with open_regular(path) as f:
        if hasattr(os, "posix_fadvise") and os.fstat(f.fileno()).st_size > block_size:
            with contextlib.suppress(OSError):  # not every filesystem takes advice
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        readinto = f.readinto
        update = h.update
        while True:
            n = readinto(buf)
            if not n:
                break
            update(view[:n] if n < block_size else buf)
    return h.hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    bytes_hashed: int = 0
    files_hashed: int = 0


@dataclass(frozen=True)
class Fingerprint:
    """The digest of a file or directory: `kind` is "file" or "dir"; `files` counts the files;
    a directory's `listing` is (relative path, sha256) of each, in the digest's order."""

    sha256: str
    size: int
    kind: str
    files: int = 1
    listing: tuple[tuple[str, str], ...] = ()


def listing_text(listing: tuple[tuple[str, str], ...]) -> str:
    """The lines a directory's digest is the sha256 of."""
    return "".join(f"{digest}  {rel}\n" for rel, digest in listing)


def listing_path(folder: Path, sha256: str) -> Path:
    """The listing of the directory whose digest is `sha256`, kept beside a manifest in `folder`."""
    return folder / LISTINGS_DIR / f"{sha256}.sha256"


def recorded_listing(folder: Path, sha256: str) -> dict[str, str] | None:
    """{relative path: sha256} of the reference directory whose digest is `sha256`; None when no
    listing was kept or it is not the one that digest was computed from."""
    try:
        data = listing_path(folder, sha256).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != sha256:
        return None
    out: dict[str, str] = {}
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        digest, sep, rel = line.partition("  ")
        if not sep:
            return None
        out[rel] = digest
    return out


@dataclass(frozen=True)
class ListingChanges:
    """How a directory differs from its reference listing, each list sorted."""

    added: list[str]
    removed: list[str]
    changed: list[str]


def compare_listings(reference: dict[str, str], now: tuple[tuple[str, str], ...]) -> ListingChanges:
    current = dict(now)
    return ListingChanges(
        added=sorted(set(current) - set(reference)),
        removed=sorted(set(reference) - set(current)),
        changed=sorted(r for r in current.keys() & reference.keys() if current[r] != reference[r]),
    )


@dataclass
class FingerprintCache:
    """A JSON cache of file digests keyed by absolute path and stat key.

    Load once, look up and record digests, then `save()`: the file is merged under a lock with
    what other processes wrote meanwhile and replaced atomically.
    """

    path: Path | None = None
    rehash: bool = False
    stats: CacheStats = field(default_factory=CacheStats)
    _entries: dict[str, list[Any]] | None = None
    _dirty: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def entries(self) -> dict[str, list[Any]]:
        """The cached digests, read from disk on first use (the probe reads the file itself)."""
        if self._entries is None:
            self._entries = _read_entries(self.path) if self.path is not None else {}
        return self._entries

    @classmethod
    def open(
        cls, directory: Path | None = None, *, rehash: bool = False, enabled: bool = True
    ) -> FingerprintCache:
        if not enabled:
            return cls(path=None, rehash=rehash)
        d = directory if directory is not None else cache_dir()
        return cls(path=d / CACHE_FILE, rehash=rehash)

    def lookup(self, path: str, key: StatKey) -> str | None:
        if self.rehash:
            return None
        e = self.entries.get(path)
        if e is not None and len(e) == 5 and tuple(e[:4]) == key:
            return str(e[4])
        return None

    def record(self, path: str, key: StatKey, digest: str) -> None:
        entry = [*key, digest]
        if self._entries is not None:
            self._entries[path] = entry
        self._dirty[path] = entry

    def file_sha256(self, path: str | os.PathLike[str]) -> str:
        """The digest of one file, from the cache when its stat key is unchanged."""
        p = os.path.abspath(path)
        st = os.stat(p)
        key = stat_key(st)
        hit = self.lookup(p, key)
        if hit is not None:
            self.stats.hits += 1
            return hit
        self.stats.misses += 1
        digest = sha256_file(p)
        self.stats.bytes_hashed += st.st_size
        self.stats.files_hashed += 1
        # A file that changed while it was read gets no cache entry.
        if stat_key(os.stat(p)) == key:
            self.record(p, key, digest)
        return digest

    def fingerprint(self, path: str | os.PathLike[str]) -> Fingerprint:
        """Fingerprint a file or a directory (see the module docstring for the directory digest)."""
        p = Path(path)
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            return self._dir_fingerprint(p)
        return Fingerprint(self.file_sha256(p), st.st_size, "file")

    def _dir_fingerprint(self, root: Path) -> Fingerprint:
        base = os.path.abspath(root)
        # (sort key, relative posix path, absolute path, stat) of every regular file below
        files: list[tuple[bytes, str, str, os.stat_result]] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames.sort()
            reldir = os.path.relpath(dirpath, base).replace(os.sep, "/")
            prefix = "" if reldir == "." else reldir + "/"
            for name in filenames:
                full = os.path.join(dirpath, name)
                try:
                    st = os.stat(full)
                except OSError:
                    continue  # a dangling symlink
                if not stat.S_ISREG(st.st_mode):
                    continue  # FIFOs, devices, sockets: never read
                rel = prefix + name
                files.append((rel.encode("utf-8", "surrogateescape"), rel, full, st))
        files.sort(key=lambda t: t[0])
        digests: list[str | None] = []
        todo: list[int] = []
        for i, (_, _, full, st) in enumerate(files):
            hit = self.lookup(full, stat_key(st))
            digests.append(hit)
            if hit is None:
                todo.append(i)
            else:
                self.stats.hits += 1
        # One after another: on the 2-core machine measured, threads cost CPU and gained no time.
        for i in todo:
            full, st = files[i][2], files[i][3]
            digest = sha256_file(full)
            key = stat_key(st)
            self.stats.misses += 1
            self.stats.bytes_hashed += st.st_size
            self.stats.files_hashed += 1
            # A file that changed while it was read gets no cache entry.
            if stat_key(os.stat(full)) == key:
                self.record(full, key, digest)
            digests[i] = digest
        listing = tuple((rel, known) for (_, rel, _, _), known in zip(files, digests, strict=True) if known)
        assert len(listing) == len(files)  # every digest is set by now
        outer = hashlib.sha256(listing_text(listing).encode("utf-8", "surrogateescape"))
        size = sum(t[3].st_size for t in files)
        return Fingerprint(outer.hexdigest(), size, "dir", files=len(files), listing=listing)

    def merge(self, new: dict[str, list[Any]]) -> None:
        """Record entries computed elsewhere (e.g. by the probe inside the target interpreter)."""
        for p, e in new.items():
            if isinstance(e, list) and len(e) == 5:
                self._dirty[p] = e

    def save(self, timeout: float = 10) -> None:
        """Merge this run's entries into the cache file, under its lock; when another process
        holds the lock for more than `timeout` seconds, they are not kept (nothing is lost but
        time)."""
        if self.path is None or not self._dirty:
            return
        from kernodeck.support.filelocks import held

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with held(str(self.path) + ".lock", timeout=timeout) as got:
                if not got:
                    return  # another process holds it for longer: this run's entries are not kept
                current = _read_entries(self.path)
                current.update(self._dirty)
                from kernodeck.support.fsio import atomic_write_text

                atomic_write_text(self.path, json.dumps(current, separators=(",", ":")))
                self._entries = current
        except OSError:
            return  # a cache that cannot be written costs time, never correctness
        self._dirty = {}


def _read_entries(path: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def keep_listing(folder: Path, fp: Fingerprint) -> Path | None:
    """Keep a directory's listing beside the manifest in `folder` (capture), written atomically;
    None for a file."""
    if fp.kind != "dir":
        return None
    path = listing_path(folder, fp.sha256)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, listing_text(fp.listing).encode("utf-8", "surrogateescape"))
    return path


def fingerprint(path: str | os.PathLike[str], *, cache: FingerprintCache | None = None) -> Fingerprint:
    """Fingerprint a file or directory, without a persistent cache unless one is given."""
    return (cache if cache is not None else FingerprintCache()).fingerprint(path)
