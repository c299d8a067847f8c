"""Which parts of the HTTP stack the `kernodeck` process imports: HTTP/2 only when asked for
(`KERNODECK_HTTP2`), and never what a synchronous command-line client does not run.

A module set to None in `sys.modules` is "not importable": httpx and httpcore import these inside
`try: ... except ImportError` and go on without them. Only the `kernodeck` process itself does this
(`kernodeck.cli.run`), never a program that imports kernodeck."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from kernodeck.support.envvars import HTTP2

HTTP2_VARIABLE = HTTP2.name

#: httpx's own command line (rich's syntax highlighting, pygments) and httpcore's async backends:
#: every request of this process is synchronous, made by kernodeck.
_NEVER_RUN = ("httpx._main", "anyio", "trio")
#: httpcore's HTTP/2 connection (h2, hpack): imported only when HTTP/2 is asked for.
_HTTP2 = ("httpcore._sync.http2", "httpcore._async.http2")


def http2_asked(environ: Mapping[str, str] | None = None) -> bool:
    """Whether `KERNODECK_HTTP2` asks for HTTP/2 (`1`, `true`, `yes`, `on`)."""
    return HTTP2.flag(environ)


def keep_unused_out(environ: Mapping[str, str] | None = None) -> None:
    """Mark the modules this process never runs as not importable, before httpx is imported
    (25-60 ms of imports in a command that reads an index)."""
    if "httpx" in sys.modules or "httpcore" in sys.modules:
        return
    for name in _NEVER_RUN if http2_asked(environ) else _NEVER_RUN + _HTTP2:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: "not importable"


def let_back() -> None:
    """Make the modules `keep_unused_out` marked importable again: a library the command loads on request
    (an experiment tracker's client) may run them. Modules already imported are left as they are."""
    for name in _NEVER_RUN + _HTTP2:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
