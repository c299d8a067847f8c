"""Render a platform's lock as `requirements-rebuild-<platform>.txt` and PEP 751 `pylock.<platform>.toml`.

Pure functions of plain data: no I/O, no clock, no host paths, everything sorted, so the same
inputs give the same bytes. Index URLs are written as the manifest spells them, so `${VAR}`
credential placeholders stay placeholders (pip expands them when it reads the file); a URL that
carries literal credentials (from pip's configuration) is written without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from packaging.utils import NormalizedName
from packaging.version import Version

from kernodeck.lockfile.header import digest_line, generated_line, input_line, platform_line
from kernodeck.lockfile.names import is_pyproject
from kernodeck.support.urls import strip_userinfo

if TYPE_CHECKING:
    import tomlkit.items

# tomlkit is imported by the pylock renderer only: verify and requirements locks never load it.


@dataclass(frozen=True)
class LockedFile:
    """One artifact that may be installed on the platform."""

    filename: str
    url: str
    sha256: str
    is_wheel: bool
    size: int | None = None
    upload_time: datetime | None = None


@dataclass(frozen=True)
class LockedPackage:
    name: NormalizedName
    version: Version
    index: str  # the index it came from, as the manifest spells it
    files: tuple[LockedFile, ...]
    via: tuple[str, ...] = ()  # "-r repro.toml" and/or parent project names
    requires_python: str | None = None
    yanked: str | None = None  # an exact pin that selects a yanked release: the reason ("" for none)

    @property
    def hashes(self) -> list[str]:
        return sorted({f.sha256 for f in self.files})

    @property
    def has_sdist(self) -> bool:
        return any(not f.is_wheel for f in self.files)


@dataclass(frozen=True)
class IndexLine:
    """An index option for the requirements file: primary (`--index-url`), extra, or find-links."""

    kind: str  # "index-url" | "extra-index-url" | "find-links"
    url: str


@dataclass(frozen=True)
class PlatformLock:
    platform: str
    summary: str  # Target.summary(): "cpython 3.11, manylinux_2_28 x86_64, backend cu126"
    manifest_name: str  # the manifest's file name, e.g. "repro.toml"
    lock_inputs_sha256: str  # kernodeck.lock.inputs: the digest of what can change a pin
    exclude_newer: datetime | None
    indexes: tuple[IndexLine, ...]
    packages: tuple[LockedPackage, ...]
    requires_python: str = ""  # "==3.11.*" for pylock
    environment: str = ""  # a PEP 508 marker that describes the platform, for pylock
    tool: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # header comment lines, e.g. a version that differs across platforms
    inputs: tuple[tuple[str, str], ...] = ()  # ([packages] from file, sha256): part of what was locked


def format_time(dt: datetime | None) -> str:
    """UTC, second precision unless the input has more, with a `Z`."""
    if dt is None:
        return "none"
    u = dt.astimezone(timezone.utc)
    text = u.strftime("%Y-%m-%dT%H:%M:%S")
    if u.microsecond:
        text += f".{u.microsecond:06d}".rstrip("0")
    return text + "Z"


def strip_credentials(url: str) -> str:
    """Keep `${VAR}` placeholders (pip expands them); drop literal user:password."""
    return strip_userinfo(url, keep_placeholders=True)


def _via_lines(via: Sequence[str]) -> list[str]:
    if not via:
        return []
    if len(via) == 1:
        return [f"    # via {via[0]}"]
    return ["    # via", *(f"    #   {v}" for v in via)]


def _input_line(name: str, digest: str) -> str:
    """A pyproject.toml input is recorded by its pin parts (kernodeck.lock.inputs.pin_inputs)."""
    return input_line(name, digest, by_pins=is_pyproject(name))


def render_requirements(lock: PlatformLock) -> str:
    """The pip-installable, fully hashed requirements file (read back by kernodeck.lockfile.read)."""
    out = [
        f"# {generated_line(lock.manifest_name)} Regenerate: kernodeck lock --platform {lock.platform}",
        f"# {platform_line(lock.platform, lock.summary)}",
        f"# {digest_line(lock.lock_inputs_sha256, format_time(lock.exclude_newer))}",
        *(f"# {_input_line(name, digest)}" for name, digest in lock.inputs),
        *(f"# {note}" for note in lock.notes),
    ]
    if not any(ix.kind == "index-url" for ix in lock.indexes):
        out.append("--no-index")
    for ix in lock.indexes:
        out.append(f"--{ix.kind} {strip_credentials(ix.url)}")
    # Hashes already restrict every package to the listed artifacts; `--only-binary :all:` also
    # says so to the installer. With an allowed sdist in the lock, wheels are still preferred.
    if any(p.has_sdist for p in lock.packages):
        out.append("--prefer-binary")
    else:
        out.append("--only-binary :all:")
    out.append("")
    for pkg in sorted(lock.packages, key=lambda p: p.name):
        hashes = pkg.hashes
        out.append(f"{pkg.name}=={pkg.version}" + (" \\" if hashes else ""))
        for i, h in enumerate(hashes):
            out.append(f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else ""))
        out.extend(_via_lines(pkg.via))
        if pkg.yanked is not None:
            out.append(
                f"    # warning: yanked release{': ' + ' '.join(pkg.yanked.split()) if pkg.yanked else ''}"
            )
    return "\n".join(out) + "\n"


def render_pylock(lock: PlatformLock) -> str:
    """A PEP 751 lock file for one platform (lock-version 1.0)."""
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment(generated_line(lock.manifest_name, lock.platform)))
    doc.add(tomlkit.comment(digest_line(lock.lock_inputs_sha256, format_time(lock.exclude_newer))))
    for name, digest in lock.inputs:
        doc.add(tomlkit.comment(_input_line(name, digest)))
    for note in lock.notes:
        doc.add(tomlkit.comment(note))
    doc["lock-version"] = "1.0"
    if lock.environment:
        doc["environments"] = [lock.environment]
    if lock.requires_python:
        doc["requires-python"] = lock.requires_python
    doc["extras"] = []
    doc["dependency-groups"] = []
    doc["default-groups"] = []
    doc["created-by"] = "kernodeck"
    packages = tomlkit.aot()
    for pkg in sorted(lock.packages, key=lambda p: p.name):
        t = tomlkit.table()
        t["name"] = pkg.name
        t["version"] = str(pkg.version)
        if pkg.requires_python:
            t["requires-python"] = pkg.requires_python
        t["index"] = strip_userinfo(pkg.index)
        sdists = [f for f in pkg.files if not f.is_wheel]
        wheels = sorted((f for f in pkg.files if f.is_wheel), key=lambda f: f.filename)
        if sdists:
            t["sdist"] = _file_table(sorted(sdists, key=lambda f: f.filename)[0])
        if wheels:
            arr = tomlkit.array()
            arr.multiline(True)
            for w in wheels:
                arr.append(_file_table(w))
            t["wheels"] = arr
        if pkg.via:
            tool = tomlkit.table()
            kd = tomlkit.table()
            kd["via"] = list(pkg.via)
            tool["kernodeck"] = kd
            t["tool"] = tool
        packages.append(t)
    doc["packages"] = packages
    tool = tomlkit.table()
    kd = tomlkit.table()
    kd["platform"] = lock.platform
    kd["summary"] = lock.summary
    for k in sorted(lock.tool):
        kd[k] = lock.tool[k]
    tool["kernodeck"] = kd
    doc["tool"] = tool
    return tomlkit.dumps(doc)


def _file_table(f: LockedFile) -> tomlkit.items.InlineTable:
    import tomlkit

    t = tomlkit.inline_table()
    t["name"] = f.filename
    if f.upload_time is not None:
        t["upload-time"] = f.upload_time.astimezone(timezone.utc).replace(tzinfo=timezone.utc)
    t["url"] = strip_userinfo(f.url)
    if f.size is not None:
        t["size"] = f.size
    hashes = tomlkit.inline_table()
    hashes["sha256"] = f.sha256
    t["hashes"] = hashes
    return t
