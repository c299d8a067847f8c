"""Requirement files read the way pip reads them, into typed values with their origin.

    parsed = parse_requirements_file(Path("requirements/train.txt"), project_root=Path("."))
    parsed.requirements   # (ReqLine(requirement="numpy>=1.26", origin=Origin("requirements/base.txt", 3)), ...)
    parsed.constraints    # from -c files (a -r inside a -c file names requirements, as in pip)
    parsed.indexes        # --index-url / --extra-index-url / --find-links, credentials as ${VAR}
    parsed.backends       # local labels: torch==2.3.0+cu121 -> BackendHint("torch", "cu121", ...)
    parsed.files          # every file read -> sha256 of its bytes (for the lock inputs digest)

What pip does and this module does too: a logical line joins physical lines ending in `\\`;
comments start at `#` at the start of a line or after whitespace; `-r`/`--requirement` and
`-c`/`--constraint` name files relative to the file that includes them; environment markers stay
on the requirement. `-e .` (or a plain path) naming the project itself stands for the project's
own `[project] dependencies` (plus the extras named, `-e .[train]`), read from its pyproject.toml;
the project itself is not locked from an index.

`${NAME}` (uppercase letters, digits, underscore) is expanded from the environment when the file
is read (at lock time), as pip does, in requirements and in `-r`/`-c`/`-e` values; a variable that
is not set is an error at the line. Index urls keep their `${VAR}` credential placeholders (they
are expanded in memory only, when fetching; never written expanded).

A local label on a pin (`torch==2.3.0+cu121`) is reported as a backend hint and taken off the
requirement (`torch==2.3.0`): the platform's `backend` chooses the build, so the same manifest can
also name a CPU or macOS platform.

What a lock cannot honour is an error naming the file and line, never dropped: a direct URL, a VCS
requirement, a path to another project, `--no-binary`, `--no-index` and any option not listed in
`_ACCEPTED`. A literal secret in an index URL is an error that does not repeat the secret.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.backends import parse_backend
from kernodeck.errors import Issue, ManifestError
from kernodeck.fingerprint import sha256_file
from kernodeck.manifest.paths import escapes
from kernodeck.support.conflicts import conflict_issue
from kernodeck.support.fsio import NotRegularFile, open_regular
from kernodeck.support.tomltext import parse_toml
from kernodeck.support.urls import is_placeholder_userinfo, redact, strip_userinfo

if TYPE_CHECKING:
    from kernodeck.formats.poetrydeps import PoetryDeps

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_VCS = re.compile(r"^(git|hg|svn|bzr)\+", re.IGNORECASE)
_MAX_DEPTH = 32
#: The largest requirements file read, in bytes (a generated file of 100,000 hashed pins is about
#: 10 MiB); a larger one (or /dev/zero) is refused with this number in the message.
MAX_FILE_BYTES = 16 * 2**20
#: The longest value of a line a message quotes (then it is cut, with a count).
_SHOWN_MAX = 80
_OPTION_SHAPE = re.compile(r"--?[A-Za-z][A-Za-z0-9-]{0,40}")
#: A line that is a path as people write one (`./pkg`, `../x.whl`, `/abs/p`, `${DIR}/p`): shown;
#: other lines with a '/' (`KEY=abc/def`) are not.
_PATH_SHAPE = re.compile(r"(?:\.{1,2}/|/|\$\{[A-Z0-9_]+\}/|\.$)\S*")
_PATH_CHARS = re.compile(r"[\w.${}\[\],/\\-]+")
#: A line that begins like a requirement: a project name, then extras, a version comparison, a
#: marker or a URL (`KEY=value` and `root:x:0:0` do not).
_NAME_START = re.compile(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:[\[(;@<>]|==|!=|~=)")
#: `${NAME}` as pip expands it in requirement files (uppercase letters, digits and underscore).
_ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")
_INDEX_KINDS = ("index-url", "extra-index-url", "find-links")

#: Options that take a value, by every spelling pip accepts, and what they mean here.
_VALUE_OPTIONS: dict[str, str] = {
    "-r": "requirement",
    "--requirement": "requirement",
    "-c": "constraint",
    "--constraint": "constraint",
    "-e": "editable",
    "--editable": "editable",
    "-i": "index-url",
    "--index-url": "index-url",
    "--extra-index-url": "extra-index-url",
    "-f": "find-links",
    "--find-links": "find-links",
    "--only-binary": "only-binary",
    "--no-binary": "no-binary",
    "--trusted-host": "trusted-host",
    "--use-feature": "use-feature",
    "--hash": "hash",
    "--config-settings": "config-settings",
    "--global-option": "global-option",
}
_FLAG_OPTIONS: dict[str, str] = {
    "--pre": "pre",
    "--prefer-binary": "prefer-binary",
    "--no-index": "no-index",
    "--require-hashes": "require-hashes",
}
#: Options that change nothing in a lock: kernodeck locks wheels only and writes its own hashes.
_ACCEPTED = {"only-binary", "prefer-binary", "hash", "require-hashes", "pre"}


def cannot_carry(leave_out: str = "list the line (or its project's name) under [packages] skip") -> str:
    """What to do about a requirement a lock cannot take from an index (a VCS or direct URL
    requirement): `leave_out` says how to leave it out of the lock (a requirement file's line:
    [packages] skip; [packages] requirements: remove it there)."""
    return (
        f"publish it to an index the manifest names, pin a released version, or {leave_out} "
        "(then it is not locked: install it yourself)"
    )


_CANNOT_CARRY = cannot_carry()


def direct_reference(req: Requirement) -> str | None:
    """Why a lock cannot take `req` from an index (`name @ URL`: a VCS, local file or other direct
    URL requirement; a lock resolves names on indexes only), or None for a requirement by name."""
    if not req.url:
        return None
    kind = "VCS" if _VCS.match(req.url) else "local path" if req.url.startswith("file:") else "direct URL"
    return f"{req.name} @ ...: a {kind} requirement cannot be locked from an index"


_WHY_NOT: dict[str, str] = {
    "no-binary": "kernodeck locks wheels only; list the project under [packages] allow-sdist instead",
    "no-index": "a lock reads the indexes the manifest names; declare them under [[packages.index]]",
    "trusted-host": "kernodeck does not turn TLS verification off for a host",
    "use-feature": "pip features do not apply to a lock",
    "config-settings": "build settings do not apply to a lock of wheels",
    "global-option": "build options do not apply to a lock of wheels",
}


@dataclass(frozen=True)
class Origin:
    """Where a line came from: the file as given (relative where it can be) and the line number."""

    file: str
    line: int  # 0: the file as a whole (a pyproject.toml table)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class ReqLine:
    requirement: str  # normalised PEP 508 text, local label removed
    origin: Origin
    project: str = ""  # its normalised project name, when the reader knows it (else parsed)

    @property
    def name(self) -> str:
        return self.project or canonicalize_name(Requirement(self.requirement).name)


IndexKind = Literal["index-url", "extra-index-url", "find-links"]


@dataclass(frozen=True)
class IndexRef:
    url: str  # credentials only as ${VAR} placeholders
    kind: IndexKind
    origin: Origin


@dataclass(frozen=True)
class BackendHint:
    """A pin with a PyTorch local label: the platform that installs it needs this backend."""

    project: str
    version: str
    backend: str
    origin: Origin


@dataclass(frozen=True)
class ParsedRequirements:
    requirements: tuple[ReqLine, ...] = ()
    constraints: tuple[ReqLine, ...] = ()
    indexes: tuple[IndexRef, ...] = ()
    backends: tuple[BackendHint, ...] = ()
    prereleases: bool = False
    files: dict[str, str] = field(default_factory=dict)  # file read -> sha256 of its bytes
    project_included: bool = False  # `-e .` or a path to the project itself was read
    unset: tuple[tuple[str, Origin], ...] = ()  # with unset="note": ${NAME}s not set, lines skipped
    project: str | None = None  # a pyproject.toml: its [project] name
    # lines left out by [packages] skip: (the skip entry that matched, where the line is)
    skipped: tuple[tuple[str, Origin], ...] = ()

    def via(self, line: ReqLine) -> str:
        """How a lock file names where `line` came from, as pip-compile and uv do:
        `-r requirements/base.txt`, or `my-project (pyproject.toml)`."""
        return f"{self.project} ({line.origin.file})" if self.project else f"-r {line.origin.file}"


def parse_requirements_file(
    path: Path,
    *,
    project_root: Path | None = None,
    display_root: Path | None = None,
    unset: Literal["error", "note"] = "error",
    external: bool = False,
    skip: tuple[str, ...] = (),
) -> ParsedRequirements:
    """Read `path` (and every file it includes). `project_root` is the folder `-e .` and other
    paths are relative to (pip: the current folder; here: the manifest's folder, default the
    file's folder); `display_root` makes the file names in origins and errors relative.
    `unset="note"` (for `init`, before the variables exist) records a line with an unset
    `${NAME}` in `unset` and skips it instead of failing. Every file read stays inside
    `project_root` (symlinks followed) unless `external` ([packages] external = true). A line
    `skip` names ([packages] skip: see `skip_entry`) is left out and recorded in `skipped`."""
    root = (project_root or path.parent).resolve()
    reader = _Reader(
        root, (display_root or root).resolve(), note_unset=unset == "note", external=external, skip=skip
    )
    reader.read(path, constraint=False, depth=0, origin=None)
    return ParsedRequirements(
        requirements=tuple(reader.requirements),
        constraints=tuple(reader.constraints),
        indexes=tuple(reader.indexes),
        backends=tuple(reader.backends),
        prereleases=reader.prereleases,
        files=dict(sorted(reader.files.items())),
        project_included=reader.project_included,
        unset=tuple(reader.unset),
        skipped=tuple(reader.skipped),
    )


_EGG = re.compile(r"#egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_LEADING_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:[\[(;@<>=!~]|$)")


def line_project(line: str) -> str | None:
    """The project a requirement-file line names, canonical: `tool @ git+https://...`,
    `git+https://...#egg=tool`, `tool==1.0`; None for a line that names none (a bare URL, a
    path, an option)."""
    m = _EGG.search(line) or _LEADING_NAME.match(line)
    return canonicalize_name(m.group(1)) if m is not None else None


def skip_entry(line: str, skip: tuple[str, ...]) -> str | None:
    """The `[packages] skip` entry that names a requirement-file line (comments removed), or
    None. An entry names a line by the line itself as written (blanks collapsed, `${NAME}` not
    expanded: `git+https://host/org/tool.git`, `../other-project`, `--some-option x`), or by the
    project the line names (`line_project`)."""
    if not skip:
        return None
    written = " ".join(line.split())
    project = line_project(written)
    for entry in skip:
        if " ".join(entry.split()) == written or (
            project is not None and canonicalize_name(entry) == project
        ):
            return entry
    return None


def parse_pyproject(
    pyproject: Path,
    *,
    extras: list[str] | tuple[str, ...] = (),
    groups: list[str] | tuple[str, ...] = (),
    display_root: Path | None = None,
) -> ParsedRequirements:
    """`[project] dependencies`, the named extras and the named PEP 735 `[dependency-groups]`
    (with `{include-group = ...}`) of a pyproject.toml, as requirements."""
    root = (display_root or pyproject.parent).resolve()
    reader = _Reader(pyproject.parent.resolve(), root)
    shown = reader.show(pyproject)
    origin = Origin(shown, 0)
    for req in project_dependencies(pyproject, list(extras), display=shown):
        reader.requirement(req, origin, constraint=False, written=req)
    for req in dependency_groups(pyproject, list(groups), display=shown):
        reader.requirement(req, origin, constraint=False, written=req)
    reader.files[shown] = sha256_file(pyproject)
    data = read_pyproject(pyproject, shown)
    project = data.get("project")
    name = project.get("name") if isinstance(project, dict) else None
    if not isinstance(project, dict):  # a Poetry project: its [tool.poetry] name
        from kernodeck.formats.poetrydeps import poetry_project

        name = poetry_project(data)
    return ParsedRequirements(
        requirements=tuple(reader.requirements),
        backends=tuple(reader.backends),
        files=reader.files,
        project=name if isinstance(name, str) and name else None,
    )


def parse_pipfile(
    pipfile: Path, *, groups: list[str] | tuple[str, ...] = (), display_root: Path | None = None
) -> ParsedRequirements:
    """A Pipenv Pipfile's [packages] and the package categories named in `groups` ([dev-packages],
    ...; names compared normalised) as requirements (see `kernodeck.formats.pipfile`); an entry a
    requirement cannot say (git, path) is a located error, as a direct URL in pyproject.toml is,
    and so is a category the Pipfile does not have."""
    from kernodeck.formats.pipfile import read_pipfile

    root = (display_root or pipfile.parent).resolve()
    reader = _Reader(pipfile.parent.resolve(), root)
    shown = reader.show(pipfile)
    try:
        deps = read_pipfile(pipfile)
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError([Issue(shown, "", f"cannot read: {getattr(e, 'strerror', None) or e}")]) from None
    known = {canonicalize_name(t): t for t in deps.categories}
    requirements = list(deps.requirements)
    unreadable = list(deps.unreadable)
    for name in groups:
        table = known.get(canonicalize_name(name))
        if table is None:
            listed = ", ".join(f"[{t}]" for t in deps.categories) or "none"
            raise ManifestError(
                [
                    Issue(
                        shown,
                        "",
                        f"no package category {name!r} (named in [packages] groups); the Pipfile has: {listed}",
                        hint='groups name a Pipfile\'s tables besides [packages], e.g. "dev-packages"',
                    )
                ]
            )
        requirements += [r for r in deps.categories[table].requirements if r not in requirements]
        unreadable += deps.categories[table].unreadable
    if unreadable:
        where, why = unreadable[0]
        hint = "copy the other packages into [packages] requirements and take the Pipfile out of `from`"
        raise ManifestError([Issue(shown, where, why, hint=hint)])
    origin = Origin(shown, 0)
    for req in requirements:
        reader.requirement(req, origin, constraint=False, written=req)
    reader.files[shown] = sha256_file(pipfile)
    return ParsedRequirements(
        requirements=tuple(reader.requirements), backends=tuple(reader.backends), files=reader.files
    )


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) of every non-empty logical line, comments removed.

    As pip: a line ending in `\\` continues on the next one, unless it is a comment line; the
    comment is removed after joining. Linear in the text's length (a regular expression with
    `\\s+#` took time quadratic in a run of blanks: 80,000 continued blank lines, 134 s)."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        if not buf:
            start = n
        if raw.endswith("\\") and not raw.lstrip().startswith("#"):
            buf.append(raw.strip("\\"))
            continue
        buf.append(raw)
        joined = _without_comment("".join(buf)).strip()
        buf = []
        if joined:
            out.append((start, joined))
    if buf:
        joined = _without_comment("".join(buf)).strip()
        if joined:
            out.append((start, joined))
    return out


def _without_comment(line: str) -> str:
    """`line` up to its comment: a `#` at the start or after whitespace, as pip reads it."""
    at = line.find("#")
    while at > 0 and not line[at - 1].isspace():
        at = line.find("#", at + 1)
    return line if at < 0 else line[:at]


def split_options(line: str) -> tuple[str, list[str]]:
    """(requirement part, option tokens), split where pip splits: at the first token that starts
    with '-'."""
    tokens = line.split()
    for i, tok in enumerate(tokens):
        if tok.startswith("-"):
            return " ".join(tokens[:i]), tokens[i:]
    return line, []


def _options(tokens: list[str]) -> list[tuple[str, str | None, str]]:
    """(meaning, value, spelling) of every option in `tokens`; unknown options get meaning ''."""
    out: list[tuple[str, str | None, str]] = []
    with contextlib.suppress(ValueError):  # pip splits options like a shell; an odd quote stays as is
        tokens = shlex.split(" ".join(tokens))
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, eq, val = tok.partition("=")
        if name in _FLAG_OPTIONS:
            out.append((_FLAG_OPTIONS[name], None, name))
            i += 1
            continue
        if name in _VALUE_OPTIONS and name.startswith("--"):
            if eq:
                out.append((_VALUE_OPTIONS[name], val, name))
                i += 1
            else:
                out.append((_VALUE_OPTIONS[name], tokens[i + 1] if i + 1 < len(tokens) else None, name))
                i += 2
            continue
        short = tok[:2]
        if short in _VALUE_OPTIONS and not tok.startswith("--"):
            rest = tok[2:]
            if rest:
                out.append((_VALUE_OPTIONS[short], rest.removeprefix("="), short))
                i += 1
            else:
                out.append((_VALUE_OPTIONS[short], tokens[i + 1] if i + 1 < len(tokens) else None, short))
                i += 2
            continue
        out.append(("", None, name))
        i += 1
    return out


class _Unset(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


class Refused(Exception):
    """A file the reader does not read, and why ("lies outside the project", ...)."""

    def __init__(self, why: str, hint: str | None = None) -> None:
        self.why = why
        self.hint = hint


def bounded_in(root: Path, path: Path) -> None:
    """Nothing when `path` stays inside `root` (symlinks followed); Refused when it leads out."""
    if escapes(root, path) is not None:
        raise Refused(
            "lies outside the project (an absolute path, `..` or a symlink leading out)",
            hint="keep requirement files inside the project, or add `external = true` under [packages] "
            "if they live on a shared mount",
        )


def _opened(path: Path) -> io.FileIO:
    """`path` opened by `fsio.open_regular` (a named pipe, a device, a socket or a folder is
    refused on its descriptor, without blocking) and no larger than MAX_FILE_BYTES; Refused says
    why not."""
    try:
        f = open_regular(path)
    except NotRegularFile as e:
        raise Refused(f"is {e.strerror}") from None
    except FileNotFoundError:
        raise Refused("does not exist") from None
    except OSError as e:
        raise Refused(f"cannot be read: {e.strerror or e}") from None
    if os.fstat(f.fileno()).st_size > MAX_FILE_BYTES:
        f.close()
        raise _too_large()
    return f


def check_regular(path: Path) -> None:
    """Nothing when `path` is a regular file of at most MAX_FILE_BYTES; Refused says why not."""
    _opened(path).close()


def _too_large() -> Refused:
    return Refused(
        f"is larger than {MAX_FILE_BYTES // 2**20} MiB, the most a requirements file may hold",
        hint="a requirements file lists projects; split a generated one, or check that it is the file meant",
    )


def read_capped(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES (a file that reads longer than its
    size said, as /proc files do, is not read past the cap); Refused says why not."""
    chunks: list[bytes] = []
    size = 0
    with _opened(path) as f:
        while size <= MAX_FILE_BYTES:
            try:
                chunk = f.read(MAX_FILE_BYTES + 1 - size)
            except OSError as e:
                raise Refused(f"cannot be read: {e.strerror or e}") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > MAX_FILE_BYTES:
        raise _too_large()
    return b"".join(chunks)


