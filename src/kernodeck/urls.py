"""Credentials in URLs: the one place that knows how to take them out.

`strip_userinfo(url)` drops the user-info of one URL (keeping `${VAR}` placeholders when asked,
since pip and uv expand those themselves); `redact(text)` hides the user-info of every URL inside
a message. Index credentials are expanded only in memory (`kernodeck.index.sources.expand`);
everything written or printed goes through these functions.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

#: One `${NAME}` placeholder.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: The user-info of a URL inside a longer text.
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@'\"<>]+)@")

REDACTED_USERINFO = "***"


def is_placeholder_userinfo(userinfo: str) -> bool:
    """`${USER}` or `${USER}:${TOKEN}`: names of variables, no value."""
    pieces = [p for p in userinfo.split(":") if p]
    return bool(pieces) and all(PLACEHOLDER.fullmatch(p) for p in pieces)


def strip_userinfo(url: str, *, keep_placeholders: bool = False) -> str:
    """`url` without `user:password@`; with `keep_placeholders`, user-info made only of
    `${VAR}` placeholders stays (it names variables, not values)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    if keep_placeholders and is_placeholder_userinfo(userinfo):
        return url
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def redact(text: str) -> str:
    """`text` with the user-info of every URL in it replaced by '***' (placeholders kept)."""

    def sub(m: re.Match[str]) -> str:
        if is_placeholder_userinfo(m["userinfo"]):
            return m[0]
        return f"{m['scheme']}{REDACTED_USERINFO}@"

    return URL_USERINFO.sub(sub, text)
