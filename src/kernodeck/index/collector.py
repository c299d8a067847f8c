"""The page collector: project pages from simple indexes (PEP 691 JSON, PEP 503 HTML), file://
indexes and find-links folders and pages, cached on disk (see `kernodeck.index.client`)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from kernodeck.errors import IndexError_
from kernodeck.index.cache import (
    CachedPage,
    CorruptEntry,
    page_is_fresh,
)
from kernodeck.index.models import (
    ACCEPT,
    IndexFile,
    IndexSource,
    NotFound,
    ProjectPage,
    parse_filename,
    parse_html_page,
    parse_json_page,
)
from kernodeck.index.sources import ResolvedUrl
from kernodeck.index.transport import (
    _HTML_TYPES,
    _JSON_TYPES,
    IndexHttp,
    _local_path,
    _page_url,
    bounded_allocator,
)
from kernodeck.support.urls import redact


class PageCollector(IndexHttp):
    """Project pages: which files a project has on one source."""

    # -- pages ---------------------------------------------------------------------------------------

    def project_page(self, source: IndexSource, name: str) -> ProjectPage | NotFound:
        """The files of `name` on `source`, or NotFound when the index has no such project."""
        quick = self.cached_page(source, name)
        if quick is not None:
            return quick
        canon = str(canonicalize_name(name))
        key = (source.name, source.url, canon)
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

    def cached_page(
        self, source: IndexSource, name: str, *, disk: bool = True
    ) -> ProjectPage | NotFound | None:
        """The page when memory (or, with `disk`, the cache) answers without the network (what
        `project_page` returns first, cheap enough to read in the caller's thread); None otherwise."""
        canon = str(canonicalize_name(name))
        key = (source.name, source.url, canon)
        with self._lock:
            hit = self._pages.get(key)
        if hit is not None or not disk:
            return hit
        quick = self._parsed_page(source, canon)
        if quick is not None:
            with self._lock:
                self._pages[key] = quick
        return quick

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
        if head.body:
            head = dataclasses.replace(head, body=b"")  # what decides freshness, not the page itself
        with self._lock:
            if fp is None:
                self.replayable = False
            else:
                self._used_pages[url] = (fp, head)

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
        bounded_allocator()  # page bodies are big and come and go in many threads
        cached = None
        if not self.refresh:
            try:
                cached = self.cache.get_page(url)
            except CorruptEntry as e:
                if self.offline:
                    raise IndexError_(
                        f"offline: the cached copy of {what} on index {source.name!r} was damaged "
                        "on disk and has been discarded",
                        context=[f"cache entry: {e.path}", e.reason, f"page: {redact(url)}"],
                        hint="run `kernodeck lock` once without --offline to fetch it again",
                    ) from None
        if self.offline:
            if cached is None:
                raise IndexError_(
                    f"offline: {what} on index {source.name!r} is not in the cache ({redact(url)})",
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
            self._bump(pages_revalidated=1)
            return self.cache.put_page(refreshed)
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
        return self.cache.put_page(page)

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
        if page.spans is not None:  # a JSON page by spans: read back from the cached page
            body = self.cache.body_reader(cached)
            if body is None and self.cache.enabled and cached.body.isascii():
                cached = self.cache.put_page(cached)  # an older cache file: stored as received
                body = self.cache.body_reader(cached)
            if body is not None:
                page.use_reader(body)  # the text in memory goes
                fp = self.cache.put_parsed(cached, [], [], spans=page.take_span_form(), body=body)
                self._note_page(url, fp, cached)
            else:
                self.not_replayable()
        elif page.raw is not None:  # a JSON page: stored as written, validated when read
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
        if parsed.spans is not None and parsed.body is not None:
            return ProjectPage.from_span_form(
                canon, source.name, head.base or head.url, parsed.spans, parsed.body
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

    def _with_local_hashes(self, page: ProjectPage) -> ProjectPage:
        files = []
        for f in page.files:
            if f.sha256 is None and urlsplit(f.url).scheme == "file" and _local_path(f.url).is_file():
                f = dataclasses.replace(
                    f, hashes={**f.hashes, "sha256": self._local_sha256(_local_path(f.url))}
                )
            files.append(f)
        return ProjectPage(page.name, page.index, tuple(files), page.rejected, page.url)
