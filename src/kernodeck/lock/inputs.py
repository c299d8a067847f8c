"""The lock inputs of a platform: exactly what can change one of its pins, and their digest.

A lock file records `lock-inputs-sha256` in its header: the sha256 of the canonical JSON of the
manifest parts that can change a pin (the Python version, `[packages]` with its indexes, routing,
exclude-newer and same-versions, the platform with its own `extras`, every platform when platforms
are resolved jointly (so one platform's `extras` changed makes every lock stale then: they decide
which platforms are aligned together; with same-versions "no", only that platform's),
the backend table, the default index) and of any extra inputs (e.g. the contents of files that
requirements are read from, as name -> sha256). Nothing else of the manifest takes part: comments,
`[reference]`, `[code]`, `[[data]]`, `[[weights]]`, `[[check]]`, `[determinism]`, `[system]` and
the order of requirements can change without making a lock stale.

A pyproject.toml read by `[packages] from` counts by its pin parts only (`PYPROJECT_PIN_PARTS`: the
dependency tables and the tool tables that route or constrain packages): a version bump, a
`[tool.pytest]` change or a comment leaves the lock fresh. Its header line says so with its own
key (`input-pins-sha256`), so a file written when every byte counted is told apart (`stale_inputs`
says so rather than claiming the file changed).

    digest = lock_inputs_sha256(manifest, "linux-x86_64", default_index=url)
    problems = unsatisfied_pins(text, manifest, target)   # a hand-edited file
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.backends import PYTORCH_INDEX_BASE, TORCH_FAMILY
from kernodeck.lockfile.header import HEADER_KEY as HEADER_KEY  # re-exported: the header names it
from kernodeck.lockfile.header import OLD_HEADER_KEY as OLD_HEADER_KEY
from kernodeck.lockfile.names import is_pyproject

if TYPE_CHECKING:
    from kernodeck.manifest.schema import Manifest
    from kernodeck.targets import Target

LOCK_INPUTS_FORMAT = 1

# The parts of a pyproject.toml that can change a pin, as key paths: the dependency tables and
# the tool tables that route or constrain packages. Nothing else of the file counts.
PYPROJECT_PIN_PARTS: tuple[tuple[str, ...], ...] = (
    ("project", "name"),  # self-references: `name[extra]` in optional dependencies and groups
    ("project", "dependencies"),
    ("project", "optional-dependencies"),
    ("project", "requires-python"),
    ("project", "dynamic"),
    ("dependency-groups",),
    ("tool", "uv", "sources"),
    ("tool", "uv", "index"),
    ("tool", "uv", "constraint-dependencies"),
    ("tool", "uv", "override-dependencies"),
    ("tool", "uv", "dev-dependencies"),
    ("tool", "uv", "default-groups"),
    ("tool", "poetry", "name"),
    ("tool", "poetry", "dependencies"),
    ("tool", "poetry", "dev-dependencies"),
    ("tool", "poetry", "group"),
    ("tool", "poetry", "extras"),
    ("tool", "poetry", "source"),
    ("tool", "pdm", "dev-dependencies"),
    ("tool", "pdm", "source"),
    ("tool", "pdm", "resolution"),
)


def pyproject_pins_sha256(data: Mapping[str, Any]) -> str:
    """The digest of a parsed pyproject.toml's pin parts (`PYPROJECT_PIN_PARTS`)."""
    doc: dict[str, Any] = {}
    for path in PYPROJECT_PIN_PARTS:
        node: Any = data
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            doc[".".join(path)] = node
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def input_sha256(path: Path, name: str, *, by_bytes: bool = False) -> str | None:
    """The digest a lock records for an input file: a pyproject.toml's pin parts (unless
    `by_bytes`, as files written before them recorded it), any other file's bytes; None when it
    cannot be read (or, for a pyproject.toml, parsed)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if by_bytes or not is_pyproject(name):
        return hashlib.sha256(raw).hexdigest()
    from kernodeck.support.tomltext import tomllib

    try:
        return pyproject_pins_sha256(tomllib.loads(raw.decode("utf-8")))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def pin_inputs(inputs: Mapping[str, str], root: Path) -> dict[str, str]:
    """The input files a lock read (name, '/'-separated from `root` -> sha256 of the bytes, as
    `kernodeck.manifest.sources` gives them) with each pyproject.toml counted by its pin parts."""
    out: dict[str, str] = {}
    for name, sha in inputs.items():
        out[name] = (input_sha256(root / name, name) or sha) if is_pyproject(name) else sha
    return out


def recorded_inputs_now(text: str, root: Path) -> dict[str, str | None]:
    """Each input file a lock file's header records, digested now the way it was recorded."""
    from kernodeck.lockfile.header import bytes_inputs, file_inputs

    by_bytes = bytes_inputs(text)
    return {n: input_sha256(root / n, n, by_bytes=n in by_bytes) for n in file_inputs(text)}


def changed_inputs(text: str, current: Mapping[str, str | None]) -> list[str]:
    """Which input files recorded in a lock file's header differ from `current` (name -> digest
    now, None: gone), in words. A pyproject.toml recorded by its bytes (a file written before
    only its pin parts counted) is said once as that, never as a change of the file."""
    from kernodeck.lockfile.header import bytes_inputs, changed_file_inputs, file_inputs

    legacy = sorted(n for n in bytes_inputs(text) if is_pyproject(n))
    recorded = {n: d for n, d in file_inputs(text).items() if n not in legacy}
    out = changed_file_inputs(recorded, {n: d for n, d in current.items() if n not in legacy})
    if legacy:
        out.insert(
            0,
            f"written by an earlier Kernodeck, which counted every byte of {', '.join(legacy)}; only "
            "its dependency and package-routing tables count now: run `kernodeck lock` once",
        )
    return out


