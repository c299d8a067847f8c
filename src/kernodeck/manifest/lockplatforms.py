"""The platforms an existing lock covers, for `kernodeck init` to declare beside the host's.

    for found in covered_platforms(Path("."), python):
        found.platform   # Platform(name="macos-arm64", os="macos", arch="arm64", ...)
        found.evidence   # "uv.lock: supported-markers"

Evidence, per lock:
- Kernodeck's own `requirements-rebuild-<name>.txt` whose name is `<os>-<arch>[-<backend>]`;
- uv.lock: its `supported-markers` (`[tool.uv] environments`), else its `resolution-markers`
  (a platform is covered when one of them holds in its marker environment; markers that name no
  platform variable, such as forks on the Python version, are no evidence), else wheel tags;
- pylock.toml: its `environments` markers, else wheel tags;
- poetry.lock: the wheels in its `files`.

Wheel tags: a candidate platform is covered when every locked package that ships only
platform-specific wheels (no sdist, no `none-any` wheel) has a wheel the platform installs, and at
least one such package exists (pure-Python locks say nothing about platforms). Candidates are the
common platforms (`CANDIDATES`); their marker environments and tags come from `targets.Target`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from kernodeck import formats
from kernodeck.formats import Evidence, Syntax, Unreadable, parse_text
from kernodeck.lockfile.names import REQUIREMENTS_PREFIX, locked_platforms
from kernodeck.manifest.schema import Platform, Python
from kernodeck.targets import Target

#: Platforms a lock's evidence is tested against (os, arch), in the order they are declared.
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("linux", "x86_64"),
    ("linux", "aarch64"),
    ("macos", "arm64"),
    ("macos", "x86_64"),
    ("windows", "x86_64"),
)


@dataclass(frozen=True)
class Covered:
    platform: Platform
    evidence: str


def _targets(python: Python) -> list[tuple[Platform, Target]]:
    out = []
    for os_name, arch in CANDIDATES:
        p = Platform(name=f"{os_name}-{arch}", os=os_name, arch=arch)  # type: ignore[arg-type]
        out.append((p, Target.from_platform(p, python)))
    return out


def _holds(target: Target, markers: Iterable[str]) -> bool:
    for text in markers:
        try:
            if target.evaluate_marker(Marker(text)):
                return True
        except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
            continue
    return False


def _wheel_tags(names: Iterable[str]) -> Iterator[frozenset[Tag]]:
    for name in names:
        base = name.rsplit("/", 1)[-1]
        if not base.endswith(".whl"):
            continue
        try:
            yield parse_wheel_filename(base)[3]
        except InvalidWheelFilename:
            continue


def _by_wheels(packages: list[list[str]], python: Python) -> list[Platform]:
    """Platforms every platform-specific package has a wheel for (see the module docstring)."""
    specific: list[list[frozenset[Tag]]] = []
    for files in packages:
        if any(f.endswith((".tar.gz", ".zip", ".tar.bz2")) for f in files):
            continue  # an sdist: installable anywhere it builds
        tags = list(_wheel_tags(files))
        if not tags or any(t.platform == "any" for ts in tags for t in ts):
            continue
        specific.append(tags)
    if not specific:
        return []
    return [
        p for p, target in _targets(python) if all(any(target.supports(ts) for ts in pkg) for pkg in specific)
    ]


def _by_markers(markers: list[str], python: Python) -> list[Platform]:
    return [p for p, target in _targets(python) if _holds(target, markers)]


def _load(path: Path, syntax: Syntax) -> Any:
    """The parsed lock, or None when it cannot be read (a lock that says nothing); nested too deep:
    ManifestError, located."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    data = parse_text(text, path.name, syntax)
    return None if isinstance(data, Unreadable) else data


def _covered(evidence: Evidence, python: Python) -> list[Platform]:
    return (
        _by_markers(evidence.markers, python) if evidence.markers else _by_wheels(evidence.packages, python)
    )


def _own_locks(folder: Path) -> Iterator[Covered]:
    for name, paths in locked_platforms(folder).items():
        path = paths[0]
        if not path.name.startswith(REQUIREMENTS_PREFIX):
            continue  # a pylock file alone
        parts = name.split("-", 2)
        if len(parts) < 2:
            continue
        try:
            p = Platform(
                name=name,
                os=parts[0],  # type: ignore[arg-type]
                arch=parts[1],  # type: ignore[arg-type]
                backend=parts[2] if len(parts) > 2 else None,
            )
        except ValueError:  # pydantic's ValidationError: not a platform Kernodeck names
            continue
        yield Covered(p, path.name)


def covered_platforms(folder: Path, python: Python) -> list[Covered]:
    """The platforms the locks in `folder` cover (Kernodeck's own first), one per name."""
    out: dict[str, Covered] = {}
    for c in _own_locks(folder):
        out.setdefault(c.platform.name, c)
    for fmt in formats.locks():
        data = _load(folder / fmt.NAME, fmt.SYNTAX)
        if data is None:
            continue
        evidence = fmt.evidence(data)
        for p in _covered(evidence, python):
            out.setdefault(p.name, Covered(p, f"{fmt.NAME}: {evidence.key}"))
    return list(out.values())
