"""The real cause of a failed installer run, read from pip's or uv's output, with a hint that fits it.

pip reports most network failures as a consequence: a certificate the machine does not trust, a
refused connection or a 401 all end in "Could not find a version that satisfies the requirement
... / No matching distribution found", while the cause sits in an earlier warning (or, for HTTP
errors, only in `-vv` output). `installer_cause(output)` looks for the causes first, in this order:

    hash         THESE PACKAGES DO NOT MATCH THE HASHES / Hash mismatch
    missing-hash a pin without --hash in a --require-hashes run
    certificate  certificate verify failed / invalid peer certificate / other TLS errors
    proxy        cannot connect to (or through) the proxy, 407
    dns          the host name does not resolve
    connection   connection refused / reset / no route
    timeout      the index did not answer in time
    auth         HTTP 401 / 403
    no-wheel     the index has the version, but no wheel for this interpreter and platform
    not-found    the index does not serve the pinned version at all
    other        the installer's first error as it printed it (`first_error`)

and returns the cause's kind, a first error that names it (followed by what the installer then
concluded, when that differs), and a hint. Messages pass through `kernodeck.support.urls.redact`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernodeck.support.urls import redact

_BOX = re.compile(r"^[\s│├╰─▶×|`]+")


def first_error(output: str) -> str:
    """The first error an installer printed, with the lines that belong to it: pip's `ERROR:` line
    and its indented details (e.g. which package did not match which hash), or uv's `error:`/`×`
    block. Falls back to the last non-empty line."""
    lines = output.splitlines()
    start = None
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith(("ERROR:", "error:", "×")):
            start = i
            break
    if start is None:
        tail = [ln.strip() for ln in lines if ln.strip()]
        return tail[-1] if tail else "no output"
    head = lines[start].strip()
    for prefix in ("ERROR:", "error:", "×"):
        if head.startswith(prefix):
            head = head[len(prefix) :].strip()
            break
    if len(head) > 160 and ". " in head:  # pip's long advice after the first sentence
        head = head.split(". ", 1)[0]
    details: list[str] = []
    blank = 0
    for line in lines[start + 1 :]:
        if not line.strip():
            blank += 1
            if blank > 1 and details:
                break
            continue
        if not line[:1].isspace() and not _BOX.match(line):
            break
        blank = 0
        details.append(_BOX.sub("", line).strip())
        if len(details) >= 12:
            break
    text = head
    sep = ": "
    for d in details:
        d = " ".join(d.split())
        if not d:
            continue
        text += sep + d
        sep = " " if d.endswith(":") else "; "
    text = text.replace(":: ", ": ")
    return text if len(text) <= 1200 else text[:1197] + "..."


# The error a build backend ends with, inside the output pip or uv quote from it:
# `error: Multiple top-level packages discovered in a flat-layout: [...]`, `ModuleNotFoundError: ...`.
_BACKEND_ERROR = re.compile(r"^\s*(?:error|[A-Za-z_][\w.]*(?:Error|Exception)):\s+\S")
_INSTALLER_OWN = ("subprocess-exited-with-error", "metadata-generation-failed", "failed-wheel-build")


def backend_error(output: str) -> str | None:
    """The last error a build backend printed in an installer's output (what setuptools says
    went wrong, under pip's deprecation notices and `subprocess-exited-with-error`); None when
    there is none."""
    found = None
    for line in output.splitlines():
        text = line.strip().lstrip("│").strip()
        if _BACKEND_ERROR.match(text) and not any(own in text for own in _INSTALLER_OWN):
            found = text
    return found


@dataclass(frozen=True)
class InstallerCause:
    """Why an installer run failed: `kind` (see the module docstring), the step's first error, a hint."""

    kind: str
    error: str
    hint: str


_URL = re.compile(r"(?:https?|file)://[^\s'\")<>]+")
_OBJ = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>:?\s*")
_SSL_SUFFIX = re.compile(r"\s*\(_ssl\.c:\d+\)")

