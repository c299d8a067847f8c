"""Index URLs: the default index from pip's configuration, ${VAR} credentials, and redaction.

Credentials never leave memory: `expand()` resolves placeholders into a `ResolvedUrl` whose `url`
has no user-info and whose `auth` is kept apart, and remembers every expanded value with
`kernodeck.support.urls.remember_secret` so that `redact()`/`conceal()` put its `${NAME}` back in whatever
is written or printed. `ResolvedUrl.public` is the URL as written (placeholders in place): the
client keys caches and builds page and file URLs with it, and expands the placeholders of a
source only in requests to that source's own scheme and host (`ResolvedUrl.for_request`).
"""

from __future__ import annotations

import functools
import json
import netrc
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from kernodeck.errors import IndexError_, UsageError
from kernodeck.support.urls import redact, remember_secret

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MissingCredential(UsageError):
    """An index URL names an environment variable that is not set."""


@dataclass(frozen=True)
class ResolvedUrl:
    """An index URL ready for requests: no user-info in `url`; `auth` only in memory."""

    url: str = field(repr=False)
    auth: tuple[str, str] | None = field(default=None, repr=False)
    variables: tuple[str, ...] = ()  # the placeholder names it used, for hints
    public: str = ""  # the URL without user-info, placeholders not expanded
    values: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # (name, value) expanded

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc.lower()

    @property
    def public_origin(self) -> str:
        p = urlsplit(self.public or self.url)
        return f"{p.scheme}://{p.netloc}".lower()

    def for_request(self, url: str) -> str | None:
        """`url` (public form) with this source's placeholders expanded, when it is on this
        source's own scheme and host; None otherwise (its values go nowhere else)."""
        if not self.values:
            return None
        p = urlsplit(url)
        if f"{p.scheme}://{p.netloc}".lower() != self.public_origin:
            return None
        for name, value in self.values:
            url = url.replace(f"${{{name}}}", value)
        return url


def expand(url: str, *, env: dict[str, str] | None = None) -> ResolvedUrl:
    """Expand ${VAR} placeholders from the environment and split off credentials."""
    environ = os.environ if env is None else env
    names = tuple(_PLACEHOLDER.findall(url))
    missing = [n for n in names if n not in environ]
    if missing:
        raise MissingCredential(
            f"index url {redact(url)} needs the environment variable{'s' if len(missing) > 1 else ''} "
            + ", ".join(missing),
            hint="set "
            + " and ".join(missing)
            + " before running kernodeck; values are never written anywhere",
        )

    for n in names:
        remember_secret(n, environ[n])  # from now on every message and cache key conceals it

    def sub(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: environ[m.group(1)], text)

    # Split the user-info off before expanding, so a value holding '@', '/' or '#' stays whole.
    parts = urlsplit(url)
    auth: tuple[str, str] | None = None
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user, _, password = userinfo.partition(":")
        auth = (sub(unquote(user)), sub(unquote(password)))
    public = parts._replace(netloc=netloc).geturl()
    expanded = sub(public)
    used = tuple(dict.fromkeys(n for n in _PLACEHOLDER.findall(public)))
    return ResolvedUrl(
        url=expanded,
        auth=auth,
        variables=names,
        public=public,
        values=tuple((n, environ[n]) for n in used),
    )


@functools.lru_cache(maxsize=64)
def _netrc_entries(path: str) -> dict[str, tuple[str, str]]:
    try:
        rc = netrc.netrc(path)
    except (OSError, netrc.NetrcParseError):
        return {}
    out: dict[str, tuple[str, str]] = {}
    for host, (login, _account, password) in rc.hosts.items():
        out[host.lower()] = (login or "", password or "")
    return out


def netrc_auth(host: str) -> tuple[str, str] | None:
    """Credentials for `host` (no port) from $NETRC or ~/.netrc, if any."""
    path = os.environ.get("NETRC") or str(Path.home() / ".netrc")
    if not os.path.isfile(path):
        return None
    return _netrc_entries(path).get(host.lower().rsplit(":", 1)[0])


_PIP_PROBE = r"""
def probe():
    out = {}
    try:
        from pip._internal.configuration import Configuration
        c = Configuration(isolated=False)
        c.load()
        for key in ("install.index-url", "global.index-url", ":env:.index-url"):
            try:
                value = c.get_value(key)
            except Exception:
                continue
            if value:
                out["config"] = str(value)
                break
    except Exception as e:
        out["config_error"] = str(e)
    try:
        import os
        from pip._internal.configuration import Configuration
        c = Configuration(isolated=False)
        c.load()
        found = {}
        for name in ("index-url", "extra-index-url", "find-links"):
            for section in (":env:", "global", "install", "download"):
                try:
                    value = c.get_value(section + "." + name)
                except Exception:
                    continue
                if value:
                    where = "PIP_" + name.upper().replace("-", "_") if section == ":env:" else "pip config " + section + "." + name
                    found.setdefault(name, []).append([where, str(value)])
        out["settings"] = found
    except Exception as e:
        out["settings_error"] = str(e)
    try:
        from pip._internal.models.index import PyPI
        out["default"] = PyPI.simple_url
    except Exception as e:
        out["default_error"] = str(e)
    return out
"""


_INDEX_KEYS = ("index-url", "extra-index-url", "find-links")


