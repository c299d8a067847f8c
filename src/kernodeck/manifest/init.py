"""`kernodeck init`: a commented starter repro.toml for a project folder, written with tomlkit.

Facts about this machine are gathered by small functions that take what they read as arguments
with host defaults at the edge, so tests can give them other values.
"""

from __future__ import annotations

import datetime as _dt
import platform as _platform
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement

from kernodeck.errors import UsageError
from kernodeck.fsio import atomic_write_text
from kernodeck.gitstate import GitState, git_state
from kernodeck.manifest.load import loads_manifest, parse_toml


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


def host_facts() -> HostFacts:
    """This machine, as a platform entry."""
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
    try:
        torch_version: str | None = importlib_metadata.version("torch")
    except importlib_metadata.PackageNotFoundError:
        torch_version = None
    facts.backend, note = torch_backend(os_name, torch_version)
    if note:
        facts.notes.append(note)
    return facts


def project_requirements(directory: Path, skipped: list[str] | None = None) -> tuple[list[str], str | None]:
    """Requirements from pyproject.toml [project.dependencies], else requirements.txt. Entries
    that are not valid requirements are left out and appended to `skipped`."""
    skipped = [] if skipped is None else skipped
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file():
        data = parse_toml(pyproject.read_text(encoding="utf-8"), str(pyproject))
        project = data.get("project")
        deps = project.get("dependencies") if isinstance(project, dict) else None
        if isinstance(deps, list):
            keep = [d for d in deps if isinstance(d, str) and _valid(d)]
            skipped.extend(
                d if isinstance(d, str) else repr(d) for d in deps if not isinstance(d, str) or not _valid(d)
            )
            return keep, "pyproject.toml [project.dependencies]"
    reqs = directory / "requirements.txt"
    if reqs.is_file():
        out = []
        for line in reqs.read_text(encoding="utf-8").splitlines():
            line = line.split(" #", 1)[0].strip()
            if not line or line.startswith(("#", "-")):
                continue
            line = line.split(" \\", 1)[0].split(" --hash", 1)[0].strip()
            if _valid(line):
                out.append(line)
            else:
                skipped.append(line)
        return out, "requirements.txt"
    return [], None


def _valid(req: str) -> bool:
    try:
        Requirement(req)
    except InvalidRequirement:
        return False
    return True


def _platform_name(f: HostFacts) -> str:
    return f"{f.os}-{f.arch}" + (f"-{f.backend}" if f.backend else "")


def starter_document(
    directory: Path,
    *,
    name: str | None = None,
    facts: HostFacts | None = None,
    git: GitState | None = None,
    today: _dt.date | None = None,
) -> tomlkit.TOMLDocument:
    """The starter manifest as a tomlkit document (comments included)."""
    facts = facts or host_facts()
    today = today or _dt.date.today()
    ref_name = name or re.sub(r"[^A-Za-z0-9._-]+", "-", directory.resolve().name).strip("-.") or "project"
    if not re.match(r"[A-Za-z0-9]", ref_name):
        ref_name = "project"
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Reproduction manifest written by `kernodeck init`. Commit it next to the code."))
    doc.add(tomlkit.comment("Check it with `kernodeck validate`, lock it with `kernodeck lock`."))
    doc.add(
        tomlkit.comment("Editor completion: `kernodeck schema > repro.schema.json`, then make the first line")
    )
    doc.add(tomlkit.comment("of this file `#:schema ./repro.schema.json`."))
    doc.add("schema-version", 1)
    doc.add(tomlkit.nl())

    ref = tomlkit.table()
    ref.add("name", ref_name)
    _kv(ref, "id", f"{today.isoformat()}.1", "a new id whenever what the reference reproduces changes")
    doc.add("reference", ref)

    if git is not None:
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
    else:
        doc.add(
            tomlkit.comment(
                '[code] revision = "<full git sha>"  (not a git checkout: add it once there is one)'
            )
        )
        doc.add(tomlkit.nl())

    py = tomlkit.table()
    _kv(py, "version", facts.python_version, '"3.11" = any 3.11.x; "3.11.7" = exactly that')
    py.add("implementation", facts.implementation)
    doc.add("python", py)

    skipped: list[str] = []
    reqs, source = project_requirements(directory, skipped)
    pk = tomlkit.table()
    if source:
        pk.add(tomlkit.comment(f"from {source}"))
    for bad in skipped:
        pk.add(tomlkit.comment(f"left out, not a valid requirement: {' '.join(bad.split())[:200]}"))
    arr = tomlkit.array()
    for r in reqs:
        arr.append(r)
    if reqs:
        arr.multiline(True)
    pk.add("requirements", arr)
    pk.add("constraints", tomlkit.array())
    _kv(pk, "allow-sdist", tomlkit.array(), "names that may be locked as source distributions")
    pk.add("prereleases", False)
    doc.add("packages", pk)

    plats = tomlkit.aot()
    p = tomlkit.table()
    p.add(tomlkit.comment("this machine; add one [[platform]] per target (see DESIGN.md)"))
    p.add("name", _platform_name(facts))
    p.add("os", facts.os)
    p.add("arch", facts.arch)
    if facts.glibc:
        p.add("glibc", facts.glibc)
    if facts.macos:
        p.add("macos", facts.macos)
    if facts.backend:
        _kv(p, "backend", facts.backend, "; ".join(facts.notes) or None)
    plats.append(p)
    doc.add("platform", plats)

    sysm = tomlkit.table()
    gpu = facts.backend is not None and facts.backend not in ("cpu",)
    _kv(sysm, "require-accelerator", gpu, "true: a GPU run never falls back to the CPU")
    doc.add("system", sysm)
    return doc


def _kv(table: Any, key: str, value: Any, comment: str | None) -> None:
    item = tomlkit.item(value)
    if comment:
        item.comment(comment)
    table.add(key, item)


def write_starter(directory: Path, *, force: bool = False, name: str | None = None) -> Path:
    """Write DIRECTORY/repro.toml; refuses to overwrite without force. Returns the path."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a folder")
    path = directory / "repro.toml"
    if path.exists() and not force:
        raise UsageError(f"{path} already exists", hint="pass --force to overwrite it")
    state = git_state(directory)
    text = tomlkit.dumps(
        starter_document(directory, name=name, git=state if isinstance(state, GitState) else None)
    )
    loads_manifest(text, str(path))  # the starter must validate; a failure here is a bug, not bad input
    atomic_write_text(path, text)
    return path
