"""Remove credentials and the author's host paths from text before it leaves the machine.

A `Scrubber` knows two kinds of things to hide:

- secret *values*: the values of environment variables whose names look like credentials
  (`*_TOKEN`, `*_KEY`, `*_SECRET`, `*_PASSWORD`, ...) and of the variables a manifest names as
  index credentials or data `access`; each occurrence becomes `<redacted:NAME>`;
- absolute *paths* of the author's machine (the project folder, the repository, the Python
  prefixes, the home directory, the temporary directory); each becomes a placeholder such as
  `<project>` or `<home>`.

Independently of what it knows, it rewrites patterns that carry credentials in any text: user-info
in URLs (`https://user:token@host` → `https://<redacted>@host`, `${VAR}` placeholders are kept),
`NAME_TOKEN=value` style assignments, `Authorization:` headers and well-known token formats.

`leaks(data)` says what a scrubbed output still contains, so a writer can refuse to write it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernodeck.gitstate import git_toplevel
from kernodeck.support.envvars import CACHE_DIR
from kernodeck.support.urls import URL_USERINFO

#: Environment variable names whose values are credentials.
SECRET_NAME = re.compile(
    r"^(?:[A-Za-z0-9]+_)*(?:TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS)$|_(?:KEY|PAT|AUTH)$",
    re.IGNORECASE,
)

_REDACTED = "<redacted>"
_PLACEHOLDER = re.compile(
    r"^(?:\$\{[A-Za-z_][A-Za-z0-9_]*\}|<[^<>]*>)(?::(?:\$\{[A-Za-z_][A-Za-z0-9_]*\}|<[^<>]*>))?$"
)

#: Names with "token" in the sense of a language model's unit, not a credential: special tokens
#: (`pad_token`, `eos_token`), counts and rates (`max_token`, `num_flops_per_token`).
_ML_TOKEN_NAME = (
    r"(?i:(?:[A-Za-z0-9]+_)*(?:pad|eos|bos|unk|sep|cls|mask|start|end|stop|image|img|audio|video"
    r"|special|added|per|max|min|num|n|total|next|prev|first|last|new|default)_token\b)"
)
_SECRET_WORD = (
    r"\b(?!"
    + _ML_TOKEN_NAME
    + r")(?i:(?:[A-Za-z0-9]+_)*(?:[A-Za-z0-9]*(?:TOKEN|SECRET|PASSWORD|PASSWD)|PASS|PWD|CREDENTIALS)"
    r"(?:_(?:VALUE|STR|STRING|TEXT))?"
    r"|[A-Za-z0-9_]*(?:api|access|secret|private)_?key)\b"
    r"|\b[A-Z0-9_]*_(?:KEY|PAT|AUTH)\b|\b[a-z0-9_]*_auth\b"
)
#: Words of an obvious stand-in (`"test"`, `"dummy"`, `your-api-key-here`, `[UNK]`, `********`):
#: test fixtures and documentation, not credentials.
_PLACEHOLDER_WORDS = (
    r"test|tests|testing|dummy|fake|mock|mocked|example|sample|placeholder|your|my|here|key|token"
    r"|secret|password|pass|api|value|foo|bar|baz|abc|xyz|redacted|changeme|change|me|insert|todo"
    r"|none|null|empty|invalid|not|set|unset|the|a|an|some|string|str|xxx+|x+"
)
_PLACEHOLDER_VALUE = (
    r"(?i:(?:" + _PLACEHOLDER_WORDS + r")(?:[-_ .]+(?:" + _PLACEHOLDER_WORDS + r"))*"
    r"|\[[A-Za-z_]+\]|[*xX.\u2022#-]{3,})"
)
#: A literal value after `NAME =` / `NAME:`: quoted (any non-empty text that is not a placeholder),
#: or bare when it cannot be a reference to something else: an identifier (`os.environ`,
#: `settings.SECRET`, `None`) is code, not a value, unless it holds a digit or a symbol; a bare
#: value is at least 6 characters (`6` in `per_token = 6 * n`, `**` in `**token:**` are not) and
#: not the first operand of arithmetic.
_LITERAL = (
    r"(?P<q>[\"'])(?!" + _PLACEHOLDER_VALUE + r"(?P=q))(?P<qvalue>(?![<$]|\{\{)[^\"'\n]+)(?P=q)"
    r"|(?!" + _PLACEHOLDER_VALUE + r"(?:[\s\"',;}&)\]]|$))"
    r"(?P<value>(?![<$=:|>])(?=[^\s\"',;}&)\](\[]{6})(?=[^\s\"',;}&)\]]*[0-9~!@#%^*+/=\-])[^\s\"',;}&)\](\[]+)"
    r"(?![(\[\w.])(?![ \t]+[-+*/%][ \t]+[\w(])"
)
_ASSIGNMENT = re.compile(
    r"(?P<name>" + _SECRET_WORD + r")"
    r"(?P<sep>[\"']?\]?[ \t]*(?::=|[:=])[ \t]*)"
    r"(?:" + _LITERAL + r")"
)
#: A long random-looking literal for a bare `key=` (`wandb.login(key="...")`): 32 or more letters
#: and digits, both present (a dict key or a module path has dots or no digits).
_KEY_VALUE = re.compile(
    r"\b(?P<name>key)(?P<sep>[ \t]*=[ \t]*)(?P<q>[\"'])"
    r"(?P<qvalue>(?=[A-Za-z_-]*[0-9])(?=[0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,})(?P=q)"
)
#: YAML with the value on the next line (`password:` then an indented scalar, or a `|`/`>` block).
_YAML_NEXT_LINE = re.compile(
    r"(?m)^(?P<head>[ \t]*(?:" + _SECRET_WORD + r")[ \t]*:[ \t]*(?:[|>][-+]?)?[ \t]*\n[ \t]+)"
    r"(?P<value>(?![<$#])[^\s#][^\n]*)"
)
_AUTH_HEADER = re.compile(
    r"(?P<head>\bAuthorization[\"']?\]?[ \t]*[:=][ \t]*[\"']?[ \t]*(?:Bearer|Basic|Token)?[ \t]*)"
    r"(?P<value>(?!(?:Bearer|Basic|Token)\b)[A-Za-z0-9._~+/=:-]{6,})|(?P<bearer>\bBearer[ \t]+)(?P<bvalue>(?![<$])[A-Za-z0-9._~+/-]{16,}=*)",
    re.IGNORECASE,
)
_TOKEN_FORMATS = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|hf_[A-Za-z0-9]{30,}"
    r"|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{32,}|xox[abpr]-[A-Za-z0-9-]{20,}|glpat-[A-Za-z0-9_-]{20,})\b"
)
#: A bare AWS secret access key: 40 base64 characters standing alone, with the mix of upper case,
#: lower case and digits of random text (a git sha is lower-case hex; pip hashes are longer).
_AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+=])"
    r"(?=(?:[A-Za-z0-9/+]*?[A-Z]){3})(?=(?:[A-Za-z0-9/+]*?[a-z]){3})(?=(?:[A-Za-z0-9/+]*?[0-9]){3})"
    r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)"
)
#: A password in netrc format (`machine HOST login USER password VALUE`), whatever the file is called.
_NETRC_PASSWORD = re.compile(
    r"\b(?:machine[ \t]+\S+|default)(?:\s+(?:login|account|port)[ \t]+\S+)*\s+password[ \t]+(?![<$])\S+"
)


def _sub_assignment(m: re.Match[str]) -> str:
    if m["q"]:
        return f"{m['name']}{m['sep']}{m['q']}{_REDACTED}{m['q']}"
    return f"{m['name']}{m['sep']}{_REDACTED}"


def _sub_auth(m: re.Match[str]) -> str:
    return f"{m['head']}{_REDACTED}" if m["head"] is not None else f"{m['bearer']}{_REDACTED}"


@dataclass(frozen=True)
class Shape:
    """One shape of secret in any text: its rule id (as findings name it), what it is in words,
    the pattern, and what the scrubber puts in its place."""

    rule: str
    kind: str
    pattern: re.Pattern[str]
    replacement: Any


#: The shapes of secrets in any text. The scrubber replaces them and the leak check looks for
#: them: one list, so what is scanned is what is scrubbed. docs/secret-scanning.md lists the rules.
SECRET_SHAPES: tuple[Shape, ...] = (
    Shape("private-key", "a private key", _PRIVATE_KEY, "<redacted:private key>"),
    Shape("credential-assignment", "a credential assignment", _ASSIGNMENT, _sub_assignment),
    Shape("credential-assignment", "a credential assignment", _KEY_VALUE, _sub_assignment),
    Shape(
        "credential-assignment",
        "a credential assignment",
        _YAML_NEXT_LINE,
        lambda m: f"{m['head']}{_REDACTED}",
    ),
    Shape("authorization-header", "an Authorization header", _AUTH_HEADER, _sub_auth),
    Shape("token-format", "a token", _TOKEN_FORMATS, _REDACTED),
    Shape("aws-secret-key", "an AWS secret key", _AWS_SECRET, _REDACTED),
    Shape(
        "netrc-password",
        "a netrc password",
        _NETRC_PASSWORD,
        lambda m: m[0].rsplit(None, 1)[0] + " " + _REDACTED,
    ),
)


@dataclass(frozen=True)
class Hit:
    """Where in a text something that must not leave the machine starts and ends, and which rule
    found it (`Scrubber.hits`)."""

    start: int
    end: int
    rule: str
    kind: str


_PATH_END = r"(?=[/\\\s\"'`:;,)\]}>|]|\.(?:\s|$)|$)"

#: What may follow a mirror URL's prefix (the rest of the URL, or its end).
_URL_REST = r"(?:(?=[/?#\s\"'`<>),;\]]|$)[^\s\"'`<>),;\]]*)"

#: Environment variables that name folders of the author's machine: venvs and caches.
_PATH_VARIABLES = (
    ("VIRTUAL_ENV", "<venv>"),
    ("CONDA_PREFIX", "<conda>"),
    ("XDG_CACHE_HOME", "<cache>"),
    ("PIP_CACHE_DIR", "<cache>"),
    ("UV_CACHE_DIR", "<cache>"),
    ("HF_HOME", "<cache>"),
    ("HF_HUB_CACHE", "<cache>"),
    ("TORCH_HOME", "<cache>"),
    (CACHE_DIR.name, "<cache>"),
)


def _temp_path(tmp: str) -> re.Pattern[str]:
    """A path below the temporary folder `tmp` (not `tmp` itself, which names no author's file)."""
    return re.compile(
        r"(?<![\w.~-])"
        + re.escape(tmp)
        + r"[/\\](?:[^\s\"'`<>|;,)\]}:]*[/\\])?(?P<base>[^\s\"'`<>|;,)\]}:/\\]*)"
    )


#: Paths that are never replaced even if a prefix points there: too generic to be a host detail.
_SYSTEM_DIRS = {"/", "/usr", "/usr/local", "/opt", "/bin", "/lib", "/var", "/etc", "/tmp", "C:\\", "/private"}


def is_secret_name(name: str) -> bool:
    """True for environment variable names whose values are credentials (`HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`)."""
    return bool(SECRET_NAME.search(name))


@dataclass
class Scrubber:
    """Replaces known secret values and host paths, and credential-shaped text, with placeholders."""

    secrets: dict[str, str] = field(default_factory=dict)  # value -> variable name
    paths: list[tuple[str, str]] = field(default_factory=list)  # (absolute path, placeholder)
    urls: list[str] = field(default_factory=list)  # the author's mirror URLs (prefixes), longest first
    temp_dirs: list[str] = field(default_factory=list)  # temporary folders: any path below one goes

    @classmethod
    def for_project(
        cls,
        project_dir: str | Path | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        credential_names: Iterable[str] = (),
        extra_paths: Iterable[tuple[str | Path, str]] = (),
        home: str | Path | None = None,
        mirrors: Iterable[str] = (),
    ) -> Scrubber:
        """A scrubber for the author's machine: secret values from `environ` (default os.environ),
        the variables the manifest names (`credential_names`), and the usual host paths."""
        env = dict(os.environ if environ is None else environ)
        s = cls()
        named = set(credential_names)
        for name, value in env.items():
            if (is_secret_name(name) and len(value) >= 4) or (name in named and len(value) >= 8):
                s.add_secret(value, name)
        home_dir = Path(home) if home is not None else Path.home()
        netrc_files = [env.get("NETRC", ""), str(home_dir / ".netrc"), str(home_dir / "_netrc")]
        for netrc_file in dict.fromkeys(netrc_files):
            for value in netrc_passwords(netrc_file):
                s.add_secret(value, "netrc")
        pairs: list[tuple[str | Path, str]] = list(extra_paths)
        if project_dir is not None:
            proj = Path(project_dir).absolute()
            pairs.append((proj, "<project>"))
            top = git_toplevel(proj)
            if top is not None:
                pairs.append((top, "<repo>"))
        pairs.append((sys.prefix, "<prefix>"))
        pairs.append((sys.base_prefix, "<python>"))
        pairs.append((sys.exec_prefix, "<prefix>"))
        pairs.append((home_dir, "<home>"))
        for var, placeholder in _PATH_VARIABLES:
            if env.get(var, "").startswith(("/", "\\")) or re.match(r"^[A-Za-z]:\\", env.get(var, "")):
                pairs.append((env[var], placeholder))
        for path, placeholder in pairs:
            s.add_path(path, placeholder)
        for tmp in dict.fromkeys((tempfile.gettempdir(), env.get("TMPDIR", ""), "/tmp", "/var/tmp")):
            s.add_temp_dir(tmp)
        for url in mirrors:
            s.add_url(url)
        return s

    def add_temp_dir(self, path: str) -> None:
        """Every path below `path` is a temporary path of this machine (`<tmp>/<name>`)."""
        forms = {path.rstrip("/\\")}
        with contextlib.suppress(OSError):
            forms.add(str(Path(path).resolve()))
        for form in forms:
            if len(form) >= 2 and form not in self.temp_dirs:
                self.temp_dirs.append(form)
        self.temp_dirs.sort(key=len, reverse=True)

    def add_url(self, url: str) -> None:
        """A URL of the author's machine (a mirror): it and everything below it become `<mirror>`."""
        base = url.strip().rstrip("/")
        if len(base) > len("http://") and base not in self.urls:
            self.urls.append(base)
            self.urls.sort(key=len, reverse=True)

    def add_secret(self, value: str, name: str) -> None:
        # the value as written, and as it appears inside a URL (percent-encoded user-info)
        for form in dict.fromkeys((value, urllib.parse.quote(value, safe=""))):
            if form and form not in self.secrets:
                self.secrets[form] = name

    def add_path(self, path: str | Path, placeholder: str) -> None:
        forms = {str(path)}
        with contextlib.suppress(OSError):
            forms.add(str(Path(path).resolve()))
        # as written in file:// URLs (pip freeze of a local wheel in a folder with spaces or unicode)
        forms |= {urllib.parse.quote(f, safe="/\\:~") for f in forms}
        for form in forms:
            form = form.rstrip("/\\") or form
            if len(form) < 2 or form in _SYSTEM_DIRS or any(p == form for p, _ in self.paths):
                continue
            self.paths.append((form, placeholder))
        # longest first, so a project inside the home folder becomes <project>, not <home>/...
        self.paths.sort(key=lambda p: len(p[0]), reverse=True)

    # --- rewriting -----------------------------------------------------------------------------

    def text(self, text: str) -> str:
        """The text with every secret and host path replaced."""
        for value in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(value, f"<redacted:{self.secrets[value]}>")
        text = URL_USERINFO.sub(_userinfo, text)
        for shape in SECRET_SHAPES:
            text = shape.pattern.sub(shape.replacement, text)
        for url in self.urls:
            text = re.sub(re.escape(url) + _URL_REST, "<mirror>", text)
        for path, placeholder in self.paths:
            text = re.sub(re.escape(path) + _PATH_END, placeholder.replace("\\", "\\\\"), text)
        for tmp in self.temp_dirs:
            text = _temp_path(tmp).sub(lambda m: f"<tmp>/{m['base']}", text)
        return text

    def data(self, obj: Any) -> Any:
        """A JSON-like structure with every string (keys included) scrubbed."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {
                self.text(k) if isinstance(k, str) else k: _REDACTED
                if isinstance(k, str) and is_secret_name(k) and isinstance(v, str) and _is_value(v)
                else self.data(v)
                for k, v in obj.items()
            }
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        return obj

    # --- checking ------------------------------------------------------------------------------

    def leaks(self, data: bytes | str, *, generated: bool = True) -> list[str]:
        """What `data` still reveals: variable names of secret values, placeholders of host paths,
        mirror URLs, and kinds of credential-shaped text. Empty when the data is clean."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        return list(dict.fromkeys(hit.kind for hit in self.hits(text, generated=generated)))

    def hits(self, text: str, *, generated: bool = True) -> list[Hit]:
        """Every place in `text` that reveals a secret value, a host path, a mirror URL or
        credential-shaped text, in the order of the rules. A file Kernodeck `generated` also must
        not name any path below a temporary folder; a file copied verbatim (code) may (`/tmp/cache`
        as a default is not the author's machine)."""
        found = [
            Hit(m.start(), m.end(), "secret-value", f"the value of {name}")
            for value, name in self.secrets.items()
            for m in re.finditer(re.escape(value), text)
        ]
        for path, placeholder in self.paths:
            found += _hits(re.escape(path) + _PATH_END, text, "host-path", f"a host path ({placeholder})")
        for url in self.urls:
            found += _hits(re.escape(url) + _URL_REST, text, "mirror-url", "a mirror URL of this machine")
        if generated:
            for tmp in self.temp_dirs:
                found += _hits(_temp_path(tmp), text, "temp-path", "a temporary folder path")
        found += [
            Hit(m.start(), m.end(), "url-credentials", "credentials in a URL")
            for m in URL_USERINFO.finditer(text)
            if not _PLACEHOLDER.match(m["userinfo"])
        ]
        for shape in SECRET_SHAPES:
            found += _hits(shape.pattern, text, shape.rule, shape.kind)
        return found


def _hits(pattern: str | re.Pattern[str], text: str, rule: str, kind: str) -> list[Hit]:
    return [Hit(m.start(), m.end(), rule, kind) for m in re.finditer(pattern, text)]


def _is_value(v: str) -> bool:
    """A string that holds a credential's value, not a placeholder for one (`${VAR}`, `<redacted>`)."""
    return bool(v.strip()) and not _PLACEHOLDER.match(v.strip())


def _userinfo(m: re.Match[str]) -> str:
    info = m["userinfo"]
    if _PLACEHOLDER.match(info):
        return m[0]
    return f"{m['scheme']}{_REDACTED}@"


def netrc_passwords(path: str | Path) -> list[str]:
    """The passwords (and accounts) in a netrc file; empty when there is none or it cannot be read."""
    import netrc

    if not str(path) or not Path(path).is_file():
        return []
    try:
        parsed = netrc.netrc(str(path))
    except (OSError, netrc.NetrcParseError, UnicodeDecodeError):
        return []
    out: list[str] = []
    for _login, account, password in parsed.hosts.values():
        out += [v for v in (password, account) if v and len(v) >= 4]
    return out
