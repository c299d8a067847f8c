"""A wheel of the running Kernodeck, and the pins of its own dependencies, for a bundle's receiver.

The receiver of a bundle may not be able to `pip install kernodeck` (no access to the index it
came from, or another version there). So `kernodeck bundle` carries the Kernodeck that wrote it:
`wheel_bytes()` builds a pure-Python wheel from the files of the imported package (the same code
whether Kernodeck was installed from a wheel or in editable mode), byte-for-byte repeatable, and
`dependency_pins()` lists the versions of Kernodeck's runtime dependencies installed here.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import io
import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

import kernodeck

DIST = "kernodeck"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_WHEEL = "Wheel-Version: 1.0\nGenerator: kernodeck\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def version() -> str:
    return md.version(DIST)


def wheel_filename() -> str:
    return f"{DIST}-{version()}-py3-none-any.whl"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_bytes() -> bytes:
    """The running Kernodeck as a wheel: the package's sources and data, its METADATA and entry
    points, a WHEEL file and a RECORD; fixed timestamps, sorted members."""
    dist = md.distribution(DIST)
    pkg = Path(kernodeck.__file__).parent
    members: list[tuple[str, bytes]] = []
    for path in sorted(pkg.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            members.append((f"{DIST}/{path.relative_to(pkg).as_posix()}", path.read_bytes()))
    info = f"{DIST}-{dist.version}.dist-info"
    members.append((f"{info}/METADATA", (dist.read_text("METADATA") or "").encode("utf-8")))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        members.append((f"{info}/entry_points.txt", entry_points.encode("utf-8")))
    members.append((f"{info}/WHEEL", _WHEEL.encode("utf-8")))
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in members)
    members.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode("utf-8")))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zi = zipfile.ZipInfo(name, date_time=_EPOCH)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, data)
    return buf.getvalue()


def dependency_pins() -> list[str]:
    """`name==version ; marker` for Kernodeck's runtime dependencies and theirs, as installed
    here (extras left out; a dependency whose marker is false here keeps its marker and the
    version installed, or is left out when it is not installed)."""
    pins: dict[str, str] = {}
    todo = list(md.requires(DIST) or [])
    while todo:
        line = todo.pop()
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue  # an optional dependency of an extra Kernodeck does not need
        name = canonicalize_name(req.name)
        if name in pins:
            continue
        try:
            installed = md.version(req.name)
        except md.PackageNotFoundError:
            continue
        marker = f" ; {req.marker}" if req.marker is not None else ""
        pins[name] = f"{name}=={installed}{marker}"
        todo += md.requires(req.name) or []
    return [pins[n] for n in sorted(pins)]
