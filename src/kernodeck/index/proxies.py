"""Which proxy a request to an index goes through, and where it was set: for error messages.

    proxy_for("https://idx.example/simple/x/", configured, os.environ)
        # ProxyInUse(url="http://***@proxy:3128", source="HTTPS_PROXY") | None

The index client (kernodeck.index.transport) takes pip's `proxy` setting (PIP_PROXY or pip's
configuration) when there is one, else lets httpx read HTTPS_PROXY / HTTP_PROXY / ALL_PROXY and
NO_PROXY from the environment. When a connection fails, the user has to know whether the index or
the proxy did not answer, and which setting named that proxy: this module answers with the same
rules, from the same inputs. Credentials in a proxy URL are never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from kernodeck.support.urls import redact

if TYPE_CHECKING:
    from kernodeck.handover.installer_env import Setting


@dataclass(frozen=True)
class ProxyInUse:
    url: str  # fit to print: user-info replaced by ***
    source: str  # "HTTPS_PROXY", "PIP_PROXY", "pip config /etc/pip.conf [global] proxy"

    def said(self) -> str:
        return f"through the proxy {self.url} (set by {self.source})"


def proxy_for(url: str, configured: Setting | None, environ: Mapping[str, str]) -> ProxyInUse | None:
    """The proxy a request to `url` goes through, or None for a direct connection."""
    if configured is not None:
        return ProxyInUse(_shown(configured.value), configured.source)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return None
    # lower-case names win over upper-case ones, as urllib (and so httpx) reads them
    found: dict[str, tuple[str, str]] = {}
    for name, value in environ.items():
        low = name.lower()
        if value and low.endswith("_proxy") and (low == name or low[:-6] not in found):
            found[low[:-6]] = (value, name)
    no_proxy = found.pop("no", ("", ""))[0]
    if _bypassed(parts.hostname or "", no_proxy):
        return None
    chosen = found.get(parts.scheme) or found.get("all")
    if chosen is None:
        return None
    value, name = chosen
    return ProxyInUse(_shown(value), name)


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether NO_PROXY sends `host` direct, as httpx reads it: `*` for every host, a name for
    itself and its subdomains, `.name` or `*.name` for its subdomains only, an address for itself."""
    host = host.lower().strip("[]")
    for entry in no_proxy.split(","):
        e = entry.strip().lower()
        if "://" in e:
            e = urlsplit(e).hostname or ""
        elif e.count(":") == 1:
            e = e.split(":")[0]  # host:port
        e = e.strip("[]")
        if e == "*":
            return True
        if not e or not host:
            continue
        if e.startswith(("*.", ".")):
            if host.endswith("." + e.lstrip("*.")):
                return True
        elif host == e.lstrip("*") or host.endswith("." + e.lstrip("*")):
            return True
    return False


def _shown(value: str) -> str:
    value = value.strip()
    return redact(value if "://" in value else f"http://{value}")