def stale_inputs(
    text: str, digest: str, current: Mapping[str, str | None], manifest_name: str | None = None
) -> list[str] | None:
    """Why a lock file on disk is stale judged from its header alone (its recorded lock inputs
    against `digest`, the platform's now; `current`: the input files now, `pin_inputs`), in
    words; None when the inputs it records are the ones now. Needs no index. With `manifest_name`
    a change of the manifest's own lock inputs is said naming it (verify, rebuild, bundle)."""
    from kernodeck.lockfile.header import has_old_header, header_digest

    if has_old_header(text):
        return [f"written with the old header ({OLD_HEADER_KEY}); the header format changed"]
    if header_digest(text) == digest:
        return None
    said = (
        f"{manifest_name} changed its lock inputs since the file was written"
        if manifest_name is not None
        else "the lock inputs changed (Python, [packages] requirements, constraints, indexes or "
        "exclude-newer, the platforms, or the backend table)"
    )
    return changed_inputs(text, current) or [said]


def _platform_doc(manifest: Manifest, name: str) -> dict[str, Any]:
    p = manifest.get_platform(name)
    if p is None:
        raise KeyError(name)
    return p.model_dump(mode="json", by_alias=True, exclude_defaults=True)


def lock_inputs(
    manifest: Manifest,
    platform: str,
    *,
    default_index: str | None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The canonical document of the inputs of `platform`'s lock (see the module docstring).

    `extra` maps the name of a further input (e.g. a requirements file named by the manifest) to
    the sha256 of its contents."""
    from kernodeck.lockfile.write import format_time

    pk = manifest.packages
    # Values left at their defaults are left out, so a Kernodeck that learns a new key does not
    # make every existing lock stale.
    packages = pk.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    # The order of requirements and constraints cannot change a pin; the order of indexes can.
    packages["requirements"] = sorted(pk.requirements)
    packages["constraints"] = sorted(pk.constraints)
    if pk.build_constraints:
        packages["build-constraints"] = sorted(pk.build_constraints)
    packages["allow-sdist"] = sorted(canonicalize_name(n) for n in pk.allow_sdist)
    packages["exclude-newer"] = format_time(pk.exclude_newer) if pk.exclude_newer else None
    doc: dict[str, Any] = {
        "format": LOCK_INPUTS_FORMAT,
        "python": manifest.python.model_dump(mode="json", by_alias=True, exclude_defaults=True),
        "packages": packages,
        "platform": _platform_doc(manifest, platform),
        "backend-table": {"torch-family": sorted(TORCH_FAMILY), "pytorch-index": PYTORCH_INDEX_BASE},
        "default-index": default_index,
        "extra": dict(sorted((extra or {}).items())),
    }
    if pk.same_versions != "no":
        # Platforms resolved jointly: any platform can move this one's versions.
        doc["platforms"] = sorted(
            (p.model_dump(mode="json", by_alias=True, exclude_defaults=True) for p in manifest.platform),
            key=lambda d: d["name"],
        )
    return doc


def canonical_json(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def lock_inputs_sha256(
    manifest: Manifest,
    platform: str,
    *,
    default_index: str | None,
    extra: Mapping[str, str] | None = None,
) -> str:
    doc = lock_inputs(manifest, platform, default_index=default_index, extra=extra)
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def default_index_for(manifest: Manifest) -> str | None:
    """pip's built-in default index when the manifest leaves the default index unnamed (the lock
    uses it then), else None. Never the locker's pip configuration."""
    from kernodeck.index.sources import builtin_index_url

    pk = manifest.packages
    if any(not ix.url for ix in pk.index) or not any(ix.default for ix in pk.index):
        return builtin_index_url()
    return None


def unsatisfied_pins(
    text: str, manifest: Manifest, target: Target, filename: str = "requirements.txt"
) -> list[str]:
    """Why the pins of a requirements file no longer satisfy the manifest's requirements and
    constraints for `target` (empty when they do, or when the file cannot be read as pins)."""
    from kernodeck.lockfile.read import LockfileError, parse_lockfile

    try:
        lock = parse_lockfile(text, filename)
    except LockfileError as e:
        return [e.message]
    pins = lock.by_name()
    out: list[str] = []
    pk = manifest.packages
    for kind, texts in (("requirement", pk.requirements), ("constraint", pk.constraints)):
        for t in texts:
            req = Requirement(t)
            if req.url or not target.evaluate_marker(req.marker):
                continue
            pin = pins.get(canonicalize_name(req.name))
            if pin is None:
                if kind == "requirement":
                    out.append(f"{req.name} is required by the manifest but not pinned")
                continue
            if pin.version is None or not req.specifier:
                continue
            try:
                version = Version(pin.version)
            except InvalidVersion:
                out.append(f"{pin.name}=={pin.version} is not a valid version")
                continue
            if not req.specifier.contains(version, prereleases=True):
                out.append(f"{pin.name}=={pin.version} does not satisfy the {kind} {t!r}")
    return out
