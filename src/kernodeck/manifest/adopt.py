"""What an existing project already declares, for `kernodeck init` to refer to instead of copying.

    found = discover(Path("."))
    found.sources     # ["requirements.txt"] or ["pyproject.toml"]: what `[packages] from` names
    found.comments    # why, and what was found but left out (a dev file, a line a lock cannot honour)
    found.backends    # local labels (torch==2.3.0+cu121) of the sources: the host platform's backend
    found.routes      # backends the project sends torch to (a PyTorch index in a requirements file,
                      # conda's pytorch-cuda/cudatoolkit, uv's [tool.uv.sources]): one platform each
    found.python      # (major.minor, why) a conda file or Pipfile names; found.python_range: a range
    found.data        # data / model folders proposed as commented-out [[data]] / [[weights]]
    found.missing     # no dependency list a lock can read: why, and what to do (else None)
    found.requirements  # copied from a list `from` cannot read (see below), else []

Data: top-level folders `data`, `datasets` (as [[data]]) and `checkpoints`, `weights`, `models`
(as [[weights]]), and every file of at least 10 MB elsewhere (outside hidden folders such as .git
and virtual environments; model-file suffixes as [[weights]]), each with its fingerprint.

Requirement files: `requirements.txt`, `requirements-*.txt`, `requirements_*.txt` and
`requirements/*.txt`, without Kernodeck's own lock files and without the files another candidate
includes (`-r`/`-c`: they are read through it). Files whose name says they are for development
(dev, test, docs, lint, ci) are listed in a comment, not used. A requirements file with `-e .`
stands for the project's own dependencies, so pyproject.toml is then not named a second time.
A line a lock cannot take (a VCS or URL requirement, a path to another project, an unknown
option) never drops its file: the file stays in `from` and the line is named in a comment with
what to do (`validate` and `lock` stop at it until it is fixed or listed under [packages] skip).
A file that cannot be read as a whole (not UTF-8, too large) is left out with the reason.

Poetry's `[tool.poetry.dependencies]` (`poetrydeps`) and a Pipfile (`pipfile`) are read through
`from` too, unless an entry cannot be a requirement. Lists `from` cannot read are copied into
`requirements` when the project has nothing `from` reads, the first found in this order: Poetry's
table or a Pipfile with such an entry, a conda environment file (`condaenv`), setup.py's literal
`install_requires` or setup.cfg's (`setuppy`); the others are then named as not used.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck import formats
from kernodeck.backends import backend_of_index, routes_to_backend
from kernodeck.errors import ManifestError
from kernodeck.fingerprint import fingerprint
from kernodeck.formats import Unreadable, parse_text
from kernodeck.formats.condaenv import find_conda_env, read_conda_env
from kernodeck.formats.pipfile import category_note, find_pipfile, read_pipfile
from kernodeck.formats.poetrydeps import PoetryDeps, poetry_specifier, read_poetry
from kernodeck.formats.setuppy import SetupDeps, read_setup
from kernodeck.formats.uvsources import torch_routes
from kernodeck.lockfile.names import is_kernodeck_file
from kernodeck.lockfile.read import read_pins
from kernodeck.reqfile import (
    BackendHint,
    ParsedRequirements,
    logical_lines,
    parse_pyproject,
    parse_requirements_file,
    read_pyproject,
)
from kernodeck.support.conflicts import blank_conflicts, conflict_regions, regions_text

#: Folders proposed as data (first) or weights (second).
DATA_FOLDERS = ("data", "datasets")
WEIGHT_FOLDERS = ("checkpoints", "weights", "models")
_DEV = re.compile(r"(^|[-_./])(dev|develop|test|tests|testing|docs?|lint|ci|typing)([-_.]|$)", re.IGNORECASE)


@dataclass(frozen=True)
class DataProposal:
    table: str  # "data" | "weights"
    name: str
    path: str
    sha256: str
    files: int
    size: int


@dataclass
class Discovery:
    sources: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    backends: list[BackendHint] = field(default_factory=list)
    data: list[DataProposal] = field(default_factory=list)
    missing: str | None = None
    # copied from a conda environment file when the project has no other dependency list
    requirements: list[str] = field(default_factory=list)
    python: tuple[str, str] | None = None  # (major.minor, why) when a source names the Python
    # (PEP 440 specifier, why) when a source allows a range of Pythons (Poetry's `python = "^3.10"`)
    python_range: tuple[str, str] | None = None
    # where the project sends torch per backend: a PyTorch index in a requirements file, conda's
    # pytorch-cuda/cudatoolkit, uv's [tool.uv.sources]: one proposed platform per backend
    routes: list[BackendRoute] = field(default_factory=list)
    # ("file:line", the line as written) of each requirement-file line a lock cannot take
    uncarried: list[tuple[str, str]] = field(default_factory=list)
    # extras selected in [packages] extras, with why (uv's routing extras that only name torch)
    extras: tuple[list[str], str] | None = None
    # names proposed for [packages] allow-sdist, with why: what the adopted lock has only as an sdist
    allow_sdist: tuple[list[str], str] | None = None
    # backend -> the extra its [[platform]] selects (uv's routing extras that conflict: uv installs
    # one at a time, `uv sync --extra cu124`)
    variant_extras: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BackendRoute:
    """A backend the project installs torch for, and the evidence (file:line and what it says)."""

    backend: str
    evidence: str
    extra: str | None = None  # uv: the extra that selects this route
    marker: str | None = None  # uv: the marker that selects this route
    # the PyTorch index base, when only the manifest can say it (uv's, not read at lock time)
    base: str | None = None


#: Without any dependency list a lock can read.
NO_DEPENDENCIES = (
    "found no requirements*.txt, requirements*.in or pyproject.toml [project] table: "
    "write the dependencies in [packages] requirements before `kernodeck lock`"
)


def _without_project_table(data: dict[str, object]) -> str:
    """Why a pyproject.toml without a [project] table gives no dependencies, and what to do."""
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if isinstance(poetry, dict) and isinstance(poetry.get("dependencies"), dict):
        return (
            "pyproject.toml lists its dependencies in [tool.poetry.dependencies], Poetry's own "
            "format, which `from` does not read: write them in [packages] requirements, or "
            "`poetry export -f requirements.txt -o requirements.txt` and add that file to `from`"
        )
    return (
        "pyproject.toml has no [project] table, so `from` cannot read its dependencies (setup.py "
        "or setup.cfg may list them): write them in [packages] requirements"
    )


def _requirement_candidates(directory: Path, suffix: str = ".txt") -> list[Path]:
    found: set[Path] = set()
    for stem in ("requirements", "requirements-*", "requirements_*", "requirements/*"):
        found.update(
            p for p in directory.glob(stem + suffix) if p.is_file() and not is_kernodeck_file(p.name)
        )
    return sorted(found, key=lambda p: (p.name != "requirements" + suffix, p.as_posix()))


#: The header pip-compile and `uv pip compile` write at the top of a requirements file they compiled.
_COMPILED = re.compile(r"^#.*\bautogenerated by (pip-compile|uv)\b", re.IGNORECASE | re.MULTILINE)


def compiled_by(path: Path) -> str | None:
    """ "pip-compile" or "uv" when `path` is a requirements file one of them compiled (its header
    says so); None otherwise."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return None
    m = _COMPILED.search(head)
    return m.group(1).lower() if m else None