@functools.lru_cache(maxsize=1)
def _pip_index_settings(python: str) -> dict[str, Any]:
    """pip's index settings and built-in default index, as `python`'s pip reads them. For this
    interpreter they are read without importing pip (importing pip's configuration costs more
    than the rest of a replayed lock): its files by `kernodeck.handover.installer_env.pip_config_values`,
    its default from pip's own index module alone. Another interpreter is asked in a subprocess
    running `_PIP_PROBE`, which reads them with pip itself; tests check both agree."""
    if python == sys.executable:
        return {**_pip_settings_here(), **_pip_default_here()}
    data = _pip_probe_subprocess(python)
    return dict(data) if isinstance(data, dict) else {}


def _pip_settings_here() -> dict[str, Any]:
    """This interpreter's pip index settings ("config", "settings"), without its default."""
    from kernodeck.handover.installer_env import pip_config_values

    values = pip_config_values(os.environ, prefix=sys.prefix)
    out: dict[str, Any] = {}
    for key in ("install.index-url", "global.index-url", ":env:.index-url"):
        section, _, name = key.partition(".")
        setting = values.get(section, {}).get(name)
        if setting is not None and setting.value:
            out["config"] = setting.value
            break
    found: dict[str, list[list[str]]] = {}
    for name in _INDEX_KEYS:
        for section in (":env:", "global", "install", "download"):
            setting = values.get(section, {}).get(name)
            if setting is not None and setting.value:
                where = (
                    "PIP_" + name.upper().replace("-", "_")
                    if section == ":env:"
                    else f"pip config {section}.{name}"
                )
                found.setdefault(name, []).append([where, setting.value])
    out["settings"] = found
    return out


def _pip_default_here() -> dict[str, Any]:
    """This interpreter's pip's built-in default index: {"default": url} or {"default_error": why}."""
    default = _pip_builtin_default()
    if default:
        return {"default": default}
    namespace: dict[str, Any] = {}
    exec(_PIP_PROBE, namespace)  # pip's index module did not load alone: ask pip itself
    probed = namespace["probe"]()
    if "default" in probed:
        return {"default": probed["default"]}
    return {"default_error": probed.get("default_error", "pip is not importable")}


def _pip_builtin_default() -> str | None:
    """PyPI's simple URL from pip's `_internal/models/index.py`, run on its own: the module needs
    only urllib, while importing it through pip loads pip's package first. None when this pip has
    no such module or it does not define it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pip")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(next(iter(spec.submodule_search_locations)), "_internal", "models", "index.py")
    namespace: dict[str, Any] = {"__name__": "kernodeck_pip_index", "__file__": path}
    try:
        with open(path, encoding="utf-8") as f:
            exec(compile(f.read(), path, "exec"), namespace)
        url = namespace["PyPI"].simple_url
    except Exception:  # any pip layout this reading does not know: pip itself is asked
        return None
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def _pip_probe_subprocess(python: str) -> Any:
    try:
        proc = subprocess.run(
            [python, "-c", _PIP_PROBE + "\nimport json\nprint(json.dumps(probe()))\n"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        data = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        data = {}
    return data


def builtin_index_url(*, python: str | None = None) -> str:
    """pip's own built-in default index (PyPI), read from pip at run time: never the locker's
    pip configuration or PIP_INDEX_URL, so every machine writes the same URL."""
    builtin = _pip_index_settings(python or sys.executable).get("default")
    if isinstance(builtin, str) and builtin:
        return builtin
    raise IndexError_(
        "cannot tell pip's built-in default index: pip is not importable by " + (python or sys.executable),
        hint="install pip, or declare the default index in repro.toml: [[packages.index]] with a url",
    )


@dataclass(frozen=True)
class PipSetting:
    """An index setting of the locker's pip (environment or configuration files)."""

    name: str  # "index-url" | "extra-index-url" | "find-links"
    where: str  # "PIP_INDEX_URL" or "pip config global.index-url"
    value: str  # credentials removed


def locker_pip_settings(*, python: str | None = None) -> list[PipSetting]:
    """The locker's pip settings that a lock does not use: extra-index-url, find-links and an
    index-url other than pip's built-in default (environment first, then configuration)."""
    python = python or sys.executable
    # pip's default is read only to leave out an index-url equal to it (most locks have none)
    data = _pip_settings_here() if python == sys.executable else _pip_index_settings(python)
    found = data.get("settings")
    out: list[PipSetting] = []
    if not isinstance(found, dict):
        return out
    for name in ("index-url", "extra-index-url", "find-links"):
        for where, value in found.get(name, []):
            for v in str(value).split():
                if name == "index-url" and v.rstrip("/") == str(
                    _pip_index_settings(python).get("default") or ""
                ).rstrip("/"):
                    continue
                out.append(PipSetting(name, str(where), redact(v)))
    return out


def default_index_url(*, python: str | None = None) -> str:
    """The index pip would use: $PIP_INDEX_URL, else pip's configuration files (honouring
    $PIP_CONFIG_FILE), else pip's own built-in default, read from pip at run time."""
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env
    settings = _pip_index_settings(python or sys.executable)
    configured = settings.get("config")
    if isinstance(configured, str) and configured:
        return configured
    builtin = settings.get("default")
    if isinstance(builtin, str) and builtin:
        return builtin
    raise IndexError_(
        "cannot tell which index pip uses: pip is not importable by " + (python or sys.executable),
        hint="set PIP_INDEX_URL, or give the default [[packages.index]] a url",
    )
