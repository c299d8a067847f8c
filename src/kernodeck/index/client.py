"""The index client: project pages and core metadata from simple indexes, file:// indexes and find-links.

Split along unearth's lines: `collector.PageCollector` (project pages), `evaluate` (which files
suit a target), `fetcher.MetadataFetcher` (core metadata and files), both over
`transport.IndexHttp` (sources, HTTP, caches); `IndexClient` is the facade callers use.

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
  Connections that cannot be made are tried again the same way, except for a certificate that
  does not verify.
- Links on an http(s) page must be http(s) (a page cannot make the client read a local file), and
  an https page cannot send the client to plain http.
- Credentials: `${VAR}` placeholders in an index URL are expanded in memory only. Pages and files
  are addressed by the URL as written (`${NAME}` in place); a source's values are put into a
  request only when it goes to that source's own scheme and host, and user-info is sent as basic
  auth to that host only; ~/.netrc (or $NETRC) is used for hosts without them. URLs kept in
  pages, cache keys and contents, errors, logs and stats never carry credentials or expanded
  values (`kernodeck.support.urls`).
"""

from __future__ import annotations

from kernodeck.index.collector import PageCollector
from kernodeck.index.fetcher import MetadataFetcher
from kernodeck.index.sources import default_index_url
from kernodeck.index.transport import ClientStats

__all__ = ["ClientStats", "IndexClient", "default_index_url"]


class IndexClient(PageCollector, MetadataFetcher):
    """Reads indexes for the resolver. Thread-safe; use as a context manager or call `close()`."""