def _compiled_pairs(root: Path) -> tuple[dict[Path, tuple[Path, str]], list[Path]]:
    """({compiled .txt: (the .in it was compiled from, the tool)}, the .in files to read): a
    pip-tools layout locks from its `.in` files, and the compiled `.txt` beside one gives the
    first lock its preferred pins; an `.in` beside a `.txt` no tool compiled is left alone (the
    `.txt` is what the project installs)."""
    compiled: dict[Path, tuple[Path, str]] = {}
    sources: list[Path] = []
    for source in _requirement_candidates(root, ".in"):
        txt = source.with_suffix(".txt")
        if not txt.is_file():
            sources.append(source)
            continue
        tool = compiled_by(txt)
        if tool is not None:
            compiled[txt] = (source, tool)
            sources.append(source)
    return compiled, sources


def _first_issue(e: ManifestError) -> str:
    return e.issues[0].render().splitlines()[0] if e.issues else e.message


#: At most this many lines of one requirements file are reported as ones a lock cannot take.
_MAX_UNCARRIED = 20


def _line_text(root: Path, issue_file: str, line: int) -> str | None:
    """The logical line (comments removed) that starts at `line` of `issue_file` (relative to
    `root`), or None when it cannot be read back."""
    try:
        text = (root / issue_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return next((content for start, content in logical_lines(text) if start == line), None)


def _parse_carrying(path: Path, root: Path, out: Discovery) -> ParsedRequirements:
    """A requirements file as `from` will read it. A line a lock cannot take (a VCS or URL
    requirement, a path to another project, an unknown option) does not drop the file: it stays
    in `from`, and each such line is named in `out.comments` with what to do, since `validate` and
    `lock` stop at it until it is fixed or listed under [packages] skip (`out.uncarried` gets
    where it is and the line as written). The result is the file read without those lines (for
    its indexes and backends); a problem that is not at one line (the file itself) raises the
    ManifestError."""
    stuck: list[str] = []
    while True:
        try:
            parsed = parse_requirements_file(
                path, project_root=root, display_root=root, unset="note", skip=tuple(stuck)
            )
        except ManifestError as e:
            issue = e.issues[0] if len(e.issues) == 1 else None
            text = _line_text(root, issue.file, issue.line) if issue and issue.line else None
            if issue is None or text is None or text in stuck or len(stuck) >= _MAX_UNCARRIED:
                raise
            stuck.append(text)
            out.uncarried.append((f"{issue.file}:{issue.line}", text))
            out.comments.append(
                f"{issue.file}:{issue.line}: {issue.message}: `validate` and `lock` stop at this line "
                f"until it is fixed ({issue.hint or 'edit or remove it'})"
            )
            continue
        return parsed


def _requirement_files(root: Path, out: Discovery) -> tuple[dict[str, ParsedRequirements], list[str]]:
    """The project's requirement files: each read (`_parse_carrying`), the ones `from` names added
    to `out.sources` with their backends, routes and comments. Returns (every file read, the ones
    chosen)."""
    parsed: dict[str, ParsedRequirements] = {}
    compiled, in_files = _compiled_pairs(root)
    candidates = sorted(
        [c for c in _requirement_candidates(root) if c not in compiled] + in_files,
        key=lambda p: (p.name not in ("requirements.txt", "requirements.in"), p.as_posix()),
    )
    for txt, (source, tool) in compiled.items():
        out.comments.append(
            f"{txt.relative_to(root).as_posix()} is compiled by {tool} from "
            f"{source.relative_to(root).as_posix()}: `from` names the .in file"
        )
    for cand in candidates:
        rel = cand.relative_to(root).as_posix()
        try:
            parsed[rel] = _parse_carrying(cand, root, out)
        except ManifestError as e:
            hint = e.issues[0].hint if e.issues else None
            fix = f"{hint}; then" if hint else "fix it, then"
            out.comments.append(f"not used: {_first_issue(e)}; {fix} add {rel!r} to `from`")
    is_dev = {rel: bool(_DEV.search(Path(rel).stem.removeprefix("requirements"))) for rel in parsed}
    if all(is_dev.values()) and not (root / "pyproject.toml").is_file() and not sub_projects(root):
        is_dev = dict.fromkeys(parsed, False)  # only "dev" files: they are what the project has
    # a file another (non-development) file includes is read through it; a dev file including
    # requirements.txt does not make requirements.txt a part of development
    included = {f for rel, p in parsed.items() if not is_dev[rel] for f in p.files if f != rel}
    chosen = [rel for rel in parsed if not is_dev[rel] and rel not in included]
    for rel in chosen:
        _choose_file(out, rel, parsed[rel])
    for rel in parsed:
        if is_dev[rel] and rel not in included:
            out.comments.append(f"also found {rel} (add it to `from` if the reproduction installs it)")
    return parsed, chosen


def _choose_file(out: Discovery, rel: str, parsed: ParsedRequirements) -> None:
    """A requirements file `from` names: its local labels and PyTorch indexes as backends."""
    out.sources.append(rel)
    out.backends.extend(parsed.backends)
    nested = sorted(f for f in parsed.files if f != rel)
    if nested:
        out.comments.append(f"{rel} also reads {', '.join(nested)}")
    for name, origin in parsed.unset:
        out.comments.append(
            f"{origin.file}:{origin.line} needs ${{{name}}} set where you run `kernodeck lock`"
        )
    out.routes += [
        BackendRoute(backend, f"{ref.origin}: --{ref.kind} {ref.url}")
        for ref in parsed.indexes
        if (backend := _backend_name(ref.url)) is not None
    ]


def discover(directory: Path) -> Discovery:
    """The project's dependency sources and data folders (see the module docstring)."""
    root = directory.resolve()
    out = Discovery()
    parsed, chosen = _requirement_files(root, out)
    project_in_reqs = any(parsed[rel].project_included for rel in chosen)
    pyproject = root / "pyproject.toml"
    unread: str | None = None  # why pyproject.toml gave no dependencies
    if pyproject.is_file():
        try:
            unread = _read_pyproject(out, pyproject, root, project_in_reqs)
        except ManifestError as e:
            out.comments.append(f"not used: {_first_issue(e)}")
    _name_existing_lock(out, root)
    pipfile = find_pipfile(root)
    if pipfile is not None:
        _read_pipfile(out, pipfile)
    conda = find_conda_env(root)
    if conda is not None:
        _read_conda(out, conda, root)
    # `-e .` of a setup.py project cannot be read: setup's list is copied beside the file that has it
    installs_self = any(line.split()[-1] in (".", "./") for _, line in out.uncarried)
    setup = read_setup(root) if (installs_self or not out.sources) and not out.requirements else None
    if setup is not None:
        if unread in out.comments:  # "pyproject.toml has no [project] table": setup.py said more
            out.comments.remove(unread)
        unread = None
        _copy_setup(out, setup)
    out.data = propose_data(root)
    if not out.sources and not out.requirements:
        _say_missing(out, root, unread)
    return out


def _name_existing_lock(out: Discovery, root: Path) -> None:
    """A foreign lock of the project: what a first lock keeps from it (or why nothing)."""
    existing = project_lock(root)
    if existing is not None and existing.note is not None:
        out.comments.append(existing.note)
    if existing is not None and existing.pins:
        out.comments.append(
            f"{existing.file} found: a platform's first `kernodeck lock` keeps its {len(existing.pins)} pins "
            "where they still fit"
        )
    if existing is not None and existing.sdist_only:
        out.allow_sdist = _allow_sdist(existing.file, existing.sdist_only)


def _allow_sdist(file: str, found: tuple[tuple[str, str], ...]) -> tuple[list[str], str]:
    """[packages] allow-sdist for what the adopted lock has only as a source distribution (the
    project's own lock builds them from source), and the evidence: "uv.lock locks julius 0.2.7 as
    a source distribution only"."""
    names: list[str] = list(dict.fromkeys(str(canonicalize_name(name)) for name, _ in found))
    what = " and ".join(", ".join(f"{name} {version}".strip() for name, version in found).rsplit(", ", 1))
    kind = "a source distribution" if len(found) == 1 else "source distributions"
    return names, f"{file} locks {what} as {kind} only"


def _say_missing(out: Discovery, root: Path, unread: str | None) -> None:
    """No dependency list: why (pyproject.toml's, the projects in folders below, or none found);
    the folders below are named in repro.toml too."""
    if unread is not None:
        out.missing = unread
        return
    monorepo = _monorepo_note(root)
    if monorepo is not None:
        out.comments.append(monorepo)
    out.missing = monorepo or NO_DEPENDENCIES


def _read_pyproject(out: Discovery, pyproject: Path, root: Path, project_in_reqs: bool) -> str | None:
    """pyproject.toml's part: its [project] table (or Poetry's) in `from`, its Python range, uv's
    routing, its extras and groups named. Returns why it gave no dependencies, else None."""
    unread: str | None = None
    data = read_pyproject(pyproject, "pyproject.toml")
    project = data.get("project")
    poetry = read_poetry(data) if not isinstance(project, dict) and not project_in_reqs else None
    if poetry is not None and not out.sources and not poetry.unreadable:
        _read_poetry_from(out, poetry)
    elif poetry is not None and not out.sources:
        _copy_poetry(out, poetry)
    elif not isinstance(project, dict) and not project_in_reqs:
        unread = _without_project_table(data)
        out.comments.append(unread)
    if poetry is not None and out.sources:  # Poetry's python still says which Python
        _poetry_python(out, poetry)
    _uv_routes(out, data, project)
    if isinstance(project, dict):
        _requires_python(out, project)
        if project_in_reqs:
            out.comments.append("pyproject.toml is read through `-e .` in a requirements file")
        else:
            pp = parse_pyproject(pyproject, display_root=root)
            out.sources.insert(0, "pyproject.toml")
            out.backends.extend(pp.backends)
        _name_extras_and_groups(out, project, data.get("dependency-groups"), project_in_reqs)
        _name_pdm_groups(out, data)
    return unread


def _name_pdm_groups(out: Discovery, data: dict[str, object]) -> None:
    """PDM's development groups ([tool.pdm.dev-dependencies]): named, since `groups` selects PEP 735
    groups only."""
    tool = data.get("tool")
    pdm = tool.get("pdm") if isinstance(tool, dict) else None
    dev = pdm.get("dev-dependencies") if isinstance(pdm, dict) else None
    if isinstance(dev, dict) and dev:
        out.comments.append(
            f"[tool.pdm.dev-dependencies] {', '.join(sorted(dev))}: PDM's development groups, which `groups` "
            "cannot select (PEP 735 [dependency-groups] only): add what the reproduction installs to requirements"
        )


def _name_extras_and_groups(
    out: Discovery, project: dict[str, object], table: object, project_in_reqs: bool
) -> None:
    """The [project] extras and PEP 735 groups, named (not selected) in comments."""
    optional = project.get("optional-dependencies")
    extras = sorted(optional.keys()) if isinstance(optional, dict) else []
    groups = sorted(table) if isinstance(table, dict) else []
    if extras and not project_in_reqs:
        out.comments.append(f"extras = []   # the project has: {', '.join(extras)}")
    if groups and not project_in_reqs:
        out.comments.append(f"groups = []   # dependency groups: {', '.join(groups)}")
    elif groups:
        out.comments.append(
            f'dependency groups ({", ".join(groups)}): add "pyproject.toml" to `from` and name them '
            "in `groups = [...]` to lock them too"
        )


#: Where a folder's own project is declared, for `sub_projects`: the file, and a section header
#: that makes it a project's (a pyproject.toml or setup.cfg may hold only tool settings).
_PROJECT_FILES = (
    ("pyproject.toml", re.compile(r"^\[(project|tool\.poetry)\]\s*$", re.MULTILINE)),
    ("setup.py", None),
    ("setup.cfg", re.compile(r"^\[(metadata|options)\]\s*$", re.MULTILINE)),
)


def _declares_project(path: Path, header: re.Pattern[str] | None) -> bool:
    if not path.is_file():
        return False
    if header is None:
        return True
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return header.search(f.read(1_000_000)) is not None
    except OSError:
        return False


def sub_projects(root: Path) -> list[str]:
    """The projects of a monorepo: each visible first-level folder's pyproject.toml with a
    [project] or [tool.poetry] table, else its setup.py, else its setup.cfg with [metadata] or
    [options], relative to `root`, sorted. A folder holding projects side by side has no
    dependency list of its own: its development files are not the reproduction's."""
    found: list[str] = []
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    except OSError:
        return []
    for folder in folders:
        if (folder / "pyvenv.cfg").is_file():
            continue
        declared = next((n for n, h in _PROJECT_FILES if _declares_project(folder / n, h)), None)
        if declared is not None:
            found.append(f"{folder.name}/{declared}")
    return found


def _monorepo_note(root: Path) -> str | None:
    """What init says in a folder that holds projects in its first-level folders and none of its own."""
    projects = sub_projects(root)
    if not projects:
        return None
    folders = " or ".join(f"`kernodeck init {Path(p).parent.as_posix()}`" for p in projects)
    return (
        f"no project here, only in folders below ({', '.join(projects)}): run {folders} "
        "for the one the reproduction runs, or name its files in `from`"
    )


def _copy_setup(out: Discovery, deps: SetupDeps) -> None:
    """setup.py's (read, not run) or setup.cfg's install_requires, the project's only list: copied
    (`from` cannot read them), with what was left out and why (see formats.setuppy)."""
    out.requirements = deps.requirements
    if deps.requirements:
        out.comments.append(
            f"requirements: copied from {deps.file} install_requires, which `from` cannot read "
            f"({deps.file} is read, never run); edit them here from now on"
        )
    out.comments.extend(deps.notes)
    if deps.python:
        with contextlib.suppress(InvalidSpecifier):
            SpecifierSet(deps.python)
            out.python_range = (deps.python, f"{deps.file} python_requires = {deps.python!r}")


def _read_poetry_from(out: Discovery, deps: PoetryDeps) -> None:
    """Poetry's own dependency table, every entry a requirement can say: `from` reads it at lock
    time (so `poetry add` makes the lock stale), its extras and groups offered as [packages]
    extras and groups."""
    out.sources.insert(0, "pyproject.toml")
    out.comments.append(
        "pyproject.toml: its [tool.poetry.dependencies] are read at lock time (Poetry's ^ and ~ as "
        "PEP 440 ranges)"
    )
    extras = sorted(e for e, reqs in deps.optional.items() if reqs)
    groups = sorted(g for g, reqs in deps.groups.items() if reqs)
    if extras:
        out.comments.append(f"extras = []   # Poetry extras: {', '.join(extras)}")
    if groups:
        out.comments.append(f"groups = []   # Poetry groups: {', '.join(groups)}")
    out.comments.extend(deps.index_notes)
    _poetry_python(out, deps)


#: What init says of uv's conflicting routing extras, each selected on its variant's platform.
VARIANT_EXTRAS = (
    "each variant's [[platform]] selects its own in `extras` (as `uv sync --extra NAME` installs one "
    "at a time), none is selected for every platform"
)


def _uv_routes(out: Discovery, data: dict[str, object], project: object) -> None:
    """uv's torch routing ([tool.uv.sources] to PyTorch per-backend indexes) as backend routes.
    Routing extras that conflict (`[tool.uv] conflicts` lists them, or their ranges differ) are
    selected each on its variant's [[platform]] (`variant_extras`); others are selected in
    [packages] extras when they hold only projects of the PyTorch family (each platform's backend
    then picks torch's build), else named."""
    routes = torch_routes(data)
    out.routes += [BackendRoute(r.backend, r.evidence, r.extra, r.marker, r.base) for r in routes]
    by_extra = sorted({r.extra for r in routes if r.extra})
    table = project.get("optional-dependencies") if isinstance(project, dict) else None
    if not by_extra or not isinstance(table, dict):
        return
    names = ", ".join(by_extra)
    conflict = _conflict(data, table, by_extra)
    if conflict is not None:
        for r in routes:
            if r.extra:
                out.variant_extras.setdefault(r.backend, r.extra)
        out.comments.append(f"extras {names} {conflict}: {VARIANT_EXTRAS}")
        return
    only_torch = all(
        isinstance(table.get(e), list) and all(isinstance(r, str) and _names_torch(r) for r in table[e])
        for e in by_extra
    )
    if only_torch:
        why = (
            f"uv routes torch by these extras; each [[platform]]'s backend picks the build of {names}'s torch"
        )
        out.extras = (by_extra, why)
    else:
        out.comments.append(
            f"extras {names} route torch by backend in uv and require more than torch: select the one a "
            "platform needs in its [[platform]] `extras`"
        )


def _conflict(data: dict[str, object], table: dict[str, object], extras: list[str]) -> str | None:
    """How routing `extras` conflict, in words: `[tool.uv] conflicts` declares two of them
    conflicting, or they ask for different versions of the PyTorch family; None when neither."""
    tool = data.get("tool")
    uv = tool.get("uv") if isinstance(tool, dict) else None
    sets = uv.get("conflicts") if isinstance(uv, dict) else None
    wanted = {canonicalize_name(e) for e in extras}
    for group in sets if isinstance(sets, list) else []:
        named = {
            canonicalize_name(item["extra"])
            for item in (group if isinstance(group, list) else [])
            if isinstance(item, dict) and isinstance(item.get("extra"), str)
        }
        if len(named & wanted) > 1:
            return "are declared conflicting ([tool.uv] conflicts)"
    lists = [table.get(e) for e in extras]
    if all(isinstance(x, list) and all(isinstance(r, str) for r in x) for x in lists):
        with contextlib.suppress(InvalidRequirement):
            torch = [
                frozenset(t for t in _ranges(x) if routes_to_backend(t[0]))
                for x in lists
                if isinstance(x, list)
            ]
            if len(set(torch)) > 1:
                return "ask for different versions"
    return None


def _ranges(requirements: list[str]) -> frozenset[tuple[str, str]]:
    """(project, specifier) of an extra's requirements, to compare extras' version ranges."""
    return frozenset((canonicalize_name(r.name), str(r.specifier)) for r in map(Requirement, requirements))


def _backend_name(url: str) -> str | None:
    found = backend_of_index(url)
    return found[1] if found is not None else None


def _names_torch(requirement: str) -> bool:
    try:
        return routes_to_backend(Requirement(requirement).name)
    except InvalidRequirement:
        return False


def _requires_python(out: Discovery, project: dict[str, object]) -> None:
    """pyproject.toml's `requires-python` as the range [python] is chosen in."""
    spec = project.get("requires-python")
    if isinstance(spec, str):
        with contextlib.suppress(InvalidSpecifier):
            out.python_range = (
                str(SpecifierSet(spec)),
                f"pyproject.toml requires-python {SpecifierSet(spec)}",
            )


def _poetry_python(out: Discovery, deps: PoetryDeps) -> None:
    if deps.python is not None:
        with contextlib.suppress(ValueError):
            spec = poetry_specifier(deps.python)
            why = f"pyproject.toml [tool.poetry.dependencies] python = {deps.python!r}"
            out.python_range = (spec, why)


def _copy_poetry(out: Discovery, deps: PoetryDeps) -> None:
    """Poetry's own dependency table, the project's only list: its requirements copied (`from`
    cannot read it), with what was left out and why (see formats.poetrydeps)."""
    out.requirements = deps.requirements
    if deps.requirements:
        out.comments.append(
            "requirements: copied from pyproject.toml [tool.poetry.dependencies], Poetry's own format, "
            "which `from` cannot read (^ and ~ written as PEP 440 ranges); edit them here from now on"
        )
    out.comments.extend(deps.notes)
    _poetry_python(out, deps)


def _read_pipfile(out: Discovery, path: Path) -> None:
    """A Pipenv Pipfile: named as not used when the project has another dependency list; else
    `from` reads its [packages] at lock time (copied instead when an entry cannot be a
    requirement), and its [requires] Python gives [python] (see formats.pipfile)."""
    if out.sources or out.requirements:
        out.comments.append("also found Pipfile (Pipenv's, which `from` cannot read): not used")
        return
    try:
        deps = read_pipfile(path)
    except ManifestError as e:
        out.comments.append(f"not used: {_first_issue(e)}")
        return
    if deps.python is not None:
        out.python = (deps.python, f"Pipfile [requires] {deps.python_spec}")
    if not deps.unreadable:  # every entry a requirement: `from` reads it at lock time
        out.sources.append("Pipfile")
        out.comments.append("Pipfile: its [packages] are read at lock time")
        out.comments.extend(deps.notes)
        categories = [t for t, c in deps.categories.items() if c.requirements]
        if categories:
            out.comments.append(
                f"groups = []   # Pipfile package categories: {', '.join(categories)} "
                "(`pipenv install --dev` installs dev-packages)"
            )
        return
    out.requirements = deps.requirements
    out.comments.append(
        "requirements: copied from Pipfile [packages], Pipenv's own format, which `from` cannot "
        "read; edit them here from now on"
    )
    out.comments.extend(deps.notes)
    note = category_note(deps)
    if note is not None:
        out.comments.append(note)


def _read_conda(out: Discovery, path: Path, root: Path) -> None:
    """A conda environment file: named when the project has another dependency list; else its
    PyPI requirements are copied (`from` cannot read it), its pip: list's files go to `from`
    and its Python gives [python] (see formats.condaenv)."""
    name = path.name
    env = read_conda_env(path, name)
    if env.backend is not None:
        out.routes.append(BackendRoute(*env.backend))
    if env.python is not None and out.python is None:
        out.python = (env.python, f"{name}: {env.python_spec}")
    if out.sources or out.requirements:
        used = (
            f"; its {env.python_spec} gives [python]" if out.python and out.python[1].startswith(name) else ""
        )
        out.comments.append(
            f"also found {name} (a conda environment, which `from` cannot read): its packages not used{used}"
        )
        return
    for f in env.files:
        if (root / f).is_file() and not Path(f).is_absolute():
            out.sources.append(Path(f).as_posix())
        else:
            out.comments.append(f"{name}: -r {f}: no such file beside {name}")
    if env.requirements:
        out.requirements = env.requirements
        out.comments.append(
            f"requirements: copied from {name}, a conda environment, which `from` cannot read (conda "
            "names given as PyPI's: pytorch is torch); edit them here from now on"
        )
    notes = env.notes
    if env.installs_setup is not None:
        notes = _copy_installed_setup(out, env.installs_setup, notes, root)
    out.comments.extend(notes)


def _copy_installed_setup(out: Discovery, where: str, notes: list[str], root: Path) -> list[str]:
    """A conda pip: list's `-e .` of a setup.py / setup.cfg project: the literal install_requires
    are copied beside the environment's (those it names already are kept as the environment has
    them); returns the notes with the `-e .` one saying so."""
    setup = read_setup(root)
    if setup is None or not setup.requirements:
        return notes
    have = {_requirement_name(r) for r in out.requirements}
    added = [r for r in setup.requirements if _requirement_name(r) not in have]
    out.requirements = [*out.requirements, *added]
    said = f"{where}: -e .: the project itself: {setup.file} install_requires copied (read, never run)"
    said += f": {', '.join(added)}" if added else ": all already listed"
    return [said if n.startswith(f"{where}: -e .:") else n for n in notes] + setup.notes


def _requirement_name(text: str) -> str:
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return text


#: Files at least this large, outside the proposed folders, are proposed one by one.
LARGE_FILE = 10 * 1000 * 1000
_WEIGHT_SUFFIXES = {
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".safetensors",
    ".onnx",
    ".gguf",
    ".h5",
    ".pb",
    ".msgpack",
}
_SKIP_DIRS = {"node_modules", "__pycache__", "site-packages"}


#: Suffixes that make a folder named like a weights folder hold weights (not only code).
_FOLDER_WEIGHT_SUFFIXES = _WEIGHT_SUFFIXES | {
    ".npz",
    ".npy",
    ".pkl",
    ".pickle",
    ".joblib",
    ".keras",
    ".tflite",
    ".params",
    ".weights",
    ".model",
}


def _holds_weights(folder: Path, limit: int = 10000) -> bool:
    """Whether a `checkpoints`/`weights`/`models` folder holds at least one weight-like file
    (looked for among its first `limit` entries)."""
    for i, path in enumerate(folder.rglob("*")):
        if i >= limit:
            return True  # too large to tell: propose it, as before
        if path.suffix.lower() in _FOLDER_WEIGHT_SUFFIXES and path.is_file():
            return True
    return False


def _large_files(root: Path, skip: set[str]) -> list[Path]:
    """Files of at least LARGE_FILE bytes under `root`, outside hidden folders (.git, .venv),
    virtual environments and the folders in `skip` (top-level names)."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".")
            and d not in _SKIP_DIRS
            and not (here == root and d in skip)
            and not (here / d / "pyvenv.cfg").exists()
            and not (here / d).is_symlink()
        )
        for fn in sorted(filenames):
            p = here / fn
            try:
                if not p.is_symlink() and p.is_file() and p.stat().st_size >= LARGE_FILE:
                    out.append(p)
            except OSError:
                continue
    return out


def propose_data(root: Path) -> list[DataProposal]:
    """Top-level data and model folders, and large files elsewhere, with their fingerprints (the
    digests verify computes)."""
    out: list[DataProposal] = []
    for table, names in (("data", DATA_FOLDERS), ("weights", WEIGHT_FOLDERS)):
        for name in names:
            folder = root / name
            if not folder.is_dir() or folder.is_symlink():
                continue
            if table == "weights" and not _holds_weights(folder):
                continue  # e.g. YOLOv5's models/: the model's code and configs, not its weights
            try:
                fp = fingerprint(folder)
            except OSError:
                continue
            if not fp.files:
                continue
            out.append(DataProposal(table, name, name, fp.sha256, fp.files, fp.size))
    taken = {d.name for d in out}
    for path in _large_files(root, set(DATA_FOLDERS + WEIGHT_FOLDERS)):
        rel = path.relative_to(root).as_posix()
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._") or "file"
        name, n = base, 2
        while name in taken:
            name, n = f"{base}-{n}", n + 1
        taken.add(name)
        try:
            fp = fingerprint(path)
        except OSError:
            continue
        table = "weights" if path.suffix.lower() in _WEIGHT_SUFFIXES else "data"
        out.append(DataProposal(table, name, rel, fp.sha256, 1, fp.size))
    return out


#: Lock files of other tools whose pins a first `kernodeck lock` prefers, in this order.
PROJECT_LOCKS = tuple(fmt.NAME for fmt in formats.locks())


@dataclass(frozen=True)
class ProjectLock:
    file: str  # "uv.lock"
    pins: dict[str, Version]  # canonical name -> the one version the lock pins
    # what the user should know: the file was merged with conflicts (the pins between the markers
    # are left out), or no lock could be read (then `pins` is empty)
    note: str | None = None
    # (name, version) of each package it locks as a source distribution only (`formats.sdist_only`)
    sdist_only: tuple[tuple[str, str], ...] = ()


def _lock_note(name: str, merged: str | None, found: list[tuple[str, str]]) -> str | None:
    """What a first lock does with a project lock that has git conflict markers (`merged`) or
    pins a package at several versions (forked by markers); None when there is nothing to say."""
    said = []
    if merged:
        said.append(
            f"{merged}: a first lock prefers the pins outside them and resolves those between them afresh"
        )
    seen: dict[str, set[str]] = {}
    for pkg, version in found:
        seen.setdefault(canonicalize_name(pkg), set()).add(version)
    forked = sorted(k for k, v in seen.items() if len(v) > 1)
    if forked:
        said.append(
            f"{name} pins {', '.join(forked)} at several versions (forked by markers): a first lock "
            "does not prefer any of them and resolves them afresh"
        )
    return "; ".join(said) or None


def _single_pins(found: list[tuple[str, str]]) -> dict[str, Version]:
    """Canonical name -> version, sorted, for the packages pinned at exactly one valid version."""
    seen: dict[str, set[str]] = {}
    for pkg, version in found:
        seen.setdefault(canonicalize_name(pkg), set()).add(version)
    pins: dict[str, Version] = {}
    for pkg, versions in sorted(seen.items()):
        if len(versions) == 1:
            with contextlib.suppress(InvalidVersion):
                pins[pkg] = Version(next(iter(versions)))
    return pins


def project_lock(folder: Path) -> ProjectLock | None:
    """The pins of the project's existing lock (uv.lock, pylock.toml, poetry.lock, Pipfile.lock), if any.

    A package pinned at more than one version (a lock forked by markers) is left out: there is
    no single version to prefer. A lock merged with git conflict markers gives the pins outside
    the markers (those between them are resolved afresh, as with Kernodeck's own lock files),
    with a note. An unreadable lock is no preference (never an error); when no lock could be
    read, the first unreadable one comes back without pins, with a note saying why."""
    unread: ProjectLock | None = None
    for fmt in formats.locks():
        name = fmt.NAME
        path = folder / name
        if not path.is_file():
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        regions = conflict_regions(lines)
        lines = blank_conflicts(lines, regions)
        merged = f"{name} has git merge conflict markers ({regions_text(regions)})" if regions else None
        data = parse_text("\n".join(lines), name, fmt.SYNTAX)
        if isinstance(data, Unreadable):
            if unread is None:
                syntax = fmt.SYNTAX.upper()
                why = (
                    f"{merged} and is not valid {syntax} without them"
                    if merged
                    else f"{name} is not valid {syntax} ({data.reason})"
                )
                unread = ProjectLock(name, {}, f"{why}: a first lock does not prefer its pins")
            continue
        found = fmt.pins(data)
        if found is None:
            continue
        sdists = tuple((p.name, p.version) for p in formats.sdist_only(fmt.evidence(data).packages))
        return ProjectLock(name, _single_pins(found), _lock_note(name, merged, found), sdists)
    compiled = sorted(_compiled_pairs(folder)[0])
    if compiled:  # a pip-tools layout: the compiled files are its lock
        pinned: dict[str, set[Version]] = {}
        for txt in compiled:
            for key, found in read_pins(txt).items():
                pinned.setdefault(key, set()).add(found)
        files = ", ".join(t.relative_to(folder).as_posix() for t in compiled)
        agreed = {k: next(iter(v)) for k, v in sorted(pinned.items()) if len(v) == 1}
        return ProjectLock(files, agreed, unread.note if unread is not None else None)
    return unread


def first_lock_source(folder: Path) -> tuple[str, dict[str, Version], str | None] | None:
    """What a platform's first lock prefers, the file it comes from and a note about that file
    (see `ProjectLock.note`): the installed versions `init --from-env` recorded, else the pins of
    the project's existing lock, if any."""
    from kernodeck.manifest.fromenv import ENV_PINS, read_env_pins

    env_pins = read_env_pins(folder)
    if env_pins is not None:
        return ENV_PINS, env_pins, None
    found = project_lock(folder)
    return (found.file, dict(found.pins), found.note) if found is not None else None


def first_lock_preferences(folder: Path) -> dict[str, Version]:
    """What a platform's first lock prefers (see `first_lock_source`)."""
    found = first_lock_source(folder)
    return dict(found[1]) if found is not None else {}
