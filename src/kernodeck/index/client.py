"""The index client: project pages and core metadata from simple indexes, file:// indexes and find-links.

- Pages: PEP 691 JSON, falling back to PEP 503 HTML (one Accept header lets the server choose).
  Cached on disk; revalidated with ETag / Last-Modified when the server sent them, otherwise trusted
  for `page_ttl` seconds. With `exclude_newer`, a page fetched after that instant already holds every
  file the lock may use, so it answers later requests without the network (`refresh=True` re-fetches).
- Metadata, per file, cheapest first: the memory or disk cache (keyed by the index, the file and
  the hashes its page declared, never by the artifact hash alone; see cache.py); the PEP 658/714
  `.metadata` file (hash checked); HTTP range requests reading only the zip tail and the METADATA
  member, every range answer checked (206, `Content-Range` matching the request, length); the
  whole file (length, then hash checked). Any doubt about range answers falls back to the whole
  file. Sdists: downloaded (hash checked) and their metadata built by PEP 517 in an isolated
  environment.
- Offline: only the cache; what is missing or damaged is named in the error.
- Every cache entry is checked against the checksum written with it; a damaged one is discarded
  and fetched again (offline: an error naming it), never used.
- Every request has a total deadline (`KERNODECK_HTTP_TIMEOUT`, seconds, across its retries; a
  body trickling one byte at a time cannot hold a lock), the whole client one too
  (`KERNODECK_LOCK_TIMEOUT`), and pages and metadata have size caps
  (`KERNODECK_MAX_PAGE_BYTES`, `KERNODECK_MAX_METADATA_BYTES`) refused with a clear error.
- Broken streams (HTTP/2 stream resets, connections closed mid-body) are retried with backoff on
  a fresh HTTP/1.1 connection; a host that reset once is asked over HTTP/1.1 from then on.
- Links on an http(s) page must be http(s) (a page cannot make the client read a local file), and
  an https page cannot send the client to plain http.
- Credentials: `${VAR}` placeholders in an index URL are expanded in memory only. Pages and files
  are addressed by the URL as written (`${NAME}` in place); a source's values are put into a
  request only when it goes to that source's own scheme and host, and user-info is sent as basic
  auth to that host only; ~/.netrc (or $NETRC) is used for hosts without them. URLs kept in
  pages, cache keys and contents, errors, logs and stats never carry credentials or expanded
  values (`kernodeck.urls`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

import httpx
from packaging.utils import canonicalize_name

from kernodeck import __version__
from kernodeck.errors import IndexError_
from kernodeck.index.cache import (
    DEFAULT_PAGE_TTL,
    CachedPage,
    CorruptEntry,
    IndexCache,
    default_cache_dir,
    page_is_fresh,
)
from kernodeck.index.metadata import (
    MetadataTooLarge,
    RangeUnsupported,
    build_sdist_metadata,
    read_wheel_metadata,
    read_wheel_metadata_by_ranges,
)
from kernodeck.index.models import (
    ACCEPT,
    HTML_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    CoreMetadata,
    IndexFile,
    IndexSource,
    MetadataError,
    NotFound,
    ProjectPage,
    parse_core_metadata,
    parse_filename,
    parse_html_page,
    parse_json_page,
)
from kernodeck.index.sources import ResolvedUrl, default_index_url, expand, netrc_auth
from kernodeck.urls import public_url, redact

__all__ = ["ClientStats", "IndexClient", "default_index_url"]

_RETRY_STATUS = {500, 502, 503, 504}
_ATTEMPTS = 4
#: Defaults of the limits (each overridable by the environment variable named beside it).
DEFAULT_REQUEST_DEADLINE = 300.0  # KERNODECK_HTTP_TIMEOUT: seconds for one request, retries included
DEFAULT_CLIENT_DEADLINE = 3600.0  # KERNODECK_LOCK_TIMEOUT: seconds for everything one client reads
DEFAULT_MAX_PAGE_BYTES = 128 * 1024 * 1024  # KERNODECK_MAX_PAGE_BYTES
DEFAULT_MAX_METADATA_BYTES = 16 * 1024 * 1024  # KERNODECK_MAX_METADATA_BYTES
_MIN_DOWNLOAD_RATE = 1_000_000  # bytes/s a whole-file download is granted beyond the deadline


def _env_number(name: str, default: float) -> float:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise IndexError_(
            f"{name}={text!r} is not a number", hint=f"unset {name} or give it a positive number"
        ) from None
    if not value > 0:
        raise IndexError_(
            f"{name}={text!r} must be positive", hint=f"unset {name} or give it a positive number"
        )
    return value


class _Deadline(Exception):
    pass


class _TooBig(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} > {limit}")
        self.size = size
        self.limit = limit


@dataclass(frozen=True)
class _Reply:
    """One HTTP answer read whole (within its deadline and size cap)."""

    status_code: int
    reason_phrase: str
    headers: httpx.Headers
    content: bytes
    url: str  # public form (see kernodeck.urls.public_url)
    request_url: str  # public form


def _page_url(base: str, canon: str) -> str:
    """The project page under a simple index root; a query on the root stays a query."""
    p = urlsplit(base)
    return urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + f"/{canon}/", p.query, ""))


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.3g} MiB"


_HTML_TYPES = {HTML_CONTENT_TYPE, "text/html"}
_JSON_TYPES = {JSON_CONTENT_TYPE, "application/vnd.pypi.simple.latest+json"}


@dataclass
class ClientStats:
    """What the client did. `metadata_fetched` counts metadata obtained from an index by any means."""

    pages_fetched: int = 0
    pages_from_cache: int = 0
    pages_revalidated: int = 0
    metadata_fetched: int = 0
    metadata_from_cache: int = 0
    metadata_files: int = 0  # PEP 658 .metadata downloads
    range_requests: int = 0
    range_bytes: int = 0  # bytes read by range requests (part of bytes_downloaded)
    whole_downloads: int = 0
    bytes_downloaded: int = 0
    sdist_builds: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def network_reach(environ: Mapping[str, str] | None = None) -> tuple[ssl.SSLContext | bool, str | None]:
    """(TLS verification, proxy) for the index client, from the same settings the installer runs
    keep (kernodeck.installer_env): the user's CA bundle and client certificate, and pip's proxy
    setting (None: the HTTP(S)_PROXY / NO_PROXY variables apply)."""
    from kernodeck.installer_env import network_settings

    net = network_settings(os.environ if environ is None else environ)
    verify: ssl.SSLContext | bool = True
    if net.ca is not None or net.client_cert is not None:
        ca = net.ca.value if net.ca is not None else None
        ctx = ssl.create_default_context(
            cafile=ca if ca and not os.path.isdir(ca) else None,
            capath=ca if ca and os.path.isdir(ca) else None,
        )
        if net.client_cert is not None:
            ctx.load_cert_chain(net.client_cert.value)
        verify = ctx
    return verify, (net.proxy.value if net.proxy is not None else None)


def _h2_available() -> bool:
    try:
        import h2  # noqa: F401
    except ImportError:
        return False
    return True


def _local_path(url: str) -> Path:
    return Path(url2pathname(urlsplit(url).path))


class IndexClient:
    """Reads indexes for the resolver. Thread-safe; use as a context manager or call `close()`."""

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        offline: bool = False,
        refresh: bool = False,
        exclude_newer: datetime | None = None,
        transport: httpx.BaseTransport | None = None,
        concurrency: int = 16,
        page_ttl: float = DEFAULT_PAGE_TTL,
        disk_cache: bool = True,
        timeout: float = 60,
        deadline: float | None = None,
        max_page_bytes: int | None = None,
        max_metadata_bytes: int | None = None,
    ) -> None:
        self.offline = offline
        self.refresh = refresh
        self.exclude_newer = exclude_newer
        self.concurrency = max(1, concurrency)
        self.page_ttl = page_ttl
        self.cache = IndexCache((cache_dir or default_cache_dir()) if disk_cache else None)
        self.stats = ClientStats()
        self._stats_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pages: dict[tuple[str, str, str], ProjectPage | NotFound] = {}
        self._flinks: dict[tuple[str, str], tuple[IndexFile, ...]] = {}
        self._meta: dict[str, CoreMetadata] = {}
        self._meta_errors: dict[str, IndexError_] = {}
        self._resolved: dict[str, ResolvedUrl] = {}
        self._auth: dict[str, tuple[str, str]] = {}
        self._index_urls: dict[str, str] = {}  # source name -> public URL (metadata cache keys)
        self._resets: dict[str, int] = {}
        self._h1_hosts: set[str] = set()
        self.deadline = (
            deadline
            if deadline is not None
            else _env_number("KERNODECK_HTTP_TIMEOUT", DEFAULT_REQUEST_DEADLINE)
        )
        self._client_deadline = time.monotonic() + _env_number(
            "KERNODECK_LOCK_TIMEOUT", DEFAULT_CLIENT_DEADLINE
        )
        self.max_page_bytes = max_page_bytes or int(
            _env_number("KERNODECK_MAX_PAGE_BYTES", DEFAULT_MAX_PAGE_BYTES)
        )
        self.max_metadata_bytes = max_metadata_bytes or int(
            _env_number("KERNODECK_MAX_METADATA_BYTES", DEFAULT_MAX_METADATA_BYTES)
        )
        read_timeout = min(timeout, self.deadline)
        self._local_hashes: dict[tuple[str, int, int], str] = {}
        self._used_pages: dict[str, tuple[tuple[int, int], CachedPage]] = {}
        self.replayable = True
        limits = httpx.Limits(
            max_connections=max(16, self.concurrency * 2), max_keepalive_connections=self.concurrency
        )
        own = transport is None
        # How this machine reaches the network, as the user's own pip would (CA bundle from
        # PIP_CERT / pip's `cert` / REQUESTS_CA_BUNDLE / SSL_CERT_FILE, client certificate, proxy
        # from pip's `proxy`, else HTTP(S)_PROXY / NO_PROXY): how to reach, never what to lock.
        verify, proxy = network_reach() if own else (True, None)

        def client(t: httpx.BaseTransport | None, *, http2: bool) -> httpx.Client:
            return httpx.Client(
                transport=t,
                http2=http2,
                limits=limits,
                verify=verify,
                proxy=proxy,
                timeout=httpx.Timeout(read_timeout, connect=min(15.0, read_timeout)),
                follow_redirects=True,
                headers={"User-Agent": f"kernodeck/{__version__}"},
                trust_env=True,  # with no transport given, HTTP(S)_PROXY and NO_PROXY apply
            )

        self._http = client(transport, http2=_h2_available())
        # fresh HTTP/1.1 connections for retries after a broken stream, and for hosts that reset
        self._h1 = client(None, http2=False) if own else self._http

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()
        if self._h1 is not self._http:
            self._h1.close()

    def __enter__(self) -> IndexClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _bump(self, **counts: int) -> None:
        with self._stats_lock:
            for k, v in counts.items():
                setattr(self.stats, k, getattr(self.stats, k) + v)

    # -- sources and HTTP ----------------------------------------------------------------------------

    def resolve_source(self, source: IndexSource) -> ResolvedUrl:
        """Expand a source's placeholders (in memory) and remember its credentials for its host."""
        with self._lock:
            hit = self._resolved.get(source.url)
        if hit is not None:
            return hit
        resolved = expand(source.url)
        with self._lock:
            self._resolved[source.url] = resolved
            self._index_urls[source.name] = resolved.public or resolved.url
            if resolved.auth is not None:
                self._auth[resolved.host] = resolved.auth
        return resolved

    def _auth_for(self, url: str) -> httpx.Auth | None:
        host = urlsplit(url).netloc.lower()
        creds = self._auth.get(host) or netrc_auth(urlsplit(url).hostname or "")
        return httpx.BasicAuth(*creds) if creds else None

    def _request_url(self, url: str) -> str:
        """`url` (public form) as sent: the placeholders of the source on its scheme and host
        expanded, nowhere else."""
        if "${" not in url:
            return url
        with self._lock:
            sources = list(self._resolved.values())
        for rs in sources:
            got = rs.for_request(url)
            if got is not None:
                return got
        return url

    def _get(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        what: str,
        limit: int | None = None,
        limit_hint: str = "",
        deadline: float | None = None,
    ) -> _Reply:
        """One GET read whole, with retries on broken streams, connection errors and 5xx, within
        a total deadline; IndexError_ on network failure, on the deadline, or when the body is
        over `limit` bytes."""
        if self.offline:
            raise IndexError_(
                f"offline: would need to download {what} from {redact(url)}",
                hint="run once without --offline to fill the cache",
            )
        shown = redact(url)
        seconds = self.deadline if deadline is None else deadline
        own_end = time.monotonic() + seconds
        end = min(own_end, self._client_deadline)
        request_url = self._request_url(url)
        host = urlsplit(request_url).netloc.lower()
        last: Exception | None = None
        for attempt in range(_ATTEMPTS):
            if attempt:
                pause = min(2.0, 0.25 * 2 ** (attempt - 1))
                if time.monotonic() + pause >= end:
                    break
                time.sleep(pause)
            with self._lock:
                http = self._h1 if host in self._h1_hosts else self._http
            try:
                r = self._read(http, request_url, headers, end, limit, public=url)
            except _Deadline:
                if self._client_deadline < own_end:
                    raise IndexError_(
                        f"reading {what} from {shown} ran past the time this lock may spend on indexes",
                        hint="the index is too slow or stalls; raise KERNODECK_LOCK_TIMEOUT (seconds) "
                        "if it is only slow",
                    ) from None
                raise IndexError_(
                    f"reading {what} from {shown} did not finish within {seconds:g} s",
                    hint="the index is too slow or stalls; raise KERNODECK_HTTP_TIMEOUT (seconds) "
                    "if it is only slow",
                ) from None
            except _TooBig as e:
                raise IndexError_(
                    f"{what} from {shown} is larger than the limit of {_mib(e.limit)}",
                    context=[f"at least {e.size} bytes"],
                    hint=limit_hint or "the index serves something far larger than expected; it is refused",
                ) from None
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                last = e  # the transport already retried the connection
                break
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
                last = e  # a reset or broken stream: again on a fresh HTTP/1.1 connection
                with self._lock:
                    self._resets[host] = self._resets.get(host, 0) + 1
                    self._h1_hosts.add(host)
            except (httpx.HTTPError, OSError) as e:
                last = e
            else:
                if r.status_code not in _RETRY_STATUS or attempt == _ATTEMPTS - 1:
                    return r
                last = None
        if last is None and time.monotonic() >= end:
            last = TimeoutError(f"no answer within {seconds:g} s")
        detail = redact(f"{type(last).__name__}: {last}") if last is not None else "server error"
        raise IndexError_(
            f"cannot read {what} from {shown}",
            context=[detail],
            hint="check the network and the index URL; `--offline` locks from the cache only",
        )

    def _read(
        self,
        http: httpx.Client,
        url: str,
        headers: Mapping[str, str] | None,
        end: float,
        limit: int | None,
        *,
        public: str,
    ) -> _Reply:
        """One attempt: the whole body, or _Deadline / _TooBig / an httpx error. URLs in the
        reply are public: `public` itself unless a redirect led elsewhere."""
        left = end - time.monotonic()
        if left <= 0:
            raise _Deadline()
        timeout = httpx.Timeout(min(left, http.timeout.read or left), connect=min(left, 15.0))
        with http.stream(
            "GET",
            url,
            headers=dict(headers or {}),
            auth=self._auth_for(url) or httpx.USE_CLIENT_DEFAULT,
            timeout=timeout,
        ) as r:
            declared = r.headers.get("Content-Length")
            if limit is not None and declared and declared.isdigit() and int(declared) > limit:
                raise _TooBig(int(declared), limit)
            chunks: list[bytes] = []
            size = 0
            for chunk in r.iter_bytes():
                size += len(chunk)
                if limit is not None and size > limit:
                    raise _TooBig(size, limit)
                chunks.append(chunk)
                if time.monotonic() > end:
                    raise _Deadline()
            if time.monotonic() > end:
                raise _Deadline()
            return _Reply(
                status_code=r.status_code,
                reason_phrase=r.reason_phrase,
                headers=r.headers,
                content=b"".join(chunks),
                # a redirect elsewhere may carry a signed query: kept without its secret values
                url=public if str(r.url) == url else redact(public_url(str(r.url))),
                request_url=public if str(r.request.url) == url else redact(public_url(str(r.request.url))),
            )

    def _status_error(
        self, r: _Reply, what: str, source: str, variables: tuple[str, ...] = ()
    ) -> IndexError_:
        url = redact(r.request_url)
        if r.status_code in (401, 403):
            hint = (
                f"check the credentials in {', '.join(variables)}"
                if variables
                else "the index needs credentials: write ${USER}/${TOKEN} placeholders in its url, or use ~/.netrc"
            )
            return IndexError_(
                f"index {source!r} refused access to {what} ({r.status_code}) at {url}", hint=hint
            )
        return IndexError_(
            f"index {source!r} answered {r.status_code} {r.reason_phrase} for {what} at {url}",
            hint="retry later, or check the index URL",
        )

    # -- pages ---------------------------------------------------------------------------------------

    def project_page(self, source: IndexSource, name: str) -> ProjectPage | NotFound:
        """The files of `name` on `source`, or NotFound when the index has no such project."""
        canon = str(canonicalize_name(name))
        key = (source.name, source.url, canon)
        with self._lock:
            hit = self._pages.get(key)
        if hit is not None:
            return hit
        quick = self._parsed_page(source, canon)
        if quick is not None:
            with self._lock:
                self._pages[key] = quick
            return quick
        with self.cache.lock(f"page:{source.url}:{canon}"):
            with self._lock:
                hit = self._pages.get(key)
            if hit is not None:
                return hit
            if source.format == "find-links":
                page: ProjectPage | NotFound = self._find_links_page(source, canon)
            else:
                page = self._simple_page(source, canon)
        with self._lock:
            self._pages[key] = page
        return page

    def prefetch_pages(self, items: Iterable[tuple[IndexSource, str]]) -> None:
        """Fetch several project pages concurrently; errors surface on the later `project_page` call."""
        todo = list(dict.fromkeys((s, str(canonicalize_name(n))) for s, n in items))
        if not todo:
            return

        def one(item: tuple[IndexSource, str]) -> None:
            with contextlib.suppress(IndexError_):
                self.project_page(*item)

        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo))) as pool:
            list(pool.map(one, todo))

    def _fresh(self, cached: CachedPage) -> bool:
        return page_is_fresh(
            cached.fetched_at,
            cached.etag,
            cached.last_modified,
            exclude_newer=self.exclude_newer,
            ttl=self.page_ttl,
        )

    # -- what a lock read, for replaying it ------------------------------------------------------------

    def _note_page(self, url: str, fp: tuple[int, int] | None, head: CachedPage) -> None:
        with self._lock:
            if fp is None:
                self.replayable = False
            else:
                self._used_pages[url] = (fp, head)

    def not_replayable(self) -> None:
        """Something was read that the page cache does not describe (a local folder, a download)."""
        with self._lock:
            self.replayable = False

    def used_pages(self) -> list[dict[str, Any]] | None:
        """The cached pages this client answered from, with what decides whether they still may
        answer (see `IndexCache.fingerprint`, `page_is_fresh`); None when that does not cover
        everything read."""
        with self._lock:
            if not self.replayable or not self.cache.enabled:
                return None
            return [
                {
                    "url": url,
                    "fingerprint": list(fp),
                    "fetched_at": head.fetched_at,
                    "etag": head.etag,
                    "last_modified": head.last_modified,
                }
                for url, (fp, head) in sorted(self._used_pages.items())
            ]

    def _load_page(
        self, url: str, *, source: IndexSource, what: str, variables: tuple[str, ...]
    ) -> CachedPage:
        """The body of a page from cache or network; `not_found` when the index said 404/410."""
        cached = None
        if not self.refresh:
            try:
                cached = self.cache.get_page(url)
            except CorruptEntry as e:
                if self.offline:
                    raise IndexError_(
                        f"offline: the cached page for {what} on index {source.name!r} was damaged "
                        "on disk and has been discarded",
                        context=[f"cache entry: {e.path}", e.reason, f"page: {redact(url)}"],
                        hint="run `kernodeck lock` once without --offline to fetch it again",
                    ) from None
        if self.offline:
            if cached is None:
                raise IndexError_(
                    f"offline: no cached page for {what} on index {source.name!r} ({redact(url)})",
                    hint="run `kernodeck lock` once without --offline to fill the cache",
                )
            self._bump(pages_from_cache=1)
            return cached
        if cached is not None and self._fresh(cached):
            self._bump(pages_from_cache=1)
            return cached
        headers = {"Accept": ACCEPT}
        if cached is not None:
            if cached.etag:
                headers["If-None-Match"] = cached.etag
            if cached.last_modified:
                headers["If-Modified-Since"] = cached.last_modified
        r = self._get(
            url,
            headers=headers,
            what=what,
            limit=self.max_page_bytes,
            limit_hint="raise KERNODECK_MAX_PAGE_BYTES if this index really serves pages that big",
        )
        if r.status_code == 304 and cached is not None:
            refreshed = CachedPage(
                base=cached.base,
                url=cached.url,
                body=cached.body,
                content_type=cached.content_type,
                fetched_at=time.time(),
                etag=r.headers.get("ETag", cached.etag),
                last_modified=r.headers.get("Last-Modified", cached.last_modified),
            )
            self.cache.put_page(refreshed)
            self._bump(pages_revalidated=1)
            return refreshed
        if r.status_code in (404, 410):
            self._bump(pages_fetched=1)
            missing = CachedPage(url=url, body=b"", content_type="", fetched_at=time.time(), not_found=True)
            self.cache.put_page(missing)
            return missing
        if r.status_code != 200:
            raise self._status_error(r, what, source.name, variables)
        body = r.content
        self._bump(pages_fetched=1, bytes_downloaded=len(body))
        # links resolve against the final URL after redirects (kept in its public form)
        final = r.url
        page = CachedPage(
            url=url,
            body=body,
            content_type=r.headers.get("Content-Type", "text/html"),
            fetched_at=time.time(),
            etag=r.headers.get("ETag"),
            last_modified=r.headers.get("Last-Modified"),
            base=final if final != url else None,
        )
        self.cache.put_page(page)
        return page

    def _parse(self, cached: CachedPage, *, project: str | None, index: str) -> ProjectPage:
        ctype = cached.content_type.split(";")[0].strip().lower()
        base = cached.base or cached.url
        if ctype in _JSON_TYPES:
            assert project is not None
            return parse_json_page(cached.body, project=project, index=index, page_url=base)
        if ctype in _HTML_TYPES or ctype == "":
            return parse_html_page(cached.body, project=project, index=index, page_url=base)
        raise IndexError_(
            f"index {index!r} answered {redact(cached.url)} with content type {ctype!r}, not a simple index page",
            hint="the url must point at a PEP 503/691 simple index (it usually ends in /simple)",
        )

    def _simple_page(self, source: IndexSource, canon: str) -> ProjectPage | NotFound:
        resolved = self.resolve_source(source)
        if urlsplit(resolved.url).scheme == "file":
            return self._file_page(source, resolved.url.rstrip("/"), canon)
        url = _page_url(resolved.public or resolved.url, canon)
        quick = self._parsed_page(source, canon)
        if quick is not None:
            return quick
        cached = self._load_page(
            url, source=source, what=f"the page of {canon!r}", variables=resolved.variables
        )
        if cached.not_found:
            self._note_page(url, self.cache.put_parsed(cached, [], []), cached)
            return NotFound(
                canon, source.name, f"index {source.name!r} has no project {canon!r} ({redact(url)})"
            )
        page = self._parse(cached, project=canon, index=source.name)
        if page.raw is not None:  # a JSON page: stored as written, validated when read
            self._note_page(url, self.cache.put_parsed(cached, page.raw, [], raw=True), cached)
        elif page.entries is not None:
            self._note_page(url, self.cache.put_parsed(cached, page.entries, page.rejected), cached)
        else:
            self.not_replayable()
        return page

    def _parsed_page(self, source: IndexSource, canon: str) -> ProjectPage | NotFound | None:
        """The page from its parsed form in the cache, when the cache may answer (no decoding, no
        validation, no lock: cache files are replaced atomically); None otherwise."""
        if self.refresh or source.format != "simple":
            return None
        resolved = self.resolve_source(source)
        if urlsplit(resolved.url).scheme == "file":
            return None
        url = _page_url(resolved.public or resolved.url, canon)
        parsed = self.cache.get_parsed(url)
        if parsed is None or not (self.offline or self._fresh(parsed.head)):
            return None
        self._bump(pages_from_cache=1)
        head = parsed.head
        self._note_page(url, parsed.fingerprint, head)
        if head.not_found:
            return NotFound(
                canon, source.name, f"index {source.name!r} has no project {canon!r} ({redact(url)})"
            )
        return ProjectPage(
            canon,
            source.name,
            rejected=tuple(parsed.rejected),
            url=head.base or head.url,
            entries=None if parsed.raw else parsed.entries,
            raw=parsed.entries if parsed.raw else None,
        )

    def _file_page(self, source: IndexSource, base: str, canon: str) -> ProjectPage | NotFound:
        self.not_replayable()
        root = _local_path(base)
        folder = root / canon
        if not folder.is_dir():
            # a non-normalised folder name still counts (pip does the same)
            folder = (
                next((p for p in root.iterdir() if p.is_dir() and canonicalize_name(p.name) == canon), folder)
                if root.is_dir()
                else folder
            )
        page = folder / "index.html"
        if not page.is_file():
            if not root.is_dir():
                raise IndexError_(
                    f"index {source.name!r}: folder {root} does not exist",
                    hint="check the file:// url of the index",
                )
            return NotFound(canon, source.name, f"index {source.name!r} has no project {canon!r} ({root})")
        self._bump(pages_fetched=1)
        parsed = parse_html_page(
            page.read_bytes(), project=canon, index=source.name, page_url=folder.as_uri() + "/"
        )
        return self._with_local_hashes(parsed)

    def _find_links_page(self, source: IndexSource, canon: str) -> ProjectPage | NotFound:
        self.not_replayable()
        resolved = self.resolve_source(source)
        with self._lock:
            files = self._flinks.get((source.name, source.url))
        if files is None:
            files = self._find_links_files(source, resolved)
            with self._lock:
                self._flinks[(source.name, source.url)] = files
        mine = tuple(f for f in files if f.project == canon)
        if not mine:
            return NotFound(canon, source.name, f"find-links {source.name!r} has no file of {canon!r}")
        return ProjectPage(
            name=canon, index=source.name, files=mine, url=redact(resolved.public or resolved.url)
        )

    def _find_links_files(self, source: IndexSource, resolved: ResolvedUrl) -> tuple[IndexFile, ...]:
        url = resolved.url
        if urlsplit(url).scheme == "file" or "://" not in url:
            folder = _local_path(url) if "://" in url else Path(url)
            if not folder.is_dir():
                raise IndexError_(
                    f"find-links {source.name!r}: folder {folder} does not exist",
                    hint="check the url of the find-links source",
                )
            out: list[IndexFile] = []
            for p in sorted(folder.iterdir()):
                if not p.is_file():
                    continue
                try:
                    parse_filename(p.name)
                except ValueError:
                    continue
                st = p.stat()
                meta = p.with_name(p.name + ".metadata")
                out.append(
                    IndexFile(
                        filename=p.name,
                        url=p.as_uri(),
                        hashes={"sha256": self._local_sha256(p)},
                        requires_python=None,
                        yanked=None,
                        upload_time=None,
                        size=st.st_size,
                        core_metadata=True if meta.is_file() else None,
                        index=source.name,
                    )
                )
            self._bump(pages_fetched=1)
            return tuple(out)
        cached = self._load_page(
            resolved.public or url, source=source, what="the find-links page", variables=resolved.variables
        )
        if cached.not_found:
            raise IndexError_(f"find-links {source.name!r}: {redact(url)} does not exist (404)")
        return self._parse(cached, project=None, index=source.name).files

    def _local_sha256(self, path: Path) -> str:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._local_hashes.get(key)
        if hit is not None:
            return hit
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
        with self._lock:
            self._local_hashes[key] = digest
        return digest

    def _with_local_hashes(self, page: ProjectPage) -> ProjectPage:
        files = []
        for f in page.files:
            if f.sha256 is None and urlsplit(f.url).scheme == "file" and _local_path(f.url).is_file():
                f = dataclasses.replace(
                    f, hashes={**f.hashes, "sha256": self._local_sha256(_local_path(f.url))}
                )
            files.append(f)
        return ProjectPage(page.name, page.index, tuple(files), page.rejected, page.url)

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
            hit = self._meta.get(key)
            err = self._meta_errors.get(key)
        if hit is not None:
            self._bump(metadata_from_cache=1)
            return hit
        if err is not None:
            raise err
        meta = self._cached_metadata(file)  # no lock: cache files are replaced atomically
        if meta is not None:
            with self._lock:
                self._meta[key] = meta
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
                return build_sdist_metadata(archive)
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
