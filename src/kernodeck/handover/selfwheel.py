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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

import kernodeck
from kernodeck.manifest.schema import Manifest

DIST = "kernodeck"
#: Where the bundle keeps the tool's requirements (named in warnings).
TOOL_REQUIREMENTS_NAME = "_kernodeck/requirements.txt"
#: Output files only the `checks` extra reads (NumPy, safetensors; `.pt` needs torch, which a
#: project that writes it installs itself).
_CHECKS_EXTRA_SUFFIXES = (".npy", ".npz", ".safetensors")
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


def needed_extras(m: Manifest) -> list[str]:
    """The extras of Kernodeck the bundle's own checks need: `checks` (NumPy, safetensors) when a
    check output or its reference is an array file those read."""
    paths = [p for c in m.check for o in c.output for p in (o.path, o.reference) if p]
    return ["checks"] if any(p.endswith(_CHECKS_EXTRA_SUFFIXES) for p in paths) else []


def dependency_pins(extras: Iterable[str] = ()) -> list[str]:
    """`name==version ; marker` for Kernodeck's runtime dependencies (and those of its `extras`) and
    theirs, as installed here (a dependency's own extras left out; a dependency whose marker is
    false here keeps its marker and the version installed, or is left out when it is not
    installed)."""
    wanted = set(extras)
    pins: dict[str, str] = {}
    todo = [(line, True) for line in md.requires(DIST) or []]
    while todo:
        line, top = todo.pop()
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        marker = req.marker
        if marker is not None and "extra" in str(marker):
            if not top or not any(marker.evaluate({"extra": e}) for e in wanted):
                continue  # an optional dependency of an extra Kernodeck does not need
            marker = None  # the extra is asked for; its own environment markers are rare here
        name = canonicalize_name(req.name)
        if name in pins:
            continue
        try:
            installed = md.version(req.name)
        except md.PackageNotFoundError:
            continue
        pins[name] = f"{name}=={installed}" + (f" ; {marker}" if marker is not None else "")
        todo += [(sub, False) for sub in md.requires(req.name) or []]
    return [pins[n] for n in sorted(pins)]


def hashes_in_locks(texts: Iterable[str]) -> tuple[dict[tuple[str, str], set[str]], str | None]:
    """(name, version) -> sha256 hashes, from the bundle's own lock files, and the index the first
    of them installs from (`--index-url`, as written; None when none names one)."""
    from kernodeck.lockfile.read import parse_lockfile

    found: dict[tuple[str, str], set[str]] = {}
    index: str | None = None
    for text in texts:
        lock = parse_lockfile(text, lenient=True)
        for pin in lock.pins:
            if pin.version is not None and pin.hashes:
                found.setdefault((pin.key, pin.version), set()).update(pin.hashes)
        for option in lock.index_options():
            if index is None and option.startswith("--index-url"):
                index = option.split(None, 1)[1].strip() if " " in option else option.split("=", 1)[1]
    return found, index


def hashes_on_index(
    index_url: str, wanted: Iterable[tuple[str, str]]
) -> tuple[dict[tuple[str, str], set[str]], str | None]:
    """(name, version) -> sha256 of every file of that version on the index (every platform's
    wheels and the sdist, as `pip-compile --generate-hashes` lists them), and the first reason a
    page could not be read (None when every page was)."""
    from packaging.version import Version

    from kernodeck.errors import KernodeckError
    from kernodeck.index.client import IndexClient
    from kernodeck.index.models import IndexSource, NotFound

    found: dict[tuple[str, str], set[str]] = {}
    problem: str | None = None
    source = IndexSource("tool", index_url)
    with IndexClient(timeout=20, deadline=60) as client:
        for name, ver in wanted:
            try:
                page = client.project_page(source, name)
            except (KernodeckError, OSError) as e:
                problem = str(e).splitlines()[0]
                break  # an index that fails once is not asked 20 more times
            if isinstance(page, NotFound):
                continue
            shas = {f.sha256 for f in page.files_of(Version(ver)) if f.sha256}
            if shas:
                found[(name, ver)] = shas
    return found, problem


@dataclass(frozen=True)
class ToolFiles:
    """What a bundle carries of Kernodeck: its wheel (path -> bytes), `requirements.txt`'s text, and
    what the bundle warns about them."""

    files: dict[str, bytes]
    requirements: str
    warnings: list[str]


def tool_files(m: Manifest, folder: str, *, lock_texts: Iterable[str]) -> ToolFiles:
    """The wheel and the hashed requirements of the running Kernodeck, for the bundle's `folder`:
    Kernodeck's dependencies (with the extras the manifest's checks need) pinned to the versions
    installed here, every line with `--hash=sha256:`: the wheel's from its bytes, the others from
    the bundle's lock files or, for what they do not pin, from the page of the index those lock
    files install from (the one index the receiver needs anyway; nothing else is asked)."""
    wheel = wheel_bytes()
    path = f"{folder}/{wheel_filename()}"
    extras = needed_extras(m)
    pins = dependency_pins(extras)
    keys = [_pin_key(p) for p in pins]
    hashes, index = hashes_in_locks(lock_texts)
    missing = [k for k in keys if not hashes.get(k)]
    problem = None if index else "no lock file names an index to read them from"
    if missing and index:
        more, problem = hashes_on_index(index, missing)
        hashes.update(more)
    head = f"# Kernodeck {version()}" + (f" with the extras {', '.join(extras)}" if extras else "")
    lines = [
        head
        + " and its dependencies, pinned to the versions that wrote this bundle (install with --no-deps)",
        *([f"--index-url {index}"] if index else []),
        f"./{path} --hash=sha256:{hashlib.sha256(wheel).hexdigest()}",
    ]
    unhashed = []
    for pin, key in zip(pins, keys, strict=True):
        shas = sorted(hashes.get(key, ()))
        if not shas:
            unhashed.append(f"{key[0]}=={key[1]}")
        lines.append(" \\\n    ".join([pin, *(f"--hash=sha256:{h}" for h in shas)]))
    warnings = []
    if unhashed:
        warnings.append(
            f"{TOOL_REQUIREMENTS_NAME}: no file hash for {', '.join(unhashed)} ({problem or 'not on the index'}):"
            " REBUILD.md's install of Kernodeck (--require-hashes) fails until they are added"
        )
    return ToolFiles({path: wheel}, "\n".join(lines) + "\n", warnings)


def _pin_key(pin: str) -> tuple[str, str]:
    name, _, rest = pin.partition("==")
    return name, rest.split(";", 1)[0].strip()
