"""Credentials and secrets in URLs and messages: the one place that knows how to take them out.

- `strip_userinfo(url)` drops the user-info of one URL (keeping `${VAR}` placeholders when asked,
  since pip and uv expand those themselves).
- `remember_secret(name, value)` is called for every `${NAME}` placeholder value expanded in memory
  (`kernodeck.index.sources.expand`); `conceal(text)` puts `${NAME}` back in place of every such
  value, so what is written or printed names the variable, never its value.
- `redact(text)` is what every message goes through: expanded values concealed, the user-info of
  every URL replaced by '***' (placeholders kept), the values of secret-shaped query parameters
  (`token=`, `key=`, `secret=`, `password=`, `sig=` ...) replaced by '***' (placeholders kept).
- `secret_query_params(url)` names the query parameters of a URL that hold a literal secret (for
  validation, which refuses them without echoing them).
"""

from __future__ import annotations

import re
import threading
from urllib.parse import parse_qsl, urlsplit, urlunsplit

#: One `${NAME}` placeholder.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: The user-info of a URL inside a longer text.
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@'\"<>]+)@")

REDACTED_USERINFO = "***"
REDACTED_VALUE = "***"

#: Query parameter names that carry secrets (matched as a part of the name, case-insensitively).
SECRET_PARAM_WORDS = (
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "pwd",
    "sig",
    "signature",
    "auth",
    "credential",
    "session",
)
_SECRET_NAME = "(?:" + "|".join(SECRET_PARAM_WORDS) + ")"
#: `name=value` in a query string whose name looks like it carries a secret.
_SECRET_PARAM = re.compile(
    r"(?P<head>[?&;][A-Za-z0-9_.\-]*" + _SECRET_NAME + r"[A-Za-z0-9_.\-]*=)(?P<value>[^&#\s'\"<>]+)",
    re.IGNORECASE,
)
_SECRET_NAME_RE = re.compile(_SECRET_NAME, re.IGNORECASE)

#: Values shorter than this are not concealed in messages (they would mangle every number in them).
MIN_CONCEALED = 4

_secrets: dict[str, str] = {}  # expanded value -> placeholder name
_secrets_lock = threading.Lock()


def remember_secret(name: str, value: str) -> None:
    """Register the expanded value of `${name}`: from now on `conceal`/`redact` hide it."""
    if len(value) < MIN_CONCEALED:
        return
    with _secrets_lock:
        _secrets.setdefault(value, name)


def conceal(text: str) -> str:
    """`text` with every remembered expanded value replaced by its `${NAME}` (longest first)."""
    with _secrets_lock:
        known = sorted(_secrets.items(), key=lambda kv: -len(kv[0]))
    for value, name in known:
        if value in text:
            text = text.replace(value, f"${{{name}}}")
    return text


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


def public_url(url: str) -> str:
    """The form of `url` that may be written or printed: no user-info, expanded values concealed."""
    return conceal(strip_userinfo(url))


def secret_query_params(url: str) -> list[str]:
    """Names of the query parameters of `url` that look secret and hold a literal value."""
    out = []
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if _SECRET_NAME_RE.search(name) and value and not PLACEHOLDER.fullmatch(value):
            out.append(name)
    return out


def redact(text: str) -> str:
    """`text` fit to print: expanded values concealed, user-info of every URL replaced by '***',
    values of secret-shaped query parameters replaced by '***' (placeholders kept)."""

    def userinfo(m: re.Match[str]) -> str:
        if is_placeholder_userinfo(m["userinfo"]):
            return m[0]
        return f"{m['scheme']}{REDACTED_USERINFO}@"

    def param(m: re.Match[str]) -> str:
        if PLACEHOLDER.fullmatch(m["value"]) or m["value"] == REDACTED_VALUE:
            return m[0]
        return m["head"] + REDACTED_VALUE

    text = conceal(text)
    text = URL_USERINFO.sub(userinfo, text)
    return _SECRET_PARAM.sub(param, text)
