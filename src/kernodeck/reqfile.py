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
from kernodeck.support.conflicts import conflict_issue
from kernodeck.support.tomltext import parse_toml
from kernodeck.support.urls import is_placeholder_userinfo, strip_userinfo

if TYPE_CHECKING:
    from kernodeck.formats.poetrydeps import PoetryDeps

_COMMENT = re.compile(r"(^|\s+)#.*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_VCS = re.compile(r"^(git|hg|svn|bzr)\+", re.IGNORECASE)
_MAX_DEPTH = 32
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

    @property
    def name(self) -> str:
        return canonicalize_name(Requirement(self.requirement).name)


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
) -> ParsedRequirements:
    """Read `path` (and every file it includes). `project_root` is the folder `-e .` and other
    paths are relative to (pip: the current folder; here: the manifest's folder, default the
    file's folder); `display_root` makes the file names in origins and errors relative.
    `unset="note"` (for `init`, before the variables exist) records a line with an unset
    `${NAME}` in `unset` and skips it instead of failing."""
    root = (project_root or path.parent).resolve()
    reader = _Reader(root, (display_root or root).resolve(), note_unset=unset == "note")
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
    )


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
        reader.requirement(req, origin, constraint=False)
    for req in dependency_groups(pyproject, list(groups), display=shown):
        reader.requirement(req, origin, constraint=False)
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
        reader.requirement(req, origin, constraint=False)
    reader.files[shown] = sha256_file(pipfile)
    return ParsedRequirements(
        requirements=tuple(reader.requirements), backends=tuple(reader.backends), files=reader.files
    )


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) of every non-empty logical line, comments removed.

    As pip: a line ending in `\\` continues on the next one, unless it is a comment line; the
    comment is removed after joining."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        if not buf:
            start = n
        if raw.endswith("\\") and not _COMMENT.match(raw):
            buf.append(raw.strip("\\"))
            continue
        buf.append(raw)
        joined = _COMMENT.sub("", "".join(buf)).strip()
        buf = []
        if joined:
            out.append((start, joined))
    if buf:
        joined = _COMMENT.sub("", "".join(buf)).strip()
        if joined:
            out.append((start, joined))
    return out


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