def _decoded(raw: bytes, shown: str) -> str:
    """A requirements file's text; a NUL byte or bytes that are not UTF-8 are a located error
    (the file is not text: /proc/self/environ, a binary), which never quotes the bytes."""
    nul = raw.find(b"\0")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise ManifestError([Issue(shown, "", "holds a NUL byte: not a text file", line=line)])
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ManifestError([Issue(shown, "", "file is not valid UTF-8", line=line)]) from None


def shown_value(text: str) -> str:
    """A value from a requirement line fit for a message: as written (`${NAME}` unexpanded), URL
    credentials redacted, control characters as '?', at most 80 characters (then a count)."""
    text = "".join(c if c.isprintable() else "?" for c in redact(text))
    if len(text) <= _SHOWN_MAX:
        return text
    return f"{text[:_SHOWN_MAX]}... ({len(text)} characters)"


def _is_path(text: str, written: str) -> bool:
    """Whether a line that is no requirement names a path (as pip reads it: `./pkg`, `/abs`,
    `dist/x.whl`): path characters only; `KEY=abc/def` or `root:x:0:0:/root` is no path."""
    if _PATH_SHAPE.fullmatch(written):
        return True
    return bool(_PATH_CHARS.fullmatch(written)) and (
        os.sep in text or "/" in text or text.endswith((".whl", ".tar.gz", ".zip"))
    )


