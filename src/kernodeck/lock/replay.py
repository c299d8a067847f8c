"""The replay cache of `kernodeck lock`: a finished lock recorded under a key, reproduced without
resolving while everything it read still stands.

    key = replay_key(manifest, digests, "repro.toml", names, fmt, prefs, mirrors)  # None: never record
    replay = lookup(cache, key, manifest, offline)     # Replay | None
    store(cache, [key, next_key], pages, rendered, differences)

The key is made of everything a lock is computed from: the lock inputs of each platform, the
platforms, the format, the pins it preferred, the default index, the mirrors, Kernodeck's own
sources (size and mtime of every module) and the Python/packaging versions. A record holds the
rendered files (`kernodeck.lock.convert.Rendered`), the differences across platforms and the cached
project pages the lock read. It replays while every one of those pages is still on disk unchanged
and would still answer without the network (fetched after exclude-newer, or within its
time-to-live): the metadata a lock reads is immutable (keyed by artifact hash), so the resolution
could only come out the same. Locks whose indexes carry credentials are never recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from kernodeck.index.cache import DEFAULT_PAGE_TTL, IndexCache, page_is_fresh
from kernodeck.lock.convert import Rendered
from kernodeck.lock.inputs import default_index_for

if TYPE_CHECKING:
    from kernodeck.manifest.schema import Manifest
    from kernodeck.resolve.joint import Difference, Held

# A replay needs neither the resolver nor the HTTP client (kernodeck.resolve pulls in both):
# Difference is imported only to rebuild a record's differences.

REPLAY_FORMAT = 3


@dataclass(frozen=True)
class Replay:
    """A recorded lock that may be replayed: every platform's files and the differences."""

    rendered: dict[str, Rendered]
    differences: list[Difference]
    held: list[Held]


def sources_fingerprint() -> str:
    """Size and mtime of every module of kernodeck: a changed source never replays an old lock."""
    root = Path(__file__).resolve().parents[1]  # the kernodeck package, not only lock/
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                st = os.stat(os.path.join(dirpath, fn))
                h.update(
                    f"{os.path.relpath(os.path.join(dirpath, fn), root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()
                )
    return h.hexdigest()


def replay_key(
    manifest: Manifest,
    digests: Mapping[str, str],
    manifest_name: str,
    names: Sequence[str],
    fmt: str,
    prefs: dict[str, dict[str, Version]],
    mirrors: Mapping[str, str] | None = None,
) -> str | None:
    """The key of a lock's record; None when it must not be recorded (credentials in play)."""
    import packaging

    pk = manifest.packages
    urls = [ix.url or "" for ix in pk.index] + [pk.pytorch_index or ""]
    default = default_index_for(manifest) or ""
    urls.append(default)
    urls.extend((mirrors or {}).values())
    if any("${" in u or "@" in u for u in urls):
        return None
    doc = {
        "format": REPLAY_FORMAT,
        "python": list(sys.version_info[:2]),
        "packaging": packaging.__version__,
        "sources": sources_fingerprint(),
        "lock_inputs": {n: digests[n] for n in names},
        "manifest_name": manifest_name,
        "platforms": list(names),
        "fmt": fmt,
        "default_index": default,
        "mirrors": sorted((mirrors or {}).items()),
        "preferred": {n: sorted((k, str(v)) for k, v in prefs[n].items()) for n in names},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def lookup(
    cache: IndexCache, key: str, manifest: Manifest, offline: bool, names: Sequence[str]
) -> Replay | None:
    """The record under `key` when every page it read still stands and may answer offline, and
    it holds every platform of `names`."""
    record = cache.get_lock_record(key)
    if record is None:
        return None
    try:
        exclude_newer = manifest.packages.exclude_newer
        for page in record["pages"]:
            if cache.fingerprint(page["url"]) != tuple(page["fingerprint"]):
                return None
            if not offline and not page_is_fresh(
                float(page["fetched_at"]),
                page["etag"],
                page["last_modified"],
                exclude_newer=exclude_newer,
                ttl=DEFAULT_PAGE_TTL,
            ):
                return None
        platforms = {n: Rendered(**r) for n, r in record["platforms"].items()}
        differences = [_difference_from_json(d) for d in record["differences"]]
        held = [_held_from_json(h) for h in record["held"]]
        return Replay({n: platforms[n] for n in names}, differences, held)
    except (KeyError, TypeError, ValueError):
        return None


def store(
    cache: IndexCache,
    keys: Iterable[str | None],
    pages: list[dict[str, Any]],
    rendered: Mapping[str, Rendered],
    differences: Sequence[Difference],
    held: Sequence[Held] = (),
) -> None:
    """Record a finished lock under each key (best effort: a cache that cannot be written is
    only a slower next lock)."""
    entry = {
        "pages": pages,
        "platforms": {n: dataclasses.asdict(r) for n, r in rendered.items()},
        "differences": [d.to_json() for d in differences],
        "held": [h.to_json() for h in held],
    }
    with contextlib.suppress(OSError):
        for k in dict.fromkeys(k for k in keys if k is not None):
            cache.put_lock_record(k, entry)


def _difference_from_json(d: dict[str, Any]) -> Difference:
    from kernodeck.resolve.joint import Difference

    return Difference(
        canonicalize_name(d["package"]), {p: Version(v) for p, v in d["versions"].items()}, str(d["reason"])
    )


def _held_from_json(d: dict[str, Any]) -> Held:
    from kernodeck.resolve.joint import Held

    return Held.from_json(d)
