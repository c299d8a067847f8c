"""The index client's core: sources, credentials, HTTP with deadlines, retries and size caps,
the caches and counters shared by the page collector (`kernodeck.index.collector`) and the
metadata fetcher (`kernodeck.index.fetcher`); `kernodeck.index.client.IndexClient` puts them
together (see its docstring for the rules)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from kernodeck import __version__
from kernodeck.errors import IndexError_
from kernodeck.fingerprint import sha256_file
from kernodeck.index.cache import (
    DEFAULT_PAGE_TTL,
    CachedPage,
    IndexCache,
)
from kernodeck.index.models import (
    HTML_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    CoreMetadata,
    IndexFile,
    IndexSource,
    IndexUnreachable,
    NotFound,
    ProjectPage,
)
from kernodeck.support import envvars

if TYPE_CHECKING:
    # httpx (and ssl) are imported when the first request is made (a warm lock makes none)
    import ssl

    import httpx
    from typing_extensions import Self

    from kernodeck.handover.installer_env import Setting
    from kernodeck.index.proxies import ProxyInUse
from kernodeck.index.sources import ResolvedUrl, expand, netrc_auth
from kernodeck.support.httpmods import http2_asked
from kernodeck.support.urls import public_url, redact

_RETRY_STATUS = {500, 502, 503, 504}
_ATTEMPTS = 4
#: Defaults of the limits (each overridable by the environment variable named beside it).
DEFAULT_REQUEST_DEADLINE = 300.0  # KERNODECK_HTTP_TIMEOUT: seconds for one request, retries included
DEFAULT_CLIENT_DEADLINE = 3600.0  # KERNODECK_LOCK_TIMEOUT: seconds for everything one client reads
DEFAULT_MAX_PAGE_BYTES = 128 * 1024 * 1024  # KERNODECK_MAX_PAGE_BYTES
DEFAULT_MAX_METADATA_BYTES = 16 * 1024 * 1024  # KERNODECK_MAX_METADATA_BYTES
_MIN_DOWNLOAD_RATE = 1_000_000  # bytes/s a whole-file download is granted beyond the deadline


def _env_number(var: envvars.EnvVar, default: float) -> float:
    try:
        return var.number(default)
    except envvars.BadValue as e:
        raise IndexError_(str(e), hint=e.hint) from None


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
    url: str  # public form (see kernodeck.support.urls.public_url)
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


def network_reach(environ: Mapping[str, str] | None = None) -> tuple[ssl.SSLContext | bool, Setting | None]:
    """(TLS verification, proxy) for the index client, from the same settings the installer runs
    keep (kernodeck.handover.installer_env): the user's CA bundle and client certificate, and pip's proxy
    setting with its source (None: the HTTP(S)_PROXY / NO_PROXY variables apply)."""
    import ssl

    from kernodeck.handover.installer_env import network_settings

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
    return verify, net.proxy


_PROXY_AUTH_HINT = (
    "write the proxy's user and password into {source} (http://USER:PASSWORD@host:port); "
    "Kernodeck never prints or writes them"
)


def _h2_available() -> bool:
    try:
        import h2  # noqa: F401
    except ImportError:
        return False
    return True


def _http2_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """HTTP/2 only when asked for (`KERNODECK_HTTP2=1`) and h2 is installed.

    Off by default: with several resolver threads sharing one HTTP/2 connection, httpcore/h2 races
    (hpack's "deque mutated during iteration", unknown stream ids, RECV_HEADERS in state CLOSED)
    aborted about half of the cold 50-dependency locks measured under load, and 0 of 24 over
    HTTP/1.1, which uses a pool of connections as pip does."""
    return http2_asked(environ) and _h2_available()


def _untrusted(error: BaseException) -> bool:
    """Whether a connection failed because the server's certificate did not verify (httpx keeps
    ssl's error as the cause)."""
    import ssl

    seen: BaseException | None = error
    while seen is not None and not isinstance(seen, ssl.SSLCertVerificationError):
        seen = seen.__cause__ or seen.__context__
    return seen is not None


def _unreachable(what: str, shown: str, last: BaseException | None, proxy: ProxyInUse | None) -> IndexError_:
    """The error for a read that failed on the network: which of the index, the proxy or the
    certificate, and the setting to look at."""
    import httpx

    detail = redact(f"{type(last).__name__}: {last}") if last is not None else "server error"
    offline = "`--offline` locks from the cache only"
    if last is not None and _untrusted(last):
        return IndexUnreachable(
            f"cannot read {what} from {shown}: its certificate did not verify"
            + (f" ({proxy.said()})" if proxy else ""),
            context=[detail],
            hint="behind a TLS-inspecting proxy, point PIP_CERT or SSL_CERT_FILE at the proxy's CA bundle",
        )
    if proxy is not None and isinstance(last, httpx.ProxyError) and "407" in str(last):
        return IndexUnreachable(
            f"the proxy {proxy.url} (set by {proxy.source}) asks for credentials (407) to read {what} from {shown}",
            context=[detail],
            hint=_PROXY_AUTH_HINT.format(source=proxy.source),
        )
    if proxy is not None and isinstance(last, httpx.ProxyError):
        return IndexUnreachable(
            f"the proxy {proxy.url} (set by {proxy.source}) did not open a connection to the index "
            f"for {what} from {shown}",
            context=[detail],
            hint=f"the proxy cannot reach the index or does not allow it; check the index url, or add "
            f"the index host to NO_PROXY if it is reached directly; {offline}",
        )
    if proxy is not None and isinstance(last, (httpx.ConnectError, httpx.ConnectTimeout)):
        return IndexUnreachable(
            f"cannot connect to the proxy {proxy.url} (set by {proxy.source}) to read {what} from {shown}",
            context=[detail],
            hint=f"check that the proxy is up at that address, or unset {proxy.source} if this network "
            f"reaches the index directly; {offline}",
        )
    # after retries of 5xx answers (no `last`) the index did answer: not unreachable
    cls = IndexUnreachable if last is not None else IndexError_
    return cls(
        f"cannot read {what} from {shown}" + (f" {proxy.said()}" if proxy else ""),
        context=[detail],
        hint=f"check the network and the index URL; {offline}",
    )


def _h2_race(error: BaseException) -> bool:
    """An error of the HTTP/2 stack's shared connection state (not of the index)."""
    module = type(error).__module__.split(".")[0]
    return isinstance(error, (RuntimeError, KeyError)) or module in ("h2", "hpack", "httpcore")


# Buffers of at least this many bytes (page bodies, their text, cache writes) are given back to
# the system when freed (see `bounded_allocator`).
BIG_BUFFER = 1 << 20
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
_allocator_bounded: bool | None = None  # not tried yet


def bounded_allocator() -> bool:
    """Have glibc map buffers of `BIG_BUFFER` bytes or more on their own and unmap them when
    freed, once per process, before the first page body is loaded; whether it did (glibc on
    Linux only, and not where the user tuned malloc through MALLOC_* variables).

    By default glibc raises that threshold to the largest buffer freed so far (up to 32 MiB), so
    after the first big page body the next ones are carved out of the resolver threads' heaps,
    which keep the memory after the bodies are gone: a cold 50-dependency lock peaked at about
    205 MB, 140 MB with the threshold fixed."""
    global _allocator_bounded
    if _allocator_bounded is None:
        _allocator_bounded = _bound_allocator()
    return _allocator_bounded


def _bound_allocator() -> bool:
    if sys.platform != "linux" or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, BIG_BUFFER))