def _invalid(written: str, e: InvalidRequirement) -> str:
    """ "invalid requirement 'numpy>=${V}': Expected ..." (packaging's reason without its copy of
    the line; the line as written, redacted and cut short) for a line that begins like a
    requirement; any other line (`root:x:0:0`, `AKIA... secret`) is described, never quoted."""
    reason = str(e).splitlines()[0]
    if not _NAME_START.match(written):
        return f"not a requirement, an option or a comment (the line is not shown): {reason}"
    return f"invalid requirement {shown_value(written)!r}: {reason}"


def _option_shown(spelling: str) -> str:
    """An option as a message names it: its spelling when it looks like an option (`--foo`),
    else "on this line" wording that quotes nothing (`-----BEGIN` is not shown)."""
    return spelling if _OPTION_SHAPE.fullmatch(spelling) else "(not shown: it does not look like an option)"


class _Reader:
    def __init__(
        self,
        project_root: Path,
        display_root: Path,
        *,
        note_unset: bool = False,
        external: bool = False,
        skip: tuple[str, ...] = (),
    ) -> None:
        self.project_root = project_root
        self.skip = skip
        self.skipped: list[tuple[str, Origin]] = []
        self.note_unset = note_unset
        self.external = external  # files may lie outside the project ([packages] external = true)
        self.unset: list[tuple[str, Origin]] = []
        self.display_root = display_root
        self.requirements: list[ReqLine] = []
        self.constraints: list[ReqLine] = []
        self.indexes: list[IndexRef] = []
        self.backends: list[BackendHint] = []
        self.files: dict[str, str] = {}
        self.prereleases = False
        self.project_included = False
        self._stack: list[Path] = []
        # requirement text -> (normalised text, project, backend hints): a line repeated is parsed once
        self._done: dict[str, tuple[str, str, list[tuple[str, str, str]]]] = {}

    def show(self, path: Path) -> str:
        try:
            return Path(os.path.relpath(path.resolve(), self.display_root)).as_posix()
        except ValueError:  # another drive on Windows
            return path.as_posix()

    def fail(self, origin: Origin, message: str, hint: str | None = None) -> ManifestError:
        return ManifestError([Issue(origin.file, "", message, line=origin.line, hint=hint)])

    def read(
        self, path: Path, *, constraint: bool, depth: int, origin: Origin | None, written: str = ""
    ) -> None:
        """Read `path`; `origin` is the `-r`/`-c` line that names it (None: the file asked for),
        `written` that line as written (`-r ${DIR}/base.txt`), which its errors show."""
        resolved = path.resolve()
        shown = self.show(path)
        if origin is not None and resolved in self._stack:
            raise self.fail(origin, f"{written}: {shown} includes itself (a cycle of -r/-c)")
        if origin is not None and depth > _MAX_DEPTH:
            raise self.fail(origin, f"files included more than {_MAX_DEPTH} levels deep")
        try:
            raw = self._bytes(path)
        except Refused as e:
            if origin is None:
                raise ManifestError([Issue(shown, "", f"requirements file {e.why}", hint=e.hint)]) from None
            raise self.fail(origin, f"{written}: the file {e.why}", hint=e.hint) from None
        text = _decoded(raw, shown)
        merged = conflict_issue(text, shown)
        if merged is not None:
            raise ManifestError([merged])
        self.files[shown] = hashlib.sha256(raw).hexdigest()
        self._stack.append(resolved)
        try:
            for lineno, content in logical_lines(text):
                try:
                    self.line(path, Origin(shown, lineno), content, constraint=constraint, depth=depth)
                except _Unset as e:  # only with note_unset: the line is noted and skipped
                    self.unset.append((e.name, Origin(shown, lineno)))
        finally:
            self._stack.pop()

    def _bytes(self, path: Path) -> bytes:
        """The bytes of a file the reader may read: inside the project (symlinks followed) unless
        `external`, a regular file, at most MAX_FILE_BYTES."""
        if not self.external:
            bounded_in(self.project_root, path)
        return read_capped(path)

    def expand(self, text: str, origin: Origin) -> str:
        """`${NAME}` (uppercase letters, digits, underscore) from the environment, as pip expands
        requirement lines; a variable that is not set is an error at the line. Messages show the
        line as written, never an expanded value."""
        if "${" not in text:
            return text

        def value(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in os.environ and self.note_unset:
                raise _Unset(name)
            if name not in os.environ:
                raise self.fail(
                    origin,
                    f"${{{name}}} is not set in the environment",
                    hint=f"set {name} where you run kernodeck (requirement lines expand ${{NAME}} as pip does)",
                )
            return os.environ[name]

        return _ENV_VAR.sub(value, text)

    def line(self, path: Path, origin: Origin, line: str, *, constraint: bool, depth: int) -> None:
        entry = skip_entry(line, self.skip)
        if entry is not None:
            self.skipped.append((entry, origin))
            return
        req_text, option_tokens = split_options(line)
        opts = _options(option_tokens) if option_tokens else []
        if req_text:
            for meaning, _value, spelling in opts:
                if meaning not in ("hash", "config-settings", "global-option"):
                    raise self.fail(
                        origin,
                        f"option {_option_shown(spelling)} cannot follow a requirement on the same line",
                    )
                if meaning != "hash":
                    raise self.fail(origin, f"{spelling} is not supported: {_WHY_NOT[meaning]}")
            self.requirement(self.expand(req_text, origin), origin, constraint=constraint, written=req_text)
            return
        for meaning, value, spelling in opts:
            self.option(path, origin, meaning, value, spelling, constraint=constraint, depth=depth)

    def option(
        self,
        path: Path,
        origin: Origin,
        meaning: str,
        value: str | None,
        spelling: str,
        *,
        constraint: bool,
        depth: int,
    ) -> None:
        """One option of an option line; `value` as written (`${NAME}` not expanded yet)."""
        if not meaning:
            raise self.fail(
                origin,
                f"unknown or unsupported option {_option_shown(spelling)}",
                hint="kernodeck reads -r, -c, -e ., --index-url, --extra-index-url, --find-links, "
                "--pre, --only-binary, --prefer-binary and --hash; remove the line, or list it under "
                "[packages] skip (then it is not read)",
            )
        if meaning in _WHY_NOT:
            raise self.fail(origin, f"{spelling} is not supported: {_WHY_NOT[meaning]}")
        if meaning == "pre":
            self.prereleases = True
            return
        if meaning in _ACCEPTED:
            return
        if value is None:
            raise self.fail(origin, f"{spelling} needs a value")
        written = f"{spelling} {shown_value(value)}"
        if meaning in _INDEX_KINDS:
            # index urls keep their ${VAR} credential placeholders: expanded in memory only, at fetch time
            self.index(value, meaning, origin, path.parent)  # type: ignore[arg-type]
            return
        expanded = self.expand(value, origin)
        if meaning == "editable":
            self.path_requirement(expanded, origin, constraint=constraint, editable=True, written=written)
            return
        if _SCHEME.match(expanded):
            raise self.fail(origin, f"{written}: only local files can be included")
        target = Path(expanded)
        if not target.is_absolute():
            target = path.parent / target
        # as pip: what a file names with -r is requirements, with -c constraints, whatever the
        # including file is
        self.read(target, constraint=meaning == "constraint", depth=depth + 1, origin=origin, written=written)

    def index(self, url: str, kind: IndexKind, origin: Origin, file_dir: Path | None = None) -> None:
        if kind != "find-links" and not re.match(r"^(https?|file)://", url):
            raise self.fail(
                origin, f"--{kind} {shown_value(url)}: an index url starts with https://, http:// or file://"
            )
        if kind == "find-links" and not _SCHEME.match(url):
            # as pip: relative to the requirements file when it exists there, else to the project
            target = Path(url)
            if not target.is_absolute():
                beside = (file_dir / target) if file_dir is not None else None
                target = beside if beside is not None and beside.exists() else self.project_root / target
            url = target.resolve().as_uri()
        netloc = url.split("://", 1)[1].split("/", 1)[0] if "://" in url else ""
        if "@" in netloc:
            userinfo = netloc.rsplit("@", 1)[0]
            if not is_placeholder_userinfo(userinfo):
                shown = strip_userinfo(url)
                raise self.fail(
                    origin,
                    f"the index url {shown} carries a literal credential (not shown here)",
                    hint="write it as ${VARIABLE} placeholders, e.g. https://${INDEX_USER}:${INDEX_TOKEN}@host/simple, "
                    "and set those variables where you run kernodeck",
                )
        self.indexes.append(IndexRef(url=url, kind=kind, origin=origin))

    def path_requirement(
        self, value: str, origin: Origin, *, constraint: bool, editable: bool, written: str
    ) -> None:
        """A path (or URL) where a requirement is due: only the project itself (`-e .`) is read;
        `written` is the line as messages show it (`${NAME}` unexpanded)."""
        what = written
        if _VCS.match(value) or _SCHEME.match(value):
            raise self.fail(
                origin,
                f"{what}: a {'VCS' if _VCS.match(value) else 'URL'} requirement cannot be locked from an index",
                hint=_CANNOT_CARRY,
            )
        base, extras = value, ""
        m = re.fullmatch(r"(.*?)(\[[^\]]*\])", value)
        if m:
            base, extras = m.group(1), m.group(2)
        target = Path(base)
        if not target.is_absolute():
            target = self.project_root / target
        if target.resolve() != self.project_root:
            raise self.fail(
                origin,
                f"{what}: a path to another project cannot be locked from an index",
                hint="only the project itself (-e .) is read from its pyproject.toml; publish the other project "
                "to an index, name its requirements instead, or list the line under [packages] skip "
                "(then it is not locked)",
            )
        if constraint:
            raise self.fail(origin, f"{what}: a constraints file cannot name the project itself")
        names = [e.strip() for e in extras.strip("[]").split(",") if e.strip()]
        self.project_included = True
        pyproject = self.project_root / "pyproject.toml"
        try:
            reqs = project_dependencies(pyproject, names, display=self.show(pyproject))
        except ManifestError as e:
            raise self._unreadable_project(what, origin, pyproject, e) from None
        for req in reqs:
            self.requirement(req, origin, constraint=False, written=req)
        self.files[self.show(pyproject)] = sha256_file(pyproject)

    def _unreadable_project(
        self, what: str, origin: Origin, pyproject: Path, e: ManifestError
    ) -> ManifestError:
        """`-e .` whose dependencies cannot be read without building the project: located at the
        line, saying where the dependencies are instead."""
        legacy = [n for n in ("setup.py", "setup.cfg") if (self.project_root / n).is_file()]
        if not pyproject.is_file() and legacy:
            why = f"the project's dependencies are in {' / '.join(legacy)}, which Kernodeck does not run"
        else:
            first = e.issues[0] if e.issues else None
            why = f"{first.render().splitlines()[0]}" if first is not None else e.message
        return self.fail(
            origin,
            f"{what}: {why}",
            hint="declare them under [project] dependencies in pyproject.toml, or list them in a "
            f"requirements file (or [packages] requirements) and {what} under [packages] skip",
        )

    def requirement(self, text: str, origin: Origin, *, constraint: bool, written: str) -> None:
        """One requirement (`${NAME}` expanded); `written` is the line as written, which messages
        quote only as far as it is safe: the project name it starts with, else nothing."""
        done = self._done.get(text)
        if done is None:
            done = self._parsed(text, origin, constraint=constraint, written=written)
            if done is None:  # the project itself (`.`), read from its pyproject.toml
                return
            self._done[text] = done
        normalised, name, hints = done
        self.backends += [BackendHint(project, public, backend, origin) for project, public, backend in hints]
        (self.constraints if constraint else self.requirements).append(ReqLine(normalised, origin, name))

    def _parsed(
        self, text: str, origin: Origin, *, constraint: bool, written: str
    ) -> tuple[str, str, list[tuple[str, str, str]]] | None:
        """(normalised text, project name, backend hints) of a requirement; None for a path to the project
        itself (read in its place); a located error for anything a lock cannot take."""
        if _VCS.match(text) or _SCHEME.match(text):
            self.path_requirement(
                text, origin, constraint=constraint, editable=False, written=shown_value(written)
            )
            return None
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            if _is_path(text, written):
                shown = shown_value(written) if _PATH_SHAPE.fullmatch(written) else "a path (not shown)"
                self.path_requirement(text, origin, constraint=constraint, editable=False, written=shown)
                return None
            raise self.fail(origin, _invalid(written, e)) from None
        why = direct_reference(req)
        if why is not None:
            raise self.fail(origin, why, hint=_CANNOT_CARRY)
        normalised, hints = _without_local(req)
        return normalised, canonicalize_name(req.name), hints


def _without_local(req: Requirement) -> tuple[str, list[tuple[str, str, str]]]:
    """A requirement without the PyTorch local labels of its pins (`torch==2.3.0+cu121` ->
    `torch==2.3.0`), and (project, public version, backend) for each label taken off."""
    kept: list[str] = []
    hints: list[tuple[str, str, str]] = []
    for s in req.specifier:
        if s.operator in ("==", "===") and "+" in s.version and not s.version.endswith("*"):
            public, _, label = s.version.partition("+")
            backend = parse_backend(label)
            try:
                Version(s.version)
            except InvalidVersion:
                backend = None
            if backend is not None and backend.uses_pytorch_index:
                hints.append((canonicalize_name(req.name), public, backend.name))
                kept.append(f"=={public}")
                continue
        kept.append(str(s))
    if not hints:
        return str(req), []
    out = Requirement(str(req))
    out.specifier = type(req.specifier)(",".join(kept))
    return str(out), hints


def _pyproject_requirement(item: str, shown: str, where: str) -> Requirement:
    """One requirement string of pyproject.toml, parsed; a direct URL cannot be locked from an index."""
    try:
        req = Requirement(item)
    except InvalidRequirement as e:
        raise ManifestError(
            [Issue(shown, where, f"invalid requirement {shown_value(item)!r}: {str(e).splitlines()[0]}")]
        ) from None
    if req.url:
        raise ManifestError(
            [Issue(shown, where, f"{req.name} @ ...: a direct URL cannot be locked from an index")]
        )
    return req


def project_dependencies(pyproject: Path, extras: list[str], *, display: str | None = None) -> list[str]:
    """`[project] dependencies` plus the named `optional-dependencies` of a pyproject.toml, with
    the project's own extras (`myproj[dev]` inside an extra) expanded. Errors are located."""
    shown = display or pyproject.as_posix()
    data = read_pyproject(pyproject, shown)
    project = data.get("project")
    if not isinstance(project, dict):
        poetry = _poetry(data)
        if poetry is not None:
            return _poetry_dependencies(poetry, extras, shown)
        raise ManifestError([Issue(shown, "project", "no [project] table: its dependencies cannot be read")])
    if "dependencies" in (project.get("dynamic") or []):
        raise ManifestError(
            [
                Issue(
                    shown,
                    "project.dynamic",
                    "dependencies are dynamic (computed by the build backend), so they cannot be read",
                    hint="list them under [project] dependencies, or name a requirements file instead",
                )
            ]
        )
    optional = project.get("optional-dependencies") or {}
    if not isinstance(optional, dict):
        raise ManifestError([Issue(shown, "project.optional-dependencies", "must be a table of lists")])
    walk = _Extras(shown, canonicalize_name(str(project.get("name", ""))), optional)
    walk.add(project.get("dependencies", []), "project.dependencies")
    for extra in extras:
        walk.expand(extra)
    return walk.out


class _Extras:
    """A project's dependencies with its extras expanded (each once), `myproj[dev]` included."""

    def __init__(self, shown: str, own: str, optional: dict[str, object]) -> None:
        self.shown, self.own, self.optional = shown, own, optional
        self.known = {canonicalize_name(k): k for k in optional}
        self.out: list[str] = []
        self.seen: set[str] = set()

    def add(self, items: object, where: str) -> None:
        if not isinstance(items, list):
            raise ManifestError([Issue(self.shown, where, "must be a list of requirement strings")])
        for item in items:
            if not isinstance(item, str):
                raise ManifestError(
                    [Issue(self.shown, where, f"{shown_value(repr(item))} is not a requirement string")]
                )
            req = _pyproject_requirement(item, self.shown, where)
            if self.own and canonicalize_name(req.name) == self.own:
                for extra in sorted(req.extras):
                    self.expand(extra)
                continue
            self.out.append(str(req))

    def expand(self, extra: str) -> None:
        key = canonicalize_name(extra)
        if key in self.seen:
            return
        self.seen.add(key)
        if key not in self.known:
            listed = ", ".join(sorted(self.known)) or "none"
            raise ManifestError(
                [
                    Issue(
                        self.shown,
                        "project.optional-dependencies",
                        f"no extra {shown_value(extra)!r}; the project has: {listed}",
                    )
                ]
            )
        name = self.known[key]
        self.add(self.optional[name], f"project.optional-dependencies.{name}")


def _poetry(data: dict[str, object]) -> PoetryDeps | None:
    """Poetry's `[tool.poetry.dependencies]` (a pyproject.toml without [project]), read as
    requirements; None without one."""
    from kernodeck.formats.poetrydeps import read_poetry

    return read_poetry(data)


def _poetry_dependencies(poetry: PoetryDeps, extras: list[str], shown: str) -> list[str]:
    """Poetry's dependencies plus the optional ones of the named Poetry extras. A dependency a
    requirement cannot say (git, path, `||`) is a located error, as a direct URL in [project] is."""
    if poetry.unreadable:
        where, why = poetry.unreadable[0]
        raise ManifestError(
            [
                Issue(
                    shown,
                    where,
                    why,
                    hint="copy the other dependencies into [packages] requirements and take "
                    "pyproject.toml out of `from`, or make this one an index release",
                )
            ]
        )
    return _selected(poetry.optional, extras, [*poetry.requirements], shown, "tool.poetry.extras", "extra")


def _selected(
    parts: dict[str, list[str]], names: list[str], out: list[str], shown: str, where: str, what: str
) -> list[str]:
    """`out` plus the requirements of the named `parts` (Poetry's extras or groups; names compared
    normalised), each once; an unknown name is a located error."""
    known = {canonicalize_name(k): k for k in parts}
    for name in names:
        key = canonicalize_name(name)
        if key not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise ManifestError([Issue(shown, where, f"no {what} {name!r}; the project has: {listed}")])
        out += [r for r in parts[known[key]] if r not in out]
    return out


def read_pyproject(pyproject: Path, shown: str) -> dict[str, object]:
    """A pyproject.toml's tables (a regular file of at most MAX_FILE_BYTES); errors located."""
    if not pyproject.exists():
        raise ManifestError([Issue(shown, "", "pyproject.toml does not exist")])
    try:
        raw = read_capped(pyproject)
    except Refused as e:
        raise ManifestError([Issue(shown, "", f"pyproject.toml {e.why}", hint=e.hint)]) from None
    return parse_toml(_decoded(raw, shown), shown)


def dependency_groups(pyproject: Path, groups: list[str], *, display: str | None = None) -> list[str]:
    """The requirements of the named PEP 735 dependency groups, `{include-group = "..."}` expanded
    (names compared normalised; a cycle or an unknown group is a located error)."""
    if not groups:
        return []
    shown = display or pyproject.as_posix()
    data = read_pyproject(pyproject, shown)
    table = data.get("dependency-groups") or {}
    poetry = _poetry(data) if "dependency-groups" not in data else None
    if poetry is not None:  # Poetry's groups, `[tool.poetry.group.NAME.dependencies]`
        return _selected(poetry.groups, groups, [], shown, "tool.poetry.group", "Poetry group")
    if not isinstance(table, dict):
        raise ManifestError([Issue(shown, "dependency-groups", "must be a table of lists")])
    walk = _Groups(shown, table)
    for g in groups:
        walk.expand(g, ())
    return walk.out


class _Groups:
    """PEP 735 dependency groups expanded, each once, `{include-group}` followed (no cycles)."""

    def __init__(self, shown: str, table: dict[str, object]) -> None:
        self.shown, self.table = shown, table
        self.known = {canonicalize_name(k): k for k in table}
        self.out: list[str] = []
        self.done: set[str] = set()

    def fail(self, where: str, message: str) -> ManifestError:
        return ManifestError([Issue(self.shown, where, message)])

    def expand(self, group: str, stack: tuple[str, ...]) -> None:
        key = canonicalize_name(group)
        if key in stack:
            raise self.fail(
                f"dependency-groups.{group}", f"include-group cycle: {' -> '.join((*stack, key))}"
            )
        if key in self.done:
            return
        if key not in self.known:
            listed = ", ".join(sorted(self.known)) or "none"
            raise self.fail(
                "dependency-groups", f"no dependency group {shown_value(group)!r}; the project has: {listed}"
            )
        self.done.add(key)
        where = f"dependency-groups.{self.known[key]}"
        items = self.table[self.known[key]]
        if not isinstance(items, list):
            raise self.fail(where, "must be a list")
        for item in items:
            self.item(item, where, (*stack, key))

    def item(self, item: object, where: str, stack: tuple[str, ...]) -> None:
        if isinstance(item, str):
            self.out.append(str(_pyproject_requirement(item, self.shown, where)))
            return
        if not isinstance(item, dict):
            raise self.fail(where, f"{shown_value(repr(item))} is not a requirement string")
        inc = item.get("include-group")
        if set(item) != {"include-group"} or not isinstance(inc, str):
            raise self.fail(where, f'{shown_value(repr(item))}: only {{include-group = "NAME"}} is allowed')
        self.expand(inc, stack)