# (kind, pattern): the first kind with a matching line wins.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("hash", re.compile(r"DO NOT MATCH THE HASHES|Hash mismatch", re.I)),
    (
        "missing-hash",
        re.compile(r"Hashes are required in --require-hashes mode|missing hash|requires a hash", re.I),
    ),
    (
        "certificate",
        re.compile(
            r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|invalid peer certificate|"
            r"problem confirming the ssl certificate|SSLCertVerificationError|"
            r"self[- ]signed certificate|UnknownIssuer|certificate has expired|"
            r"Could not find a suitable TLS CA certificate bundle|SSLError|TLS handshake",
            re.I,
        ),
    ),
    (
        "proxy",
        re.compile(
            r"ProxyError|Cannot connect to proxy|tunnel error|Proxy Authentication Required|\b407\b.*proxy",
            re.I,
        ),
    ),
    (
        "dns",
        re.compile(
            r"Name or service not known|nodename nor servname|Temporary failure in name resolution|"
            r"getaddrinfo failed|dns error|failed to lookup address|No address associated with hostname",
            re.I,
        ),
    ),
    (
        "connection",
        re.compile(
            r"Connection refused|os error 111|Errno 111|actively refused|Connection reset|"
            r"No route to host|Network is unreachable|RemoteDisconnected",
            re.I,
        ),
    ),
    ("timeout", re.compile(r"Read timed out|ConnectTimeout|timed out|operation timed out", re.I)),
    (
        "auth",
        re.compile(
            r"\b40[13]\b.*(Unauthorized|Forbidden|Client Error)|(Unauthorized|Forbidden) for url|"
            r"lack of valid authentication credentials|\b40[13] (Unauthorized|Forbidden)",
            re.I,
        ),
    ),
    (
        "no-wheel",
        re.compile(
            r"none of the wheel's tags|is not a supported wheel on this platform|"
            r"has no wheels with a matching|no wheels? (are|is) available for|"
            r"only found wheels for",
            re.I,
        ),
    ),
    (
        "not-found",
        re.compile(
            r"No matching distribution found|Could not find a version that satisfies|"
            r"was not found in the package registry|not found in the package registry|No solution found",
            re.I,
        ),
    ),
)

_SUMMARY = {
    "certificate": "TLS certificate verification failed",
    "proxy": "could not connect through the proxy",
    "dns": "the index host name does not resolve",
    "connection": "could not connect to the index",
    "timeout": "the index did not answer in time",
    "auth": "the index refused the request",
    "no-wheel": "no wheel fits this interpreter and platform",
}


def _evidence(line: str, kind: str) -> str:
    s = _BOX.sub("", line).strip()
    for prefix in ("WARNING:", "ERROR:", "error:", "cause:", "hint:", "warning:"):
        if s.startswith(prefix):
            s = s[len(prefix) :].strip()
    s = _OBJ.sub("", s)
    if kind == "certificate":
        m = re.search(r"certificate verify failed:?\s*([^()'\"]*)", s, re.I)
        url = _URL.search(s)
        if m:
            reason = _SSL_SUFFIX.sub("", m.group(1)).strip(" :") or "certificate verify failed"
            s = f"certificate verify failed: {reason}" + (f" ({url.group(0).rstrip(':')})" if url else "")
    s = _SSL_SUFFIX.sub("", s)
    s = " ".join(s.split())
    return s if len(s) <= 400 else s[:397] + "..."


_LOOKING_IN = re.compile(r"^\s*Looking in (?:indexes|links):\s*(?P<urls>.*)$")
#: pip's retry warning ends with the path it was fetching: `...': /whl/cpu/torch/`
_RETRY_PATH = re.compile(r"Retrying \(.*:\s*(?P<path>/\S*)\s*$")
_REQUIREMENT = re.compile(
    r"(?:satisfies the requirement|distribution found for)\s+(?P<req>[A-Za-z0-9][^\s;(]*)"
)


def _indexes_named(lines: list[str]) -> list[str]:
    """The indexes pip says it looks in (`Looking in indexes: A, B`), in its order."""
    for line in lines:
        m = _LOOKING_IN.match(line)
        if m:
            return [u.strip() for u in m["urls"].split(",") if u.strip()]
    return []


def _context_url(lines: list[str], index: int) -> str | None:
    """The URL an evidence line is about: on the line; for pip's retry warning, the index named in
    `Looking in indexes` whose path the warning's path starts with (never merely the first index
    listed); or on the uv `Failed to fetch:` line above it."""
    m = _URL.search(lines[index])
    if m:
        return m.group(0).rstrip(":.,")
    retry = _RETRY_PATH.search(lines[index])
    if retry:
        from urllib.parse import urlsplit

        path = retry["path"]
        for url in sorted(_indexes_named(lines), key=len, reverse=True):
            if path.startswith(urlsplit(url).path.rstrip("/") + "/"):
                parts = urlsplit(url)
                return f"{parts.scheme}://{parts.netloc}{path}"
        return None
    for line in reversed(lines[max(0, index - 8) : index]):
        if _LOOKING_IN.match(line):
            continue
        m = _URL.search(line)
        if m:
            return m.group(0).rstrip(":.,")
    return None