class _Reader:
    def __init__(self, project_root: Path, display_root: Path, *, note_unset: bool = False) -> None:
        self.project_root = project_root
        self.note_unset = note_unset
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

    def show(self, path: Path) -> str:
        try:
            return Path(os.path.relpath(path.resolve(), self.display_root)).as_posix()
        except ValueError:  # another drive on Windows
            return path.as_posix()

    def fail(self, origin: Origin, message: str, hint: str | None = None) -> ManifestError:
        return ManifestError([Issue(origin.file, "", message, line=origin.line, hint=hint)])

    def read(self, path: Path, *, constraint: bool, depth: int, origin: Origin | None) -> None:
        resolved = path.resolve()
        shown = self.show(path)
        if resolved in self._stack:
            assert origin is not None
            raise self.fail(origin, f"{shown} includes itself (a cycle of -r/-c)")
        if depth > _MAX_DEPTH:
            assert origin is not None
            raise self.fail(origin, f"files included more than {_MAX_DEPTH} levels deep")
        try:
            raw = path.read_bytes()
        except OSError as e:
            why = (
                f"requirements file {shown} does not exist"
                if isinstance(e, FileNotFoundError)
                else f"cannot read requirements file {shown}: {e.strerror or e}"
            )
            raise ManifestError(
                [Issue(origin.file if origin else shown, "", why, line=origin.line if origin else None)]
            ) from None
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as e:
            line = raw[: e.start].count(b"\n") + 1
            raise ManifestError([Issue(shown, "", "file is not valid UTF-8", line=line)]) from None
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

    def expand(self, text: str, origin: Origin) -> str:
        """`${NAME}` (uppercase letters, digits, underscore) from the environment, as pip expands
        requirement lines; a variable that is not set is an error at the line."""

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
        req_text, option_tokens = split_options(line)
        req_text = self.expand(req_text, origin)
        # index urls keep their ${VAR} credential placeholders: expanded in memory only, at fetch time
        opts = [
            (
                meaning,
                value if value is None or meaning in _INDEX_KINDS else self.expand(value, origin),
                spelling,
            )
            for meaning, value, spelling in _options(option_tokens)
        ]
        if req_text:
            for meaning, _value, spelling in opts:
                if meaning not in ("hash", "config-settings", "global-option"):
                    raise self.fail(origin, f"option {spelling} cannot follow a requirement on the same line")
                if meaning != "hash":
                    raise self.fail(origin, f"{spelling} is not supported: {_WHY_NOT[meaning]}")
            self.requirement(req_text, origin, constraint=constraint)
            return
        for meaning, value, spelling in opts:
            if not meaning:
                raise self.fail(
                    origin,
                    f"unknown or unsupported option {spelling}",
                    hint="kernodeck reads -r, -c, -e ., --index-url, --extra-index-url, --find-links, "
                    "--pre, --only-binary, --prefer-binary and --hash",
                )
            if meaning in _WHY_NOT:
                raise self.fail(origin, f"{spelling} is not supported: {_WHY_NOT[meaning]}")
            if meaning == "pre":
                self.prereleases = True
                continue
            if meaning in _ACCEPTED:
                continue
            if value is None:
                raise self.fail(origin, f"{spelling} needs a value")
            if meaning in ("requirement", "constraint"):
                target = Path(value)
                if _SCHEME.match(value):
                    raise self.fail(origin, f"{spelling} {value}: only local files can be included")
                if not target.is_absolute():
                    target = path.parent / target
                # as pip: what a file names with -r is requirements, with -c constraints, whatever
                # the including file is
                self.read(target, constraint=meaning == "constraint", depth=depth + 1, origin=origin)
            elif meaning == "editable":
                self.path_requirement(value, origin, constraint=constraint, editable=True)
            else:
                self.index(value, meaning, origin, path.parent)  # type: ignore[arg-type]

    def index(self, url: str, kind: IndexKind, origin: Origin, file_dir: Path | None = None) -> None:
        if kind != "find-links" and not re.match(r"^(https?|file)://", url):
            raise self.fail(
                origin, f"--{kind} {url!r}: an index url starts with https://, http:// or file://"
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

    def path_requirement(self, value: str, origin: Origin, *, constraint: bool, editable: bool) -> None:
        what = "-e " + value if editable else value
        if _VCS.match(value) or _SCHEME.match(value):
            raise self.fail(
                origin,
                f"{what}: a {'VCS' if _VCS.match(value) else 'URL'} requirement cannot be locked from an index",
                hint="publish it to an index the manifest names, or pin a released version",
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
                "to an index, or name its requirements instead",
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
            self.requirement(req, origin, constraint=False)
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
            f"requirements file instead of {what}",
        )

    def requirement(self, text: str, origin: Origin, *, constraint: bool) -> None:
        if _VCS.match(text) or _SCHEME.match(text):
            self.path_requirement(text, origin, constraint=constraint, editable=False)
            return
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            if text.startswith((".", "/")) or os.sep in text or text.endswith((".whl", ".tar.gz", ".zip")):
                self.path_requirement(text, origin, constraint=constraint, editable=False)
                return
            raise self.fail(origin, f"invalid requirement {text!r}: {str(e).splitlines()[0]}") from None
        if req.url:
            kind = "VCS" if _VCS.match(req.url) else "direct URL"
            raise self.fail(
                origin,
                f"{req.name} @ ...: a {kind} requirement cannot be locked from an index",
                hint="publish it to an index the manifest names, or pin a released version",
            )
        req = self._without_local(req, origin)
        entry = ReqLine(requirement=str(req), origin=origin)
        (self.constraints if constraint else self.requirements).append(entry)

    def _without_local(self, req: Requirement, origin: Origin) -> Requirement:
        specs = list(req.specifier)
        changed = False
        kept: list[str] = []
        for s in specs:
            if s.operator in ("==", "===") and "+" in s.version and not s.version.endswith("*"):
                public, _, label = s.version.partition("+")
                backend = parse_backend(label)
                try:
                    Version(s.version)
                except InvalidVersion:
                    backend = None
                if backend is not None and backend.uses_pytorch_index:
                    self.backends.append(
                        BackendHint(canonicalize_name(req.name), public, backend.name, origin)
                    )
                    kept.append(f"=={public}")
                    changed = True
                    continue
            kept.append(str(s))
        if not changed:
            return req
        out = Requirement(str(req))
        out.specifier = type(req.specifier)(",".join(kept))
        return out


def _pyproject_requirement(item: str, shown: str, where: str) -> Requirement:
    """One requirement string of pyproject.toml, parsed; a direct URL cannot be locked from an index."""
    try:
        req = Requirement(item)
    except InvalidRequirement as e:
        raise ManifestError(
            [Issue(shown, where, f"invalid requirement {item!r}: {str(e).splitlines()[0]}")]
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
    dynamic = project.get("dynamic") or []
    if "dependencies" in dynamic:
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
    own = canonicalize_name(str(project.get("name", "")))
    optional = project.get("optional-dependencies") or {}
    if not isinstance(optional, dict):
        raise ManifestError([Issue(shown, "project.optional-dependencies", "must be a table of lists")])
    known = {canonicalize_name(k): k for k in optional}
    out: list[str] = []
    seen: set[str] = set()

    def add(items: object, where: str) -> None:
        if not isinstance(items, list):
            raise ManifestError([Issue(shown, where, "must be a list of requirement strings")])
        for item in items:
            if not isinstance(item, str):
                raise ManifestError([Issue(shown, where, f"{item!r} is not a requirement string")])
            req = _pyproject_requirement(item, shown, where)
            if own and canonicalize_name(req.name) == own:
                for extra in sorted(req.extras):
                    expand(extra)
                continue
            out.append(str(req))

    def expand(extra: str) -> None:
        key = canonicalize_name(extra)
        if key in seen:
            return
        seen.add(key)
        if key not in known:
            raise ManifestError(
                [
                    Issue(
                        shown,
                        "project.optional-dependencies",
                        f"no extra {extra!r}; the project has: {', '.join(sorted(known)) or 'none'}",
                    )
                ]
            )
        add(optional[known[key]], f"project.optional-dependencies.{known[key]}")

    add(project.get("dependencies", []), "project.dependencies")
    for extra in extras:
        expand(extra)
    return out


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
    try:
        text = pyproject.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError([Issue(shown, "", "pyproject.toml does not exist")]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError([Issue(shown, "", f"cannot read: {getattr(e, 'strerror', None) or e}")]) from None
    return parse_toml(text, shown)


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
    known = {canonicalize_name(k): k for k in table}
    out: list[str] = []
    done: set[str] = set()

    def expand(group: str, stack: tuple[str, ...]) -> None:
        key = canonicalize_name(group)
        if key in stack:
            raise ManifestError(
                [
                    Issue(
                        shown,
                        f"dependency-groups.{group}",
                        f"include-group cycle: {' -> '.join((*stack, key))}",
                    )
                ]
            )
        if key in done:
            return
        if key not in known:
            raise ManifestError(
                [
                    Issue(
                        shown,
                        "dependency-groups",
                        f"no dependency group {group!r}; the project has: {', '.join(sorted(known)) or 'none'}",
                    )
                ]
            )
        done.add(key)
        where = f"dependency-groups.{known[key]}"
        items = table[known[key]]
        if not isinstance(items, list):
            raise ManifestError([Issue(shown, where, "must be a list")])
        for item in items:
            if isinstance(item, dict):
                inc = item.get("include-group")
                if set(item) != {"include-group"} or not isinstance(inc, str):
                    raise ManifestError(
                        [Issue(shown, where, f'{item!r}: only {{include-group = "NAME"}} is allowed')]
                    )
                expand(inc, (*stack, key))
            elif isinstance(item, str):
                out.append(str(_pyproject_requirement(item, shown, where)))
            else:
                raise ManifestError([Issue(shown, where, f"{item!r} is not a requirement string")])

    for g in groups:
        expand(g, ())
    return out
