"""The metadata fetcher: core metadata of one file, cheapest first (cache, PEP 658 file, range
requests, the whole file; sdists built), and whole files with their hashes checked (see
`kernodeck.index.client`)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from kernodeck.errors import IndexError_
from kernodeck.index.buildenv import BuildSources
from kernodeck.index.cache import (
    CorruptEntry,
    IndexCache,
)
from kernodeck.index.metadata import (
    MetadataTooLarge,
    RangeUnsupported,
    build_sdist_metadata,
    parse_core_metadata,
    read_wheel_metadata,
    read_wheel_metadata_by_ranges,
)
from kernodeck.index.models import (
    CoreMetadata,
    IndexFile,
    MetadataError,
    parse_filename,
)
from kernodeck.index.transport import _MIN_DOWNLOAD_RATE, IndexHttp, _local_path
from kernodeck.support.urls import public_url, redact


class MetadataFetcher(IndexHttp):
    """Core metadata and files of the files a collector found."""

    #: Where an sdist's build requirements come from (the lock's indexes and exclude-newer; set by
    #: the resolver's session); None: pip's built-in index.
    build_sources: BuildSources | None = None

    # -- files ---------------------------------------------------------------------------------------

    def _check_hash(self, file: IndexFile, data: bytes) -> None:
        for algo in ("sha256", "sha384", "sha512"):
            want = file.hashes.get(algo)
            if want is None:
                continue
            got = hashlib.new(algo, data).hexdigest()
            if got != want:
                raise IndexError_(
                    f"hash mismatch for {file.filename} from index {file.index!r}",
                    context=[f"expected {algo}:{want}", f"got      {algo}:{got}", f"url: {redact(file.url)}"],
                    hint="the file changed on the index or was corrupted in transit; the file is refused",
                )
            return

    def fetch_file(self, file: IndexFile) -> bytes:
        """The whole artifact, checked against the index's hash."""
        if urlsplit(file.url).scheme == "file":
            try:
                data = _local_path(file.url).read_bytes()
            except OSError as e:
                raise IndexError_(
                    f"cannot read {file.filename} from index {file.index!r}: {e.strerror}"
                ) from None
            self._check_whole(file, data)
            return data
        for attempt in range(2):
            r = self._get(
                file.url,
                headers={"Accept-Encoding": "identity"},
                what=file.filename,
                limit=file.size,
                deadline=self.deadline + (file.size or 0) / _MIN_DOWNLOAD_RATE,
            )
            if r.status_code != 200:
                raise self._status_error(r, file.filename, file.index)
            data = r.content
            self._bump(whole_downloads=1, bytes_downloaded=len(data))
            if attempt == 0 and file.size is not None and len(data) != file.size:
                continue  # cut short (a connection closed without a length): once more
            self._check_whole(file, data)
            return data
        raise AssertionError("unreachable")

    def _check_whole(self, file: IndexFile, data: bytes) -> None:
        """A whole body is the file: its length (when the index published it), then its hash."""
        if file.size is not None and len(data) != file.size:
            raise IndexError_(
                f"{file.filename} from index {file.index!r} came back with {len(data)} bytes, "
                f"not the {file.size} its page lists",
                context=[f"url: {redact(file.url)}"],
                hint="the download was cut short or the file changed on the index; the file is refused",
            )
        self._check_hash(file, data)

    def file_sha256(self, file: IndexFile) -> str:
        """The file's sha256: from the index when published, else computed from a download."""
        if file.sha256:
            return file.sha256
        self.not_replayable()
        if urlsplit(file.url).scheme == "file":
            return self._local_sha256(_local_path(file.url))
        return hashlib.sha256(self.fetch_file(file)).hexdigest()

    # -- metadata ------------------------------------------------------------------------------------

    def _meta_key(self, file: IndexFile) -> str:
        """Where the metadata of `file` is kept: under its index, its URL and the hashes its page
        declared (see `IndexCache.metadata_key`), never under the artifact hash alone."""
        with self._lock:
            index = self._index_urls.get(file.index, f"name:{file.index}")
        return IndexCache.metadata_key(index, public_url(file.url), file.sha256, file.metadata_sha256)

    def metadata(self, file: IndexFile) -> CoreMetadata:
        """Core metadata of a file; raises MetadataError (an IndexError_) when unusable."""
        key = self._meta_key(file)
        with self._lock:
            err = self._meta_errors.get(key)
        if err is not None:
            raise err
        meta = self.cached_metadata(file)
        if meta is not None:
            return meta
        try:
            with self.cache.lock(f"meta:{key}"):
                with self._lock:
                    hit = self._meta.get(key)
                if hit is not None:
                    self._bump(metadata_from_cache=1)
                    return hit
                meta = self._metadata_uncached(file)
        except IndexError_ as e:
            with self._lock:
                self._meta_errors[key] = e
            raise
        with self._lock:
            self._meta[key] = meta
        return meta

    def cached_metadata(self, file: IndexFile, *, disk: bool = True) -> CoreMetadata | None:
        """The metadata when memory (or, with `disk`, the cache) answers without the network (what
        `metadata` returns first, cheap enough to read in the caller's thread); None otherwise."""
        key = self._meta_key(file)
        with self._lock:
            hit = self._meta.get(key)
        if hit is not None:
            self._bump(metadata_from_cache=1)
            return hit
        if not disk:
            return None
        meta = self._cached_metadata(file)  # no lock: cache files are replaced atomically
        if meta is not None:
            with self._lock:
                self._meta[key] = meta
        return meta

    def prefetch_metadata(self, files: Iterable[IndexFile]) -> None:
        """Load the metadata of many files concurrently into the memory and disk caches."""
        keyed = {self._meta_key(f): f for f in files}
        with self._lock:
            todo = [f for k, f in keyed.items() if k not in self._meta]
        if not todo:
            return

        def one(f: IndexFile) -> None:
            # an error is kept and raised again when the resolver asks for this file
            with contextlib.suppress(IndexError_):
                self.metadata(f)

        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo))) as pool:
            list(pool.map(one, todo))

    def _cached_metadata(self, file: IndexFile) -> CoreMetadata | None:
        try:
            data = self.cache.get_metadata(self._meta_key(file), file.metadata_sha256)
        except CorruptEntry as e:
            if self.offline:
                raise MetadataError(
                    f"offline: the cached metadata of {file.filename} (index {file.index!r}) was "
                    "damaged on disk and has been discarded",
                    context=[f"cache entry: {e.path}", e.reason],
                    hint="run `kernodeck lock` once without --offline to fetch it again",
                ) from None
            return None  # fetched again
        if data is None:
            return None
        try:
            meta = self._checked(parse_core_metadata(data, source=file.filename), file)
        except MetadataError:
            return None  # an unusable cache entry is fetched again
        self._bump(metadata_from_cache=1)
        return meta

    def _metadata_uncached(self, file: IndexFile) -> CoreMetadata:
        meta = self._cached_metadata(file)
        if meta is not None:
            return meta
        if self.offline:
            raise MetadataError(
                f"offline: the metadata of {file.filename} (index {file.index!r}) is not in the cache",
                hint="run `kernodeck lock` once without --offline to fill the cache",
            )
        data = self._fetch_metadata_bytes(file)
        meta = self._checked(parse_core_metadata(data, source=file.filename), file)
        self.cache.put_metadata(self._meta_key(file), data)
        self._bump(metadata_fetched=1)
        return meta

    @staticmethod
    def _checked(meta: CoreMetadata, file: IndexFile) -> CoreMetadata:
        name, version, _ = parse_filename(file.filename)
        if canonicalize_name(meta.name) != name or meta.version != version:
            raise MetadataError(
                f"the metadata of {file.filename} names {meta.name} {meta.version}, not {name} {version}",
                hint="the index serves inconsistent files for this project",
            )
        return meta

    def _fetch_metadata_bytes(self, file: IndexFile) -> bytes:
        local = urlsplit(file.url).scheme == "file"
        if file.is_sdist:
            data = self.fetch_file(file)
            import tempfile

            with tempfile.TemporaryDirectory(prefix="kernodeck-sdist-") as tmp:
                archive = Path(tmp) / file.filename
                archive.write_bytes(data)
                self._bump(sdist_builds=1)
                return build_sdist_metadata(archive, self.build_sources)
        if file.core_metadata:
            got = self._metadata_file(file, local)
            if got is not None:
                return got
        if local:
            path = _local_path(file.url)
            self._check_hash(file, path.read_bytes())
            return read_wheel_metadata(path, file.filename, max_size=self.max_metadata_bytes)
        return self._metadata_by_ranges(file)

    def _metadata_file(self, file: IndexFile, local: bool) -> bytes | None:
        """The PEP 658 file, hash checked; None when the index does not actually have it."""
        if local:
            p = _local_path(file.metadata_url)
            if not p.is_file():
                return None
            data = p.read_bytes()
        else:
            r = self._get(
                file.metadata_url,
                what=f"the metadata of {file.filename}",
                limit=self.max_metadata_bytes,
                limit_hint="raise KERNODECK_MAX_METADATA_BYTES if this metadata really is that big",
            )
            if r.status_code in (404, 410):
                return None
            if r.status_code != 200:
                raise self._status_error(r, f"the metadata of {file.filename}", file.index)
            data = r.content
            self._bump(metadata_files=1, bytes_downloaded=len(data))
        want = file.metadata_sha256
        if want is not None and hashlib.sha256(data).hexdigest() != want:
            raise MetadataError(
                f"hash mismatch for the metadata of {file.filename} from index {file.index!r}",
                context=[f"expected sha256:{want}", f"got      sha256:{hashlib.sha256(data).hexdigest()}"],
                hint="the index serves a .metadata file that does not match its page; the file is refused",
            )
        return data

    def _metadata_by_ranges(self, file: IndexFile) -> bytes:
        """METADATA by range requests; every answer is checked (206, a `Content-Range` that matches
        the request and the file, the length), and any doubt falls back to the whole file, whose
        length and hash are checked before use."""
        sizes: set[int] = set() if file.size is None else {file.size}

        def fetch(start: int | None, length: int) -> tuple[int, int, bytes]:
            rng = f"bytes=-{length}" if start is None else f"bytes={start}-{start + length - 1}"
            r = self._get(
                file.url,
                headers={"Range": rng, "Accept-Encoding": "identity"},
                what=file.filename,
                limit=file.size if file.size is not None else None,
                deadline=self.deadline + (file.size or 0) / _MIN_DOWNLOAD_RATE,
            )
            body = r.content
            self._bump(range_requests=1, range_bytes=len(body), bytes_downloaded=len(body))
            if r.status_code == 206:
                got = _content_range(r.headers.get("Content-Range", ""))
                if got is None:
                    raise RangeUnsupported(b"")
                first, last, total = got
                if sizes and total not in sizes:
                    raise RangeUnsupported(b"")  # another file, or another version of it
                sizes.add(total)
                if start is None:
                    want_first, want_last = max(0, total - length), total - 1
                else:
                    want_first, want_last = start, min(start + length, total) - 1
                if (first, last) != (want_first, want_last) or len(body) != last - first + 1:
                    raise RangeUnsupported(b"")
                return first, total, body
            if r.status_code == 200:
                self._bump(whole_downloads=1)
                raise RangeUnsupported(body)
            if r.status_code == 416:
                raise RangeUnsupported(b"")
            raise self._status_error(r, file.filename, file.index)

        whole = b""
        try:
            data, _requests, _read = read_wheel_metadata_by_ranges(
                fetch, file.filename, max_size=self.max_metadata_bytes
            )
            return data
        except RangeUnsupported as e:
            whole = e.body
        except MetadataTooLarge:
            raise
        except MetadataError:
            pass  # bytes that do not add up: judge the whole, checked file
        if whole:
            try:
                self._check_whole(file, whole)
            except IndexError_:
                whole = b""  # a whole body that is not the file: download it again, checked
        if not whole:
            whole = self.fetch_file(file)
        return read_wheel_metadata(whole, file.filename, max_size=self.max_metadata_bytes)


def _content_range(text: str) -> tuple[int, int, int] | None:
    """(first, last, total) of `bytes first-last/total`; None when it is anything else."""
    unit, _, rest = text.strip().partition(" ")
    span, _, total = rest.partition("/")
    first, _, last = span.partition("-")
    if unit.lower() != "bytes" or not (first.isdigit() and last.isdigit() and total.isdigit()):
        return None
    a, b, n = int(first), int(last), int(total)
    if a > b or b >= n:
        return None
    return a, b, n
