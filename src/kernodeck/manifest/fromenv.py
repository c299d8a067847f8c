"""`kernodeck init --from-env PYTHON`: adopt a working environment.

    adoption = adopt_environment(".venv/bin/python")
    adoption.requirements   # ["numpy", "torch"]: the leaves (what nothing else installed requires)
    adoption.pins           # {"numpy": "1.26.4", ...}: every installed version, kept as preferences
    adoption.not_locked     # editable and direct-URL installs, each with what to do about it

The installed distributions come from Kernodeck's own environment probe (probe/script.py) run
under that interpreter, so nothing parses `pip freeze`. The leaves are what `pip list
--not-required` lists: a distribution is required when another installed one requires it under the
environment's markers (without extras, as pip evaluates them). pip, setuptools, wheel and
Kernodeck itself are never requirements (what only they require is not one either). An editable or direct-URL install cannot be locked from an
index: it is reported (never dropped silently); its dependencies then count as leaves, and an
editable install of the project folder itself stands for the project's own dependencies
(`from = ["pyproject.toml"]`, which reads them with their specifiers: they are not leaves).

The installed versions are written next to repro.toml in `ENV_PINS` (`name==version` lines); a
platform's first `kernodeck lock` prefers them (`adopt.first_lock_source`), so it changes no
version that does not have to change. The file may be deleted once a lock exists.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.markers import InvalidMarker, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.interpreters import given
from kernodeck.probe.facts import Distribution, Facts
from kernodeck.support.fsio import atomic_write_text
from kernodeck.support.urls import redact

#: The preferences file `init --from-env` writes beside repro.toml.
ENV_PINS = "kernodeck-env-pins.txt"
#: Installed, never a requirement of the manifest.
NOT_REQUIREMENTS = frozenset({"pip", "setuptools", "wheel", "kernodeck"})


@dataclass
class EnvAdoption:
    python_version: str  # "3.11"
    implementation: str  # "cpython"
    requirements: list[str] = field(default_factory=list)
    pins: dict[str, str] = field(default_factory=dict)
    not_locked: list[str] = field(default_factory=list)
    project_editable: bool = False  # the project folder itself is installed editable
    torch_version: str | None = None
    installed: int = 0


def _direct_path(d: Distribution) -> Path | None:
    url = str((d.direct_url or {}).get("url") or "")
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def _not_locked(d: Distribution, *, is_project: bool) -> str:
    """Why a distribution installed from a direct URL or a folder is not locked from an index."""
    where = redact(str((d.direct_url or {}).get("url") or "an unknown place"))
    if is_project:
        return (
            f"{d.name} {d.version} is the project itself, installed editable: its dependencies are "
            "read from pyproject.toml"
        )
    if d.editable:
        return (
            f"{d.name} {d.version} is installed editable from {where}: not locked from an index; "
            "add its folder's requirements to `from`, or publish it and add it to `requirements`"
        )
    return (
        f"{d.name} {d.version} was installed from a direct URL ({where}): not locked from an "
        "index; publish it to an index the manifest names and add it to `requirements`"
    )


def from_facts(facts: Facts, project: Path) -> EnvAdoption:
    """The adoption of the environment the probe described (pure: no I/O but `project.resolve()`)."""
    info = facts.interpreter
    major_minor = ".".join(info.version.split(".")[:2])
    out = EnvAdoption(python_version=major_minor, implementation=info.implementation or "cpython")
    dists = facts.dists()
    out.installed = len(dists)
    project_dir = project.resolve()
    lockable: dict[str, Distribution] = {}
    own: list[str] = []  # what the project itself requires: `from = ["pyproject.toml"]` reads it
    for key, d in sorted(dists.items()):
        if key == "torch":
            out.torch_version = d.version
        if d.direct_url is None or key in NOT_REQUIREMENTS:
            lockable[key] = d  # pip, setuptools, wheel, Kernodeck: their dependencies are theirs
            continue
        path = _direct_path(d)
        is_project = d.editable and path is not None and path.resolve() == project_dir
        if is_project:
            out.project_editable = True
            own.extend(d.requires)
        out.not_locked.append(_not_locked(d, is_project=is_project))
    env = {**facts.markers, "extra": ""}
    required: set[str] = set()
    # The project's own dependencies come with its specifiers through `from`; listed again as
    # bare names they would only repeat them.
    for text in [*(t for d in lockable.values() for t in d.requires), *own]:
        try:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (InvalidRequirement, InvalidMarker, UndefinedEnvironmentName):
            continue
        required.add(canonicalize_name(req.name))
    out.requirements = [
        d.name for key, d in lockable.items() if key not in required and key not in NOT_REQUIREMENTS
    ]
    for pkg, d in lockable.items():
        if d.direct_url is not None:
            continue
        with contextlib.suppress(InvalidVersion):
            out.pins[pkg] = str(Version(d.version))
    return out


def adopt_environment(python: str, project: Path) -> EnvAdoption:
    """Probe PYTHON's environment (a subprocess of that interpreter) and adopt it."""
    from kernodeck.probe.runner import ProbeRequest, RealProbe

    interp = given(python, "init --from-env", option="--from-env")
    facts = RealProbe(interp).collect(ProbeRequest(records=False, torch=False, compute=False, smi=False))
    return from_facts(facts, project)


def write_env_pins(folder: Path, adoption: EnvAdoption) -> Path:
    path = folder / ENV_PINS
    lines = [
        "# Installed versions of the environment `kernodeck init --from-env` adopted.",
        "# A platform's first `kernodeck lock` prefers them; delete this file once a lock exists.",
        *(f"{k}=={v}" for k, v in sorted(adoption.pins.items())),
    ]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def read_env_pins(folder: Path) -> dict[str, Version] | None:
    """The pins of ENV_PINS in `folder` (None when there is none; unreadable lines are skipped)."""
    path = folder / ENV_PINS
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    pins: dict[str, Version] = {}
    for line in text.splitlines():
        name, sep, version = line.strip().partition("==")
        if not sep or line.lstrip().startswith("#"):
            continue
        with contextlib.suppress(InvalidVersion):
            pins[canonicalize_name(name.strip())] = Version(version.strip())
    return dict(sorted(pins.items()))