def _wanted(lines: list[str]) -> str | None:
    """The requirement the installer could not satisfy, when it says so."""
    for line in lines:
        m = _REQUIREMENT.search(line)
        if m:
            return m["req"].rstrip(".,")
    return None


def _hint(kind: str, installer: str, requirements: str, platform: str, credentials: list[str]) -> str:
    creds = ", ".join(credentials)
    if kind == "hash":
        return (
            "an artifact on the index is not the one that was locked: find out why it changed before "
            f"re-locking (kernodeck lock --platform {platform})"
        )
    if kind == "missing-hash":
        return f"{requirements} has a pin without --hash; regenerate it with kernodeck lock"
    if kind == "certificate":
        if installer == "uv":
            return (
                "the index's certificate is not signed by a CA that uv trusts: give your network's CA "
                "bundle through SSL_CERT_FILE (or PIP_CERT / REQUESTS_CA_BUNDLE / pip's `cert`, which "
                "Kernodeck passes on), or set UV_SYSTEM_CERTS=1 to use the system store"
            )
        return (
            "the index's certificate is not signed by a CA that pip trusts (a TLS-inspecting proxy?): "
            "give your network's CA bundle through PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE or pip's "
            "`cert` setting; Kernodeck passes it on as --cert"
        )
    if kind == "proxy":
        return (
            "check HTTPS_PROXY / HTTP_PROXY / NO_PROXY (or pip's `proxy` setting): the proxy they name "
            "must be reachable from here, and its credentials valid"
        )
    if kind == "dns":
        return (
            "this machine cannot resolve the index's host: check the network, or set HTTPS_PROXY if "
            "the network only reaches out through a proxy"
        )
    if kind == "connection":
        return (
            "nothing answers at the index's address from here: check that the index in "
            f"{requirements} is reachable (a firewall or a proxy to set in HTTPS_PROXY?)"
        )
    if kind == "timeout":
        return "the index is slow or unreachable: retry, or raise PIP_DEFAULT_TIMEOUT / UV_HTTP_TIMEOUT"
    if kind == "auth":
        if creds:
            return (
                f"the index wants credentials: set {creds} (the variables the manifest names) in this "
                "environment, or put them in ~/.netrc"
            )
        return (
            "the index wants credentials: put them in ~/.netrc, or name them in the index URL as "
            "${VARIABLES} in the manifest and lock again"
        )
    if kind == "no-wheel":
        return (
            "the locked files are for another interpreter or platform: rebuild with the locked "
            f"platform's interpreter (--python), or lock this platform (kernodeck lock --platform {platform})"
        )
    if kind == "not-found":
        return (
            f"the index does not serve a file pinned in {requirements}: is it the index the lock was "
            "made from, and does it still carry that version?"
        )
    return "read the installer output in this step's details"


def installer_cause(
    output: str,
    *,
    installer: str = "pip",
    requirements: str = "the requirements file",
    platform: str = "PLATFORM",
    credentials: list[str] | None = None,
) -> InstallerCause:
    """The cause of a failed installer run (see the module docstring)."""
    lines = output.splitlines()
    final = redact(first_error(output))
    for kind, pattern in _PATTERNS:
        for i, line in enumerate(lines):
            if not pattern.search(line):
                continue
            hint = _hint(kind, installer, requirements, platform, credentials or [])
            if kind in ("hash", "missing-hash", "not-found"):
                return InstallerCause(kind, final, hint)
            evidence = _evidence(line, kind)
            if kind == "no-wheel":  # uv names the tags it found on a later line
                more = [_evidence(ln, kind) for ln in lines[i + 1 :] if pattern.search(ln)]
                evidence = "; ".join(dict.fromkeys([evidence, *more[:1]]))
            url = _context_url(lines, i)
            if url and url not in evidence:
                evidence += f" ({url})"
            wanted = _wanted(lines)
            error = f"{_SUMMARY[kind]}: {evidence}" + (f"; it could not get {wanted}" if wanted else "")
            if final and final not in error and not pattern.search(final):
                error += f" (then: {final})"
            error = redact(error)
            return InstallerCause(kind, error if len(error) <= 1200 else error[:1197] + "...", hint)
    return InstallerCause("other", final, _hint("other", installer, requirements, platform, []))
