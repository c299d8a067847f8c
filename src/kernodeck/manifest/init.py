"""`kernodeck init`: a commented starter repro.toml for a project folder, written with tomlkit.

Facts about this machine are gathered by small functions that take what they read as arguments
with host defaults at the edge, so tests can give them other values.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import platform as _platform
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Table

from kernodeck.backends import PYTORCH_INDEX_BASE
from kernodeck.errors import UsageError
from kernodeck.gitstate import GitState, git_state
from kernodeck.lockfile.names import MANIFEST_NAME
from kernodeck.manifest.adopt import VARIANT_EXTRAS, BackendRoute, Discovery, discover
from kernodeck.manifest.edit import editing
from kernodeck.manifest.fromenv import ENV_PINS, EnvAdoption, write_env_pins
from kernodeck.manifest.load import loads_manifest
from kernodeck.manifest.lockplatforms import Covered, Found, marker_holds_on, os_runs, platform_evidence
from kernodeck.manifest.schema import Python
from kernodeck.support.fsio import atomic_write_text

#: What init writes where [code] would be, outside a git checkout (or before its first commit);
#: `kernodeck capture` replaces it with the [code] table once there is a revision.
NO_CODE_YET = (
    '[code] revision = "<full git sha>"  (not a git checkout yet: `kernodeck capture` records it '
    "after the first commit)"
)


@dataclass
class HostFacts:
    python_version: str
    implementation: str
    os: str
    arch: str
    glibc: str | None = None
    macos: str | None = None
    backend: str | None = None
    notes: list[str] = field(default_factory=list)
    python_note: str | None = None  # where python_version came from, when it is not the usual


def torch_backend(os_name: str, dist_version: str | None) -> tuple[str | None, str | None]:
    """The backend of an installed torch build, read from its version's local label, no import.

    Returns (backend, note). `2.6.0+cu126` -> cu126; `+cpu` -> cpu; `+rocm6.2` -> rocm6.2. A build
    without a label comes from the default index: on macOS that is the mps build.
    """
    if dist_version is None:
        return None, None
    local = dist_version.partition("+")[2]
    if local:
        if re.fullmatch(r"cpu|xpu|cu\d{2,3}|rocm\d+\.\d+(\.\d+)?", local):
            return local, f"torch {dist_version} is installed"
        return None, f"torch {dist_version} has an unknown local label; set backend by hand"
    if os_name == "macos":
        return "mps", f"torch {dist_version} is installed (macOS build)"
    return None, f"torch {dist_version} is installed from the default index (no backend: PyPI's build)"


_TARGET_FACTS = (
    "import sys, json\n"
    "try:\n"
    "    from importlib.metadata import version\n"
    "    torch = version('torch')\n"
    "except Exception:\n"
    "    torch = None\n"
    "print(json.dumps([sys.version_info[0], sys.version_info[1], sys.implementation.name, torch]))\n"
)


def _interpreter_facts(python: str) -> tuple[str, str, str | None] | None:
    """(major.minor, implementation, torch's version) of another interpreter; None when it
    cannot tell (then this one's are used)."""
    import json
    import subprocess

    try:
        out = subprocess.run(
            [python, "-I", "-c", _TARGET_FACTS], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        major, minor, impl, torch = json.loads(out.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, TypeError):
        return None
    return (
        f"{major}.{minor}",
        "pypy" if impl == "pypy" else "cpython",
        torch if isinstance(torch, str) else None,
    )


def project_interpreter(directory: Path) -> str | None:
    """The project's own interpreter, when it is not the one running Kernodeck: the activated
    environment or the project's `.venv` (`interpreters.choose`); None otherwise."""
    from kernodeck.interpreters import Source, choose

    try:
        chosen = choose(project=directory)
    except UsageError:  # Kernodeck runs from a tool environment and the project has none yet
        return None
    return None if chosen.source is Source.RUNNING else chosen.path


#: CPython versions a starter may name when the running one does not fit the project, newest first.
_PYTHONS = ("3.14", "3.13", "3.12", "3.11", "3.10", "3.9", "3.8")


_PYTHON_VERSION_FILE = re.compile(r"^(?:cpython-|python)?(3\.\d+)(?:\.\d+)?\s*$")


def pinned_python(directory: Path) -> tuple[str, str] | None:
    """(major.minor, why) from the project's `.python-version` (what pyenv and uv run it with:
    `3.11`, `3.11.7`, `cpython-3.11`), or None when it names no CPython."""
    try:
        lines = (directory / ".python-version").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    first = next((ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    m = _PYTHON_VERSION_FILE.match(first)
    return (m.group(1), f".python-version: {first}") if m is not None else None


#: What a project may say its Python is with, for the comment when it says nothing.
_PYTHON_EVIDENCE = ".python-version, requires-python, a conda file's python, Poetry's or Pipfile's python"


def project_python(facts: HostFacts, found: Discovery, directory: Path) -> HostFacts:
    """`facts` with the Python the project itself names, and a comment naming the evidence, first
    found of: `.python-version`; a conda environment file's `python=` or a Pipfile's
    `python_version` (`found.python`); the newest Python a range allows (`requires-python`,
    Poetry's `python`, setup's `python_requires`: `found.python_range`), this machine's when it
    fits. This machine's Python only when the project names none, and the comment says so."""
    exact = pinned_python(directory) or found.python
    if exact is not None:
        return dataclasses.replace(facts, python_version=exact[0], python_note=exact[1])
    if found.python_range is not None:
        spec, why = found.python_range
        fit = _python_within(spec, facts.python_version)
        note = (
            f"{why}; Kernodeck runs on {facts.python_version}"
            if fit != facts.python_version
            else f"{why}: this machine's {fit} fits"
        )
        return dataclasses.replace(facts, python_version=fit, python_note=note)
    note = f"this machine's: the project names no Python ({_PYTHON_EVIDENCE})"
    return dataclasses.replace(facts, python_note=note)


def host_facts(python: str | None = None) -> HostFacts:
    """This machine, as a platform entry; Python and torch those of `python` (the project's
    interpreter) when given, else of the interpreter running Kernodeck."""
    system = _platform.system()
    os_name = {"Linux": "linux", "Darwin": "macos", "Windows": "windows"}.get(system, "linux")
    machine = _platform.machine().lower()
    arch = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64" if os_name == "linux" else "arm64"}.get(
        machine, machine
    )
    if os_name == "macos" and arch == "aarch64":
        arch = "arm64"
    if arch not in ("x86_64", "aarch64", "arm64", "ppc64le", "s390x", "armv7l", "i686"):
        arch = "x86_64"
    facts = HostFacts(
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        implementation="pypy" if sys.implementation.name == "pypy" else "cpython",
        os=os_name,
        arch=arch,
    )
    if os_name == "linux":
        lib, ver = _platform.libc_ver()
        if lib == "glibc" and ver:
            facts.glibc = ".".join(ver.split(".")[:2])
    elif os_name == "macos":
        ver = _platform.mac_ver()[0]
        if ver:
            facts.macos = ".".join(([*ver.split("."), "0"])[:2])
    target = _interpreter_facts(python) if python is not None else None
    torch_version: str | None
    if target is not None:
        facts.python_version, facts.implementation, torch_version = target
    else:
        try:
            torch_version = importlib_metadata.version("torch")
        except importlib_metadata.PackageNotFoundError:
            torch_version = None
    facts.backend, note = torch_backend(os_name, torch_version)
    if note:
        facts.notes.append(note)
    return facts


def _python_within(spec: str, current: str) -> str:
    """`current` (major.minor) when a release of it meets `spec`, else the newest of `_PYTHONS`
    that does (the current one when none does: the lock then says why), as for requires-python."""
    from packaging.specifiers import SpecifierSet

    allowed = SpecifierSet(spec)

    def fits(minor: str) -> bool:
        return any(allowed.contains(f"{minor}.{patch}", prereleases=True) for patch in range(40))

    if fits(current):
        return current
    return next((v for v in _PYTHONS if fits(v)), current)


def _platform_name(f: HostFacts, backend: str | None) -> str:
    return f"{f.os}-{f.arch}" + (f"-{backend}" if backend else "")


def starter_document(
    directory: Path,
    *,
    name: str | None = None,
    facts: HostFacts | None = None,
    git: GitState | None = None,
    today: _dt.date | None = None,
    env: EnvAdoption | None = None,
    found: Discovery | None = None,
) -> tomlkit.TOMLDocument:
    """The starter manifest as a tomlkit document (comments included). With `env` (an adopted
    environment) the requirements are its leaves and Python and torch's backend are its own.
    `found`: the project's `discover` (made here when not given)."""
    facts = facts or host_facts()
    if env is not None:
        backend, note = torch_backend(facts.os, env.torch_version)
        facts = dataclasses.replace(
            facts,
            python_version=env.python_version,
            implementation=env.implementation,
            backend=backend,
            notes=[note] if note else [],
        )
    today = today or _dt.date.today()
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Reproduction manifest written by `kernodeck init`. Commit it next to the code."))
    doc.add(tomlkit.comment("Check it with `kernodeck validate`, lock it with `kernodeck lock`."))
    doc.add(
        tomlkit.comment("Every key: `kernodeck schema` (JSON Schema). Editor completion: `kernodeck schema >")
    )
    doc.add(tomlkit.comment("repro.schema.json`, then make the first line of this file"))
    doc.add(tomlkit.comment("`#:schema ./repro.schema.json`."))
    doc.add("schema-version", 1)
    doc.add(tomlkit.nl())

    ref = tomlkit.table()
    ref.add("name", _reference_name(directory, name))
    _kv(ref, "id", f"{today.isoformat()}.1", "a new id whenever what the reference reproduces changes")
    doc.add("reference", ref)
    _add_code(doc, git)

    found = found or discover(directory)
    if env is None and facts.python_note is None:  # else a project environment's: it runs the project
        facts = project_python(facts, found, directory)
    py = tomlkit.table()
    _kv(
        py,
        "version",
        facts.python_version,
        facts.python_note or '"3.11" = any 3.11.x; "3.11.7" = exactly that',
    )
    py.add("implementation", facts.implementation)
    doc.add("python", py)

    if env is not None:
        _adopt_env(found, env, directory)
    doc.add("packages", _packages_table(found, env))

    variants, left_out = _variants(found, facts)
    allowed, _ = _proposed_sdists(found, env)
    plats = _platforms(directory, facts, variants, left_out, found.routes, allowed)
    _select_variant_extras(plats, found.variant_extras)
    doc.add("platform", plats)

    sysm = tomlkit.table()
    gpu = all(b is not None and b != "cpu" for b, _ in variants)
    _kv(sysm, "require-accelerator", gpu, "true: a GPU run never falls back to the CPU")
    doc.add("system", sysm)
    _add_data_proposals(doc, found)
    return doc


def _reference_name(directory: Path, name: str | None) -> str:
    """[reference].name: the one given, else the folder's name in the characters a name allows."""
    ref_name = name or re.sub(r"[^A-Za-z0-9._-]+", "-", directory.resolve().name).strip("-.") or "project"
    if not re.match(r"[A-Za-z0-9]", ref_name):
        ref_name = "project"
    return ref_name


def _add_code(doc: tomlkit.TOMLDocument, git: GitState | None) -> None:
    """[code] at the git revision (or, outside git, the comment saying how to add it)."""
    if git is None:
        doc.add(tomlkit.comment(NO_CODE_YET))
        doc.add(tomlkit.nl())
        return
    code = tomlkit.table()
    code.add("revision", git.revision)
    _kv(
        code,
        "allow-dirty",
        False,
        "the tree had uncommitted changes: commit them, or set true" if git.dirty else None,
    )
    code.add("config", tomlkit.array())
    doc.add("code", code)


def _packages_table(found: Discovery, env: EnvAdoption | None) -> Table:
    """[packages]: where the project keeps its requirements (or an adopted environment's leaves)."""
    pk = tomlkit.table()
    if found.sources:
        pk.add(tomlkit.comment("read at lock time from where the project keeps them (not copied here):"))
        arr = tomlkit.array()
        arr.extend(found.sources)
        pk.add("from", arr)
    for line in found.comments:
        pk.add(tomlkit.comment(line))
    reqs = tomlkit.array()
    copied = env.requirements if env is not None else found.requirements
    reqs.extend(copied)
    reqs.multiline(len(copied) > 3)
    _kv(
        pk,
        "requirements",
        reqs,
        None
        if copied
        else ("more requirements, beside those in `from`" if found.sources else 'e.g. "numpy>=1.26"'),
    )
    if found.extras is not None:
        chosen = tomlkit.array()
        chosen.extend(found.extras[0])
        _kv(pk, "extras", chosen, found.extras[1])
    pk.add("constraints", tomlkit.array())
    base = next((r.base for r in found.routes if r.base), None)
    if base is not None and base.rstrip("/") != PYTORCH_INDEX_BASE:
        _kv(pk, "pytorch-index", base, "the PyTorch index base the project's uv indexes are under")
    allowed, why = _proposed_sdists(found, env)
    sdists = tomlkit.array()
    sdists.extend(allowed)
    _kv(pk, "allow-sdist", sdists, why or "names that may be locked as source distributions")
    pk.add("prereleases", False)
    return pk


def _proposed_sdists(found: Discovery, env: EnvAdoption | None) -> tuple[list[str], str | None]:
    """allow-sdist's names and why: what the adopted lock has only as a source distribution (an
    adopted environment is the source instead: none)."""
    if env is not None or found.allow_sdist is None:
        return [], None
    return found.allow_sdist


def _platforms(
    directory: Path,
    facts: HostFacts,
    variants: list[tuple[str | None, str | None]],
    left_out: list[str],
    routes: Sequence[BackendRoute],
    allow_sdist: Sequence[str] = (),
) -> AoT:
    """[[platform]]: this host's (one per backend variant, each saying when the project's lock
    does not cover it), then those the project's evidence covers (one per variant its OS runs),
    then why the platforms a lock's markers allow but its wheels rule out are not proposed."""
    python = Python.model_validate({"version": facts.python_version, "implementation": facts.implementation})
    found = platform_evidence(directory, python, routes, host=(facts.os, facts.arch), allow_sdist=allow_sdist)
    plats = tomlkit.aot()
    for backend, why in variants:
        note = _host_note(found, facts, backend)
        plats.append(_host_platform(facts, backend, why, variant=len(variants) > 1, note=note))
    for line in left_out:
        plats[0].add(tomlkit.comment(line))
    names = {str(t["name"]) for t in plats}
    host = (facts.os, facts.arch)
    for c in found.covered:
        other = c.platform
        if other.name in names or (other.backend is None and (other.os, other.arch) == host):
            continue
        plats.append(_covered_table(c))
    for u in found.uncovered:  # what the markers allow but the wheels rule out
        if u.allowed is not None and (u.os, u.arch) != host:
            plats[-1].add(tomlkit.comment(u.comment))
    return plats


def _select_variant_extras(plats: AoT, variant_extras: Mapping[str, str]) -> None:
    """Each variant platform selects its backend's routing extra (uv's conflicting extras: one
    at a time), this machine's and those proposed from a lock alike."""
    for table in plats:
        extra = variant_extras.get(str(table.get("backend", "")))
        if extra is not None:
            arr = tomlkit.array()
            arr.append(extra)
            _kv(table, "extras", arr, f"as `uv sync --extra {extra}` installs this variant")


def _host_note(found: Found, facts: HostFacts, backend: str | None) -> str | None:
    """What the project's locks say against this machine's platform (in `backend`'s variant),
    when none covers it; None when one does or none says anything about it."""
    host = (facts.os, facts.arch)
    if any(
        (c.platform.os, c.platform.arch) == host and c.platform.backend in (backend, None)
        for c in found.covered
    ):
        return None
    notes = [u.host_note for u in found.uncovered if (u.os, u.arch) == host and u.backend in (backend, None)]
    return "; ".join(dict.fromkeys(notes)) or None


def _covered_table(c: Covered) -> Table:
    q = tomlkit.table()
    q.add(tomlkit.comment(c.comment))
    q.add("name", c.platform.name)
    q.add("os", c.platform.os)
    q.add("arch", c.platform.arch)
    if c.platform.backend:
        q.add("backend", c.platform.backend)
    return q


def _adopt_env(found: Discovery, env: EnvAdoption, directory: Path) -> None:
    """`from` and the comments of [packages] for an adopted environment: the environment is the
    source; the project's files are named only when the project itself is installed editable."""
    others = found.sources
    found.sources = (
        ["pyproject.toml"] if env.project_editable and (directory / "pyproject.toml").is_file() else []
    )
    found.backends = []
    lead = [
        f"requirements: the {len(env.requirements)} installed distributions nothing else installed requires "
        f"(of {env.installed}; pip, setuptools, wheel and kernodeck left out)",
        f"their installed versions are in {ENV_PINS}: the first `kernodeck lock` prefers them",
    ]
    lead += [f"not locked: {line}" for line in env.not_locked]
    lead += [
        f"also found {s} (the environment was adopted instead; add it to `from` to use it)"
        for s in others
        if s not in found.sources
    ]
    # the environment's versions are what the first lock prefers, not those of a project lock
    found.requirements = []  # copied from a conda file: the environment's leaves are used instead
    if not found.sources:  # no pyproject.toml in `from`: no extras of it to select per platform
        found.variant_extras = {}
    found.comments = lead + [
        c
        for c in found.comments
        if not c.startswith(("extras =", "groups =", "requirements: copied from"))
        and "first `kernodeck lock` keeps its" not in c
        and (found.variant_extras or VARIANT_EXTRAS not in c)
    ]


def _host_platform(
    facts: HostFacts, backend: str | None, why: str | None, *, variant: bool, note: str | None = None
) -> Any:
    """This machine as a [[platform]] table with `backend`; `variant`: one of several the project
    routes torch to (then its comment names the variant, not only the machine); `note`: what the
    project's lock says against it (this machine stays: verify runs here)."""
    p = tomlkit.table()
    lead = "this machine" + (f", the project's {backend} variant" if variant else "")
    more = "add one [[platform]] per target (every key: `kernodeck schema`)"
    if note is not None:
        p.add(tomlkit.comment(f"{lead}; {note}"))
    p.add(tomlkit.comment(more if note is not None else f"{lead}; {more}"))
    p.add("name", _platform_name(facts, backend))
    p.add("os", facts.os)
    p.add("arch", facts.arch)
    if facts.glibc:
        p.add("glibc", facts.glibc)
    if facts.macos:
        p.add("macos", facts.macos)
    if backend:
        _kv(p, "backend", backend, why)
    elif why:  # why there is none: torch installed from the default index, or not required
        p.add(tomlkit.comment(why))
    return p


def _variants(found: Discovery, facts: HostFacts) -> tuple[list[tuple[str | None, str | None]], list[str]]:
    """(backend, why) of each platform of this machine: one per backend the project routes torch
    to (found.routes) that this machine runs, in the order found, each with its evidence; else
    the one a local label (`torch==2.3.0+cu121`) or the installed torch says. Second: why each
    other backend routed to is not proposed here."""
    seen: dict[str, str] = {}
    labelled = _backend_from_sources(found, facts)  # a pin's label is the most exact evidence
    if labelled is not None:
        seen[labelled[0]] = labelled[1]
    left_out: dict[str, str] = {}
    python = Python.model_validate({"version": facts.python_version, "implementation": facts.implementation})
    for route in found.routes:
        if route.backend in seen or route.backend in left_out:
            continue
        if not os_runs(facts.os, route.backend):
            left_out[route.backend] = (
                f"{route.evidence}: not proposed ({facts.os} runs no {route.backend} build)"
            )
        elif not marker_holds_on(facts.os, facts.arch, python, route.marker):
            left_out[route.backend] = (
                f"{route.evidence}: not proposed (the marker does not hold on this machine)"
            )
        else:
            seen[route.backend] = route.evidence
    lines = [
        f"{why}; add a [[platform]] for a machine that takes it"
        for b, why in left_out.items()
        if b not in seen
    ]
    return (list(seen.items()) or [(facts.backend, "; ".join(facts.notes) or None)]), lines


def _backend_from_sources(found: Discovery, facts: HostFacts) -> tuple[str, str] | None:
    """The host platform's backend from a local label in the sources (`torch==2.3.0+cu121`)."""
    for hint in found.backends:
        if os_runs(facts.os, hint.backend) and hint.backend != "mps":
            return hint.backend, f"{hint.origin}: {hint.project}=={hint.version}+{hint.backend}"
    return None


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} bytes"


def _add_data_proposals(doc: tomlkit.TOMLDocument, found: Discovery) -> None:
    """Data and model folders as commented-out entries, with their fingerprints."""
    if not found.data:
        return
    doc.add(tomlkit.nl())
    doc.add(
        tomlkit.comment("Found in the project; uncomment what the reproduction reads. Each sha256 is the")
    )
    doc.add(tomlkit.comment("fingerprint now (`kernodeck capture --data NAME` records it again)."))
    for d in found.data:
        doc.add(tomlkit.comment(f"[[{d.table}]]"))
        doc.add(tomlkit.comment(f'name = "{d.name}"'))
        doc.add(tomlkit.comment(f'path = "{d.path}"'))
        count = (
            f"{d.files} file{'s' if d.files != 1 else ''}, " if d.files != 1 or d.path in (d.name,) else ""
        )
        doc.add(tomlkit.comment(f'sha256 = "{d.sha256}"   # {count}{_size(d.size)}'))
        doc.add(tomlkit.nl())


def _kv(table: Any, key: str, value: Any, comment: str | None) -> None:
    item = tomlkit.item(value)
    if comment:
        item.comment(comment)
    table.add(key, item)


def write_starter(
    directory: Path, *, force: bool = False, name: str | None = None, env: EnvAdoption | None = None
) -> tuple[Path, list[str]]:
    """Write DIRECTORY/repro.toml; refuses to overwrite without force. Returns the path and the
    notes to show (no dependency list found: why, and what to do).

    `env`: an adopted environment (`fromenv.adopt_environment`); its installed versions are
    written to ENV_PINS beside repro.toml."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a folder")
    path = directory / MANIFEST_NAME
    if path.exists() and not force:
        raise UsageError(f"{path} already exists", hint="pass --force to overwrite it")
    state = git_state(directory)
    interpreter = project_interpreter(directory) if env is None else None
    facts = host_facts(interpreter) if env is None else None
    if facts is not None and interpreter is not None:
        facts.python_note = f"the project's environment runs {facts.python_version}"
    found = discover(directory)
    notes = [found.missing] if found.missing is not None and env is None else []
    notes += [
        f"{where}: a line a lock cannot take; `kernodeck validate` and `lock` fail there until it is "
        "fixed or listed under [packages] skip (see the comment in repro.toml)"
        for where, _ in found.uncarried
    ]
    git = state if isinstance(state, GitState) else None
    text = tomlkit.dumps(starter_document(directory, name=name, facts=facts, git=git, env=env, found=found))
    if facts is not None and facts.backend is not None and _locks_torch(text, path) is False:
        # an installed torch says which build an environment has; a project whose requirements
        # name no torch needs no backend (verify would then look for a torch nothing installs)
        said = f"{'; '.join(facts.notes)}, but the project requires no torch: no backend"
        facts = dataclasses.replace(facts, backend=None, notes=[said])
        text = tomlkit.dumps(
            starter_document(directory, name=name, facts=facts, git=git, env=env, found=found)
        )
    loads_manifest(text, str(path))  # the starter must validate; a failure here is a bug, not bad input
    with editing(path):  # another process may have written one meanwhile: checked again, under the lock
        if path.exists() and not force:
            raise UsageError(f"{path} already exists", hint="pass --force to overwrite it")
        if env is not None:
            write_env_pins(directory, env)
        atomic_write_text(path, text)
    return path, notes


def _locks_torch(text: str, path: Path) -> bool | None:
    """Whether the starter `text` (for `path`) locks torch: its `[packages] requirements` or what
    its `from` sources require, on any platform; None when it requires nothing yet or its sources
    cannot be read (then an installed torch is the only evidence of the build, and stays)."""
    from packaging.requirements import InvalidRequirement, Requirement

    from kernodeck.errors import KernodeckError
    from kernodeck.manifest.sources import read_sources

    manifest = loads_manifest(text, str(path))
    try:
        found = read_sources(manifest, path)
    except KernodeckError:
        return None
    every = [*manifest.packages.requirements, *found.requirements]
    every += [r for own in found.platform_requirements.values() for r in own]
    if not every:
        return None
    for line in every:
        try:
            if Requirement(line).name.lower() == "torch":
                return True
        except InvalidRequirement:
            continue
    return False