def _local_path(url: str) -> Path:
    """The path of a file: URL. What `urllib.request.url2pathname` does, without importing
    urllib.request (http.client, ssl, email: 12 ms a warm lock does not need)."""
    path = urlsplit(url).path
    if os.name == "nt":  # pragma: no cover - Windows only
        from nturl2path import url2pathname

        return Path(url2pathname(path))
    return Path(unquote(path))


class IndexHttp:
    """Sources, HTTP and the state shared by the collector and the fetcher. Thread-safe."""

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
        self.cache = IndexCache((cache_dir or envvars.cache_dir()) if disk_cache else None)
        self.stats = ClientStats()
        self._traffic: dict[str, list[int]] = {}  # host -> [requests, bytes] (`lock --stats`)
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
            deadline if deadline is not None else _env_number(envvars.HTTP_TIMEOUT, DEFAULT_REQUEST_DEADLINE)
        )
        self._client_deadline = time.monotonic() + _env_number(envvars.LOCK_TIMEOUT, DEFAULT_CLIENT_DEADLINE)
        self.max_page_bytes = max_page_bytes or int(
            _env_number(envvars.MAX_PAGE_BYTES, DEFAULT_MAX_PAGE_BYTES)
        )
        self.max_metadata_bytes = max_metadata_bytes or int(
            _env_number(envvars.MAX_METADATA_BYTES, DEFAULT_MAX_METADATA_BYTES)
        )
        read_timeout = min(timeout, self.deadline)
        self._local_hashes: dict[tuple[str, int, int], str] = {}
        self._used_pages: dict[str, tuple[tuple[int, int], CachedPage]] = {}
        self.replayable = True
        self._transport = transport
        self._read_timeout = read_timeout
        self._h2 = _http2_wanted()
        self._main: httpx.Client | None = None
        self._h1: httpx.Client | None = None
        self._maker: Callable[[bool], httpx.Client] | None = None
        self._proxy: Setting | None = None  # pip's `proxy` setting, once the client is made

    def _client(self, *, retry: bool) -> httpx.Client:
        """The client; with `retry`, the one with fresh HTTP/1.1 connections (for retries after a
        broken stream, and for hosts that reset). Each is made on its first use: a lock answered
        from the cache never imports httpx nor reads the CA bundle, and one without a broken
        stream never makes the second. With a transport given (tests), there is one client."""
        with self._lock:
            if self._maker is None:
                self._maker = self._client_maker()
            if retry and self._transport is None:
                if self._h1 is None:
                    self._h1 = self._maker(True)
                return self._h1
            if self._main is None:
                self._main = self._maker(False)
            return self._main

    def _client_maker(self) -> Callable[[bool], httpx.Client]:
        import httpx

        limits = httpx.Limits(
            max_connections=max(16, self.concurrency * 2), max_keepalive_connections=self.concurrency
        )
        transport = self._transport
        read_timeout = self._read_timeout
        # How this machine reaches the network, as the user's own pip would (CA bundle from
        # PIP_CERT / pip's `cert` / REQUESTS_CA_BUNDLE / SSL_CERT_FILE, client certificate, proxy
        # from pip's `proxy`, else HTTP(S)_PROXY / NO_PROXY): how to reach, never what to lock.
        verify, proxy = network_reach() if transport is None else (True, None)
        self._proxy = proxy

        def make(retry: bool) -> httpx.Client:
            return httpx.Client(
                transport=None if retry else transport,
                http2=False if retry else self._h2,
                limits=limits,
                verify=verify,
                proxy=proxy.value if proxy is not None else None,
                timeout=httpx.Timeout(read_timeout, connect=min(15.0, read_timeout)),
                # A redirect to another origin (scheme, host or port) carries no credentials:
                # httpx drops the Authorization header there (basic auth from ${VAR} user-info or
                # ~/.netrc is set on the first request only, and the next hop's URL has no
                # user-info of ours); tests/security/test_index_redirect_credentials.py holds it.
                follow_redirects=True,
                headers={"User-Agent": f"kernodeck/{__version__}"},
                trust_env=True,  # with no transport given, HTTP(S)_PROXY and NO_PROXY apply
            )

        return make

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            made, self._main, self._h1 = (self._main, self._h1), None, None
        for http in made:
            if http is not None:
                http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _bump(self, **counts: int) -> None:
        with self._stats_lock:
            for k, v in counts.items():
                setattr(self.stats, k, getattr(self.stats, k) + v)

    def _count_traffic(self, url: str, size: int) -> None:
        parts = urlsplit(url)
        host = parts.hostname or parts.netloc  # never the user-info
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        with self._stats_lock:
            seen = self._traffic.setdefault(host, [0, 0])
            seen[0] += 1
            seen[1] += size

    def traffic_by_host(self) -> dict[str, tuple[int, int]]:
        """Answers received and their body bytes, per host (retries included)."""
        with self._stats_lock:
            return {h: (n, b) for h, (n, b) in self._traffic.items()}

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
        import httpx

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
        import httpx

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
                retry = host in self._h1_hosts
            http = self._client(retry=retry)
            try:
                r = self._read(http, request_url, headers, end, limit, public=url)
            except _Deadline:
                if self._client_deadline < own_end:
                    raise IndexUnreachable(
                        f"reading {what} from {shown} ran past the time this lock may spend on indexes",
                        hint="the index is too slow or stalls; raise KERNODECK_LOCK_TIMEOUT (seconds) "
                        "if it is only slow",
                    ) from None
                raise IndexUnreachable(
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
                last = e
                if _untrusted(e):
                    break  # the certificate will not verify the next time either
                # else again after a pause: a proxy or a load balancer that drops one handshake
                # (a TLS-inspecting proxy here once answered a handshake with "decode error")
            except httpx.ProxyError as e:
                last = e
                if "407" in str(e):
                    break  # the proxy wants credentials: asking again without them changes nothing
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
                last = e  # a reset or broken stream: again on a fresh HTTP/1.1 connection
                with self._lock:
                    self._resets[host] = self._resets.get(host, 0) + 1
                    self._h1_hosts.add(host)
            except (httpx.HTTPError, OSError) as e:
                last = e
            except Exception as e:
                if not self._h2 or retry or self._transport is not None or not _h2_race(e):
                    raise
                last = e  # a race inside the shared HTTP/2 connection: again over HTTP/1.1
                with self._lock:
                    self._resets[host] = self._resets.get(host, 0) + 1
                    self._h1_hosts.add(host)
            else:
                self._count_traffic(request_url, len(r.content))
                if r.status_code not in _RETRY_STATUS or attempt == _ATTEMPTS - 1:
                    return r
                last = None
        if last is None and time.monotonic() >= end:
            last = TimeoutError(f"no answer within {seconds:g} s")
        proxy = self._proxy_for(request_url) if isinstance(last, httpx.TransportError) else None
        raise _unreachable(what, shown, last, proxy)

    def _proxy_for(self, url: str) -> ProxyInUse | None:
        """The proxy the client sends requests to `url` through (None: direct, or a transport
        given by a test)."""
        if self._transport is not None:
            return None
        from kernodeck.index.proxies import proxy_for

        return proxy_for(url, self._proxy, os.environ)

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
        import httpx

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
        proxy = self._proxy_for(r.request_url) if r.status_code == 407 else None
        if proxy is not None:
            return IndexError_(
                f"the proxy {proxy.url} (set by {proxy.source}) asks for credentials (407) to read {what} at {url}",
                hint=_PROXY_AUTH_HINT.format(source=proxy.source),
            )
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

    def not_replayable(self) -> None:
        """Something was read that the page cache does not describe (a local folder, a download)."""
        with self._lock:
            self.replayable = False

    def _local_sha256(self, path: Path) -> str:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._local_hashes.get(key)
        if hit is not None:
            return hit
        digest = sha256_file(path)
        with self._lock:
            self._local_hashes[key] = digest
        return digest
