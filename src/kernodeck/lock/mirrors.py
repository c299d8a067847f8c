"""Mirrors for `kernodeck lock`: where pages are fetched from, never what a lock file says.

    mirrors = parse_mirrors(manifest, ["default=http://mirror.local/simple"])   # NAME=URL, checked
    routing, back = mirrored(routing, mirrors)      # the routing fetches from the mirrors
    unmirror(back)(url)                            # a URL under a mirror -> the declared index
    replace_all(text, back)                        # a note naming the declared indexes
    mirror_hint(failed, default, settings)         # a lock that cannot reach the default index

NAME is a declared index of repro.toml, `default` (the default index) or `pytorch` (the PyTorch
index base). The files written name the index as declared (credentials removed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from kernodeck.errors import UsageError
from kernodeck.support.urls import redact, strip_userinfo

if TYPE_CHECKING:
    from kernodeck.index.models import IndexSource
    from kernodeck.index.sources import PipSetting
    from kernodeck.manifest.schema import Manifest
    from kernodeck.resolve import Routing


def parse_mirrors(manifest: Manifest, specs: Sequence[str]) -> dict[str, str]:
    """`NAME=URL` items: NAME a declared index, `default` (the default index: pip's built-in one,
    or the declared one with `default = true`, under its own name) or `pytorch` (the PyTorch
    index base)."""
    known = {ix.name for ix in manifest.packages.index} | {"default", "pytorch"}
    # `default` is the default index whatever it is called: a declared one has its own name
    declared = next((ix.name for ix in manifest.packages.index if ix.default), "default")
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, url = spec.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise UsageError(
                f"mirror {redact(spec)!r} is not NAME=URL",
                hint="e.g. --mirror default=https://mirror.example/simple",
            )
        if name not in known:
            raise UsageError(
                f"mirror for unknown index {name!r}",
                context=[f"indexes: {', '.join(sorted(known))}"],
                hint="name an index of repro.toml, `default` or `pytorch`",
            )
        if not url.startswith(("http://", "https://", "file://")):
            raise UsageError(f"mirror url {redact(url)!r} must start with https://, http:// or file://")
        out[declared if name == "default" else name] = url
    return out


def mirrored(routing: Routing, mirrors: Mapping[str, str]) -> tuple[Routing, list[tuple[str, str]]]:
    """The routing with mirrored URLs, and (mirror URL, declared URL) pairs to map back."""
    back: list[tuple[str, str]] = []

    def swap(src: IndexSource) -> IndexSource:
        url = mirrors.get(src.name)
        if url is None:
            return src
        back.append((url, src.url))
        return dataclasses.replace(src, url=url)

    base = routing.pytorch_base
    if "pytorch" in mirrors:
        back.append((mirrors["pytorch"], base))
        base = mirrors["pytorch"]
    result = dataclasses.replace(
        routing,
        defaults=tuple(swap(s) for s in routing.defaults),
        pinned={k: swap(s) for k, s in routing.pinned.items()},
        pytorch_base=base,
    )
    return result, back


def unmirror(back: Sequence[tuple[str, str]]) -> Callable[[str], str]:
    """Map a URL under a mirror back to the declared index (longest mirror first)."""
    pairs = sorted(((m.rstrip("/"), d.rstrip("/")) for m, d in back), key=lambda p: -len(p[0]))

    def declared(url: str) -> str:
        for m, d in pairs:
            if url == m or url.startswith(m + "/"):
                return d + url[len(m) :]
        return url

    return declared


def replace_all(text: str, back: Sequence[tuple[str, str]]) -> str:
    """`text` naming the declared indexes instead of their mirrors (what a file may say)."""
    for m, d in sorted(back, key=lambda p: -len(p[0])):
        text = text.replace(m.rstrip("/"), strip_userinfo(d).rstrip("/"))
    return text


def mirror_hint(failed_index: str, default_index: str, settings: Sequence[PipSetting]) -> str | None:
    """When the default index could not be read and the locker's pip reads another index (a
    company's mirror, as a rule, where the public index is out of reach): how to lock through
    it. None otherwise."""
    if failed_index.rstrip("/") != strip_userinfo(default_index).rstrip("/"):
        return None
    other = next((s for s in settings if s.name == "index-url"), None)
    if other is None:
        return None
    default = strip_userinfo(default_index)
    # from the environment, the variable itself: the shell gives the URL with its credentials
    url = f'"${other.where}"' if other.where.startswith("PIP_") else other.value
    return (
        f"this machine's pip reads {other.value} ({other.where}): if that mirrors {default}, lock "
        f"through it with `kernodeck lock --mirror default={url}` (the files still name {default})"
    )
