"""The environment and the extra arguments of every installer run Kernodeck starts: the one owner.

An installer run (`pip install` or `uv pip install` in rebuild, and the `pip check` / `pip freeze`
that follow it) must install exactly what the lock says, and must still reach the network the way
the machine it runs on needs. The run is therefore isolated from the user's configuration (pip's
`--isolated`, `PIP_CONFIG_FILE=os.devnull`, uv's `--no-config`), and what the machine needs to reach
the network is carried over explicitly:

- **CA bundles** from `PIP_CERT`, pip's `cert` setting, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`,
  `SSL_CERT_FILE` and `SSL_CERT_DIR` (the first that names an existing path, in that order). A fresh
  venv's pip trusts its own CA bundle and ignores `SSL_CERT_FILE`, and `--isolated` makes it ignore
  `PIP_CERT`, so pip gets the bundle as `--cert`; uv gets it as `SSL_CERT_FILE` (or `SSL_CERT_DIR`).
- **Client certificates** from `PIP_CLIENT_CERT` or pip's `client-cert`: pip's `--client-cert`,
  uv's `SSL_CLIENT_CERT`.
- **Trusted hosts** from `PIP_TRUSTED_HOST` or pip's `trusted-host`: pip's `--trusted-host`,
  uv's `UV_INSECURE_HOST`.
- **Proxies**: `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` (either case) pass through; pip's
  `proxy` setting (or `PIP_PROXY`) becomes pip's `--proxy`, and `HTTPS_PROXY`/`HTTP_PROXY` for uv
  when those are not set already.
- **Patience**: `PIP_DEFAULT_TIMEOUT`/`timeout` and `PIP_RETRIES`/`retries` become `--timeout` and
  `--retries`, 15 s and 1 retry when unset, so an unreachable index fails within a minute (uv
  reads `UV_HTTP_TIMEOUT`, passed through).

Everything that changes *what* gets installed is dropped: other indexes, find-links, constraints,
`no-binary`/`only-binary`, pre-releases, the user site, uv's index and resolution settings
(`DROPPED`, and every other `PIP_*`/`UV_*` variable, since the environment is built from an
allow-list). The lock names its index itself (`--index-url` in the requirements file).

pip's configuration is read the way pip reads it (`pip_config_files`): the global files, the user
files (unless `PIP_CONFIG_FILE` names an existing file), the site file of the active environment,
then `PIP_CONFIG_FILE` (`os.devnull` there turns every file off); later files win, and, as in
pip's option parser, `[install]` in any file wins over `[global]` in any file.

Every function takes the environment as a mapping, so the rules are testable without touching
`os.environ`; only `pip_config_values` reads files.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kernodeck.manifest.schema import Manifest

Installer = Literal["pip", "uv"]

#: What every process needs to run, whatever it does.
BASICS: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TEMP",
    "TMP",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "COMSPEC",
    "PATHEXT",
)

#: Proxies, in both spellings (requests and uv read either).
PROXY_VARIABLES: tuple[str, ...] = tuple(
    v for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY") for v in (name, name.lower())
)

#: How the machine reaches the network: passed through unchanged.
NETWORK_VARIABLES: tuple[str, ...] = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "SSL_CLIENT_CERT",
    "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS",
    "UV_HTTP_TIMEOUT",
    "UV_CONCURRENT_DOWNLOADS",
    "NETRC",
    *PROXY_VARIABLES,
)

#: Variables that would change what gets installed (or where from): never passed to an installer.
#: Every other PIP_*/UV_* variable is dropped too (the environment is an allow-list); these are the
#: ones worth naming in a report.
DROPPED: tuple[str, ...] = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_NO_INDEX",
    "PIP_CONSTRAINT",
    "PIP_REQUIREMENT",
    "PIP_NO_BINARY",
    "PIP_ONLY_BINARY",
    "PIP_PRE",
    "PIP_USER",
    "PIP_PREFIX",
    "PIP_TARGET",
    "PIP_ROOT",
    "PIP_UPGRADE",
    "PIP_NO_DEPS",
    "PIP_IGNORE_INSTALLED",
    "PIP_PLATFORM",
    "PIP_PYTHON_VERSION",
    "PIP_IMPLEMENTATION",
    "PIP_ABI",
    "PIP_EXTRA_INDEX",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_NO_INDEX",
    "UV_CONSTRAINT",
    "UV_OVERRIDE",
    "UV_BUILD_CONSTRAINT",
    "UV_INDEX_STRATEGY",
    "UV_PRERELEASE",
    "UV_RESOLUTION",
    "UV_NO_BINARY",
    "UV_NO_BUILD",
    "UV_EXCLUDE_NEWER",
    "UV_PYTHON",
    "UV_SYSTEM_PYTHON",
    "UV_BREAK_SYSTEM_PACKAGES",
    "UV_TORCH_BACKEND",
    "PYTHONPATH",
    "PYTHONUSERBASE",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
)

#: Fixed settings of every installer run: no configuration, no questions, no user site.
ISOLATION: dict[str, str] = {
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_NO_INPUT": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PYTHONNOUSERSITE": "1",
    "UV_NO_CONFIG": "1",
}

#: pip settings (as in its configuration files) that concern only how the network is reached.
PIP_NETWORK_KEYS: tuple[str, ...] = ("cert", "client-cert", "trusted-host", "proxy", "timeout", "retries")

_CA_ENV_ORDER: tuple[str, ...] = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")


@dataclass(frozen=True)
class Setting:
    """One value and where it came from ("PIP_CERT", "pip config /etc/pip.conf [global] cert")."""

    value: str
    source: str


@dataclass(frozen=True)
class NetworkSettings:
    """What an installer needs to reach the network, each with its source."""

    ca: Setting | None = None
    client_cert: Setting | None = None
    trusted_hosts: tuple[Setting, ...] = ()
    proxy: Setting | None = None
    timeout: Setting | None = None
    retries: Setting | None = None
    #: Candidates that were skipped, e.g. "SSL_CERT_FILE=/missing.pem: no such file".
    ignored: tuple[str, ...] = ()

    def describe(self) -> dict[str, str]:
        """Setting name -> source, for a report (sources only: values may be private paths)."""
        out: dict[str, str] = {}
        if self.ca:
            out["ca"] = self.ca.source
        if self.client_cert:
            out["client-cert"] = self.client_cert.source
        if self.trusted_hosts:
            out["trusted-host"] = ", ".join(sorted({t.source for t in self.trusted_hosts}))
        if self.proxy:
            out["proxy"] = self.proxy.source
        if self.timeout:
            out["timeout"] = self.timeout.source
        if self.retries:
            out["retries"] = self.retries.source
        return out


# --- pip's configuration -----------------------------------------------------------------------


def pip_config_files(
    environ: Mapping[str, str],
    *,
    platform: str = sys.platform,
    prefix: str = sys.prefix,
    global_files: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """The configuration files pip reads, as (kind, path), in the order pip applies them (later
    wins): "global", "user" (skipped when PIP_CONFIG_FILE names an existing file), "site"
    (`prefix`: the active environment's), "env" (PIP_CONFIG_FILE). Empty when PIP_CONFIG_FILE is
    os.devnull: pip then reads no file at all. `global_files` replaces the system-wide files
    (tests)."""
    env_file = environ.get("PIP_CONFIG_FILE")
    if env_file is not None and env_file in (os.devnull, "/dev/null", "nul", "NUL"):
        return []
    windows = platform.startswith("win")
    base = "pip.ini" if windows else "pip.conf"
    home = environ.get("HOME") or environ.get("USERPROFILE") or os.path.expanduser("~")
    out: list[tuple[str, str]] = []
    if global_files is not None:
        out += [("global", f) for f in global_files]
    elif windows:
        program_data = environ.get("PROGRAMDATA") or environ.get("ALLUSERSPROFILE") or r"C:\ProgramData"
        out.append(("global", os.path.join(program_data, "pip", base)))
    elif platform == "darwin":
        out.append(("global", os.path.join("/Library/Application Support/pip", base)))
    else:
        xdg_dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
        out += [("global", os.path.join(d, "pip", base)) for d in xdg_dirs.split(os.pathsep) if d]
        out.append(("global", os.path.join("/etc", base)))
    if not (env_file and os.path.exists(env_file)):
        out.append(("user", os.path.join(home, "pip" if windows else ".pip", base)))
        if windows:
            appdata = environ.get("APPDATA") or os.path.join(home, "AppData", "Roaming")
            out.append(("user", os.path.join(appdata, "pip", base)))
        elif platform == "darwin":
            mac = os.path.join(home, "Library", "Application Support", "pip")
            user_dir = mac if os.path.isdir(mac) else os.path.join(home, ".config", "pip")
            out.append(("user", os.path.join(user_dir, base)))
        else:
            xdg_home = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
            out.append(("user", os.path.join(xdg_home, "pip", base)))
    out.append(("site", os.path.join(prefix, base)))
    if env_file:
        out.append(("env", env_file))
    return out


def _pip_key(name: str) -> str:
    """A setting's name as pip normalises it (file keys and PIP_* variables alike)."""
    return name.strip().lower().replace("_", "-").removeprefix("--")


def pip_config_values(
    environ: Mapping[str, str],
    *,
    platform: str = sys.platform,
    prefix: str | None = None,
    global_files: Sequence[str] | None = None,
) -> dict[str, dict[str, Setting]]:
    """Every setting of pip's configuration files, as pip's `Configuration.load()` merges them:
    section -> key -> the value of the last file that sets it (later files win; files in
    `pip_config_files` order), keys normalised as pip does ("index_url" is "index-url"). The
    PIP_* variables are section ":env:". `prefix` is the environment whose site file counts:
    default the activated VIRTUAL_ENV, else this interpreter's. Unreadable files are skipped, like
    pip's own missing files (pip would stop on a malformed one; Kernodeck must not)."""
    site = prefix if prefix is not None else (environ.get("VIRTUAL_ENV") or sys.prefix)
    found: dict[str, dict[str, Setting]] = {}
    for _kind, path in pip_config_files(environ, platform=platform, prefix=site, global_files=global_files):
        if not os.path.isfile(path):
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        for section in parser.sections():
            for raw_key, value in parser.items(section):
                key = _pip_key(raw_key)
                found.setdefault(section, {})[key] = Setting(value, f"pip config {path} [{section}] {key}")
    env = found.setdefault(":env:", {})
    for name, value in environ.items():
        if name.startswith("PIP_") and name[4:].lower() not in ("version", "help"):
            env[_pip_key(name[4:])] = Setting(value, name)
    return found


def read_pip_config(
    environ: Mapping[str, str],
    *,
    platform: str = sys.platform,
    prefix: str | None = None,
    keys: Sequence[str] = PIP_NETWORK_KEYS,
    global_files: Sequence[str] | None = None,
) -> dict[str, Setting]:
    """The values of `keys` in pip's configuration files for `pip install` (the `[install]`
    section over `[global]`, later files over earlier ones; see `pip_config_values`)."""
    values = pip_config_values(environ, platform=platform, prefix=prefix, global_files=global_files)
    found: dict[str, Setting] = {}
    for section in ("global", "install"):
        for key, setting in values.get(section, {}).items():
            if key in keys and setting.value.strip():
                found[key] = Setting(setting.value.strip(), setting.source)
    return found


# --- the settings, the environment, the arguments ----------------------------------------------


def _exists(path: str) -> bool:
    return os.path.exists(path)


def network_settings(
    environ: Mapping[str, str],
    *,
    pip_config: Mapping[str, Setting] | None = None,
    exists: Callable[[str], bool] = _exists,
) -> NetworkSettings:
    """What the user's own pip would use to reach the network, from `environ` and pip's
    configuration (`pip_config`: default read with `read_pip_config(environ)`).

    pip's order: its own variables (PIP_CERT, ...) over its configuration files. The CA bundle then
    falls back to REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE and SSL_CERT_DIR, the first
    that exists (a path that does not exist is skipped and listed in `ignored`)."""
    config = read_pip_config(environ) if pip_config is None else pip_config
    ignored: list[str] = []

    def pick(env_name: str, key: str) -> Setting | None:
        value = environ.get(env_name, "").strip()
        if value:
            return Setting(value, env_name)
        return config.get(key)

    def existing(s: Setting | None, what: str) -> Setting | None:
        if s is None:
            return None
        if exists(s.value):
            return s
        ignored.append(f"{s.source}: {what} {s.value} does not exist")
        return None

    ca = existing(pick("PIP_CERT", "cert"), "CA bundle")
    if ca is None:
        for name in _CA_ENV_ORDER:
            value = environ.get(name, "").strip()
            if value:
                ca = existing(Setting(value, name), "CA bundle")
                if ca is not None:
                    break
    client = existing(pick("PIP_CLIENT_CERT", "client-cert"), "client certificate")
    hosts: list[Setting] = []
    trusted = pick("PIP_TRUSTED_HOST", "trusted-host")
    if trusted is not None:
        hosts = [Setting(h, trusted.source) for h in dict.fromkeys(trusted.value.split())]
    return NetworkSettings(
        ca=ca,
        client_cert=client,
        trusted_hosts=tuple(hosts),
        proxy=pick("PIP_PROXY", "proxy"),
        timeout=pick("PIP_DEFAULT_TIMEOUT", "timeout") or pick("PIP_TIMEOUT", "timeout"),
        retries=pick("PIP_RETRIES", "retries"),
        ignored=tuple(ignored),
    )


def dropped_variables(environ: Mapping[str, str], keep: Iterable[str] = ()) -> list[str]:
    """The variables of `environ` that would change what gets installed and are therefore not
    passed on (named in DROPPED, or any other PIP_*/UV_* variable not kept), sorted."""
    kept = set(keep) - set(DROPPED)
    passed = set(ISOLATION) | set(NETWORK_VARIABLES)
    out = []
    for name in environ:
        if name in kept or name in passed:
            continue
        if name in DROPPED or name.startswith(("PIP_", "UV_")):
            out.append(name)
    return sorted(out)


@dataclass(frozen=True)
class InstallerEnvironment:
    """The environment of an installer run and the arguments to add to `pip install` / `uv pip install`."""

    env: dict[str, str]
    pip_args: list[str] = field(default_factory=list)
    uv_args: list[str] = field(default_factory=list)
    settings: NetworkSettings = field(default_factory=NetworkSettings)
    dropped: list[str] = field(default_factory=list)

    def args(self, installer: Installer) -> list[str]:
        return list(self.uv_args if installer == "uv" else self.pip_args)


#: pip's `--timeout` (seconds per read) and `--retries` when neither the environment nor pip's
#: configuration sets them.
PIP_TIMEOUT = "15"
PIP_RETRIES = "1"


def installer_environment(
    environ: Mapping[str, str],
    keep: Iterable[str] = (),
    *,
    installer: Installer = "pip",
    settings: NetworkSettings | None = None,
) -> InstallerEnvironment:
    """The environment (and the extra install arguments) of an installer run: the basics, the
    network variables, the variables named in `keep` (the manifest's credentials; never one that
    changes what gets installed), the isolation settings, and the network settings translated for
    `installer` (see the module docstring)."""
    net = network_settings(environ) if settings is None else settings
    keep_names = [k for k in keep if k not in DROPPED and k not in ISOLATION]
    names = dict.fromkeys((*BASICS, *NETWORK_VARIABLES, *keep_names))
    env = {n: environ[n] for n in names if n in environ}
    for name in _CA_ENV_ORDER:  # a CA path that does not exist only breaks TLS
        if name in env and not os.path.exists(env[name]):
            del env[name]
    env.update(ISOLATION)

    pip_args: list[str] = []
    if net.ca is not None:
        pip_args += ["--cert", net.ca.value]
    if net.client_cert is not None:
        pip_args += ["--client-cert", net.client_cert.value]
    for host in net.trusted_hosts:
        pip_args += ["--trusted-host", host.value]
    if net.proxy is not None:
        pip_args += ["--proxy", net.proxy.value]
    # without a setting, pip's patience is bounded: an unreachable index fails in well under a
    # minute instead of five retries with back-off for every page (minutes)
    pip_args += ["--timeout", net.timeout.value if net.timeout is not None else PIP_TIMEOUT]
    pip_args += ["--retries", net.retries.value if net.retries is not None else PIP_RETRIES]

    if installer == "uv":
        if net.ca is not None:
            if os.path.isdir(net.ca.value):
                env.setdefault("SSL_CERT_DIR", net.ca.value)
            else:
                env["SSL_CERT_FILE"] = net.ca.value
        if net.client_cert is not None:
            env["SSL_CLIENT_CERT"] = net.client_cert.value
        if net.trusted_hosts:
            env["UV_INSECURE_HOST"] = " ".join(h.value for h in net.trusted_hosts)
        if net.proxy is not None:
            for name in ("HTTPS_PROXY", "HTTP_PROXY"):
                if name not in env and name.lower() not in env:
                    env[name] = net.proxy.value
        if net.timeout is not None and "UV_HTTP_TIMEOUT" not in env:
            env["UV_HTTP_TIMEOUT"] = net.timeout.value.split(".")[0] or "1"
    return InstallerEnvironment(
        env=env,
        pip_args=pip_args,
        uv_args=[],
        settings=net,
        dropped=dropped_variables(environ, keep_names),
    )


# --- mirrors (`kernodeck rebuild --mirror NAME=URL`) --------------------------------------------

#: The requirement-file options that name where packages come from.
_INDEX_OPTION = re.compile(
    r"^(?P<opt>\s*(?:--index-url|--extra-index-url|--find-links|-i|-f))(?P<sep>[ \t=]+)(?P<url>\S+)"
)


def mirror_swaps(manifest: Manifest, mirrors: Mapping[str, str], lock_text: str) -> list[tuple[str, str]]:
    """(URL as the lock file writes it, mirror URL) for `mirrors` as `lock.mirrors.parse_mirrors`
    returns them: a declared index's URL; `default` when no index is declared: the lock's own
    `--index-url`; `pytorch`: the PyTorch index base (each backend's index lies below it)."""
    from kernodeck.backends import PYTORCH_INDEX_BASE

    declared = {ix.name: ix.url for ix in manifest.packages.index if ix.url}
    swaps: list[tuple[str, str]] = []
    for name, url in mirrors.items():
        if name == "pytorch":
            swaps.append((PYTORCH_INDEX_BASE, url))
        elif name in declared:
            swaps.append((str(declared[name]), url))
        elif name == "default":
            first = next(
                (
                    m
                    for m in map(_INDEX_OPTION.match, lock_text.splitlines())
                    if m and m["opt"].strip() in ("--index-url", "-i")
                ),
                None,
            )
            if first is not None:
                swaps.append((first["url"], url))
    return swaps


def mirrored_requirements(text: str, swaps: Sequence[tuple[str, str]]) -> str:
    """The lock file's text with every index option under a declared URL pointing at its mirror
    (longest declared URL first); pins and hashes unchanged, so what gets installed does not."""
    pairs = sorted(((d.rstrip("/"), m.rstrip("/")) for d, m in swaps), key=lambda p: -len(p[0]))

    def swap(m: re.Match[str]) -> str:
        url = m["url"]
        for declared, mirror in pairs:
            if url.rstrip("/") == declared or url.startswith(declared + "/"):
                url = mirror + url[len(declared) :]
                break
        return f"{m['opt']}{m['sep']}{url}"

    return "\n".join(_INDEX_OPTION.sub(swap, line) for line in text.split("\n"))


# --- routing (packages taken only from an explicit index) ---------------------------------------


def explicit_routes(manifest: Manifest, lock_text: str) -> dict[str, str]:
    """Project name -> the one index its pin is installed from, for the pins of `lock_text` routed
    to an explicit index: the manifest's `[[packages.index]] packages` and `[packages] sources`,
    and the PyTorch family to the PyTorch index the lock names (`--extra-index-url` under the
    PyTorch base). Everything else comes from the lock's other indexes."""
    from packaging.utils import canonicalize_name

    from kernodeck.backends import PYTORCH_INDEX_BASE, TORCH_FAMILY

    by_name = {ix.name: ix.url for ix in manifest.packages.index if ix.url}
    routes: dict[str, str] = {
        canonicalize_name(p): str(ix.url) for ix in manifest.packages.index if ix.url for p in ix.packages
    }
    routes.update(
        {canonicalize_name(p): str(by_name[i]) for p, i in manifest.packages.sources.items() if i in by_name}
    )
    base = (manifest.packages.pytorch_index or PYTORCH_INDEX_BASE).rstrip("/")
    for m in map(_INDEX_OPTION.match, lock_text.splitlines()):
        if m and m["opt"].strip() == "--extra-index-url" and m["url"].startswith(base + "/"):
            routes.update({name: m["url"] for name in TORCH_FAMILY if name not in routes})
    return routes


def split_routed(text: str, routes: Mapping[str, str]) -> list[tuple[str | None, str]]:
    """The lock file as separate installs: one per explicit index (`--index-url` that index, only
    its pins), then the rest (the lock's own options without the extra indexes only routed pins
    use). Pins and hashes are the lock's; a lock without routed pins is one install (None, text)."""
    from packaging.utils import canonicalize_name

    head: list[str] = []
    blocks: list[tuple[str | None, list[str]]] = []
    for line in text.split("\n"):
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?", line)
        if pin:
            blocks.append((routes.get(canonicalize_name(pin.group(1))), [line]))
        elif blocks and (line.startswith((" ", "\t")) or not line.strip()):
            blocks[-1][1].append(line)
        else:
            head.append(line)
    primary = next(
        (m["url"] for m in map(_INDEX_OPTION.match, head) if m and m["opt"].strip() in ("--index-url", "-i")),
        None,
    )
    urls = list(dict.fromkeys(url for url, _ in blocks if url is not None and url != primary))
    if not urls or any(line.strip() == "--no-index" for line in head):
        return [(None, text)]
    blocks = [(None if url == primary else url, lines) for url, lines in blocks]
    options = [line for line in head if _INDEX_OPTION.match(line) is None]
    routed_only = set(urls)
    rest_head = [
        line
        for line in head
        if not (
            (m := _INDEX_OPTION.match(line))
            and m["opt"].strip() == "--extra-index-url"
            and m["url"] in routed_only
        )
    ]
    out: list[tuple[str | None, str]] = []
    for url in urls:
        body = [ln for u, lines in blocks if u == url for ln in lines]
        out.append((url, "\n".join([*options, f"--index-url {url}", *body]) + "\n"))
    rest = [ln for u, lines in blocks if u is None for ln in lines]
    if rest:
        out.append((None, "\n".join([*rest_head, *rest]) + "\n"))
    return out
