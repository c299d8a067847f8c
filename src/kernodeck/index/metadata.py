"""Core metadata out of artifacts: from a remote wheel by HTTP ranges, from wheel bytes, from an sdist;
and `parse_core_metadata`, the one reader of METADATA / PKG-INFO bytes (through `packaging.metadata`).

`read_wheel_metadata_by_ranges` reads only the zip tail (end of central directory + central
directory) and the METADATA member of a remote wheel, through a `fetch(start, length)` callback that
performs one HTTP range request. A whole wheel of hundreds of megabytes costs a few kilobytes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.index.models import CoreMetadata, MetadataError

if TYPE_CHECKING:
    from kernodeck.index.buildenv import BuildSources

#: First read from the end of a remote wheel: the end of central directory record and, for most
#: wheels, the whole central directory and the METADATA member (dist-info is written last).
TAIL_BYTES = 16 * 1024
#: Slack read beyond the METADATA member's compressed size for its local header's extra field.
_LOCAL_HEADER_SLACK = 30 + 1024
#: Read before a central directory that is not in the tail, so that one request brings both the
#: directory and, usually, the METADATA member: a wheel's .dist-info is written last, and between
#: METADATA and the directory lie WHEEL, a few small files and RECORD, which grows with the directory.
_MEMBER_LEAD = 64 * 1024
_MAX_DIRECTORY_LEAD = 1024 * 1024
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # central directory file header
_LOCAL = struct.Struct("<4s2B4HL2L2H")  # local file header
_ZIP64 = 0xFFFFFFFF
_UTF8_NAME = 0x800
_ENCRYPTED = 0x1


class MetadataTooLarge(MetadataError):
    """A METADATA member larger than the cap (see `kernodeck.index.client`)."""


#: Errors zipfile raises on bytes that are not a sound zip (truncated, crossed, tampered).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    KeyError,
    ValueError,
    EOFError,
    OSError,
    zlib.error,
    struct.error,
    NotImplementedError,
)


class RangeUnsupported(Exception):
    """The server answered a range request with the whole file (200); `body` is that file."""

    def __init__(self, body: bytes) -> None:
        super().__init__("server ignored the Range header")
        self.body = body


#: fetch(start, length) -> (start, total_size, data). start=None means "the last `length` bytes".
RangeFetch = Callable[[int | None, int], tuple[int, int, bytes]]


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file that fetches missing bytes by range requests."""

    def __init__(self, fetch: RangeFetch, tail: int = TAIL_BYTES) -> None:
        super().__init__()
        self._fetch = fetch
        start, total, data = fetch(None, tail)
        self.size = total
        self._chunks: list[tuple[int, bytes]] = [(start, data)]
        self._pos = 0
        self.requests = 1
        self.bytes_read = len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            self._pos = offset
        elif whence == os.SEEK_CUR:
            self._pos += offset
        elif whence == os.SEEK_END:
            self._pos = self.size + offset
        else:
            raise ValueError(f"bad whence {whence}")
        if self._pos < 0:
            raise OSError("negative seek")
        return self._pos

    def _cached(self, start: int, end: int) -> bytes | None:
        for cstart, data in self._chunks:
            if cstart <= start and end <= cstart + len(data):
                return data[start - cstart : end - cstart]
        return None

    def prefetch(self, start: int, end: int) -> None:
        """Make [start, end) available with at most one request."""
        end = min(end, self.size)
        if start >= end or self._cached(start, end) is not None:
            return
        got_start, _total, data = self._fetch(start, end - start)
        self.requests += 1
        self.bytes_read += len(data)
        # joined to a chunk that starts where this one ends, so reads across both are served
        for i, (cstart, cdata) in enumerate(self._chunks):
            if cstart == got_start + len(data):
                self._chunks[i] = (got_start, data + cdata)
                return
        self._chunks.append((got_start, data))

    def cover_central_directory(self) -> None:
        """When the tail lacks part of the central directory, fetch the rest of it together with
        what precedes it (`_MEMBER_LEAD`): one request instead of one for the directory and one
        for the METADATA member. A zip64 archive or an unreadable end record is read as it comes."""
        start, data = self._chunks[0]
        at = data.rfind(b"PK\x05\x06")
        if at < 0 or len(data) - at < _EOCD.size:
            return
        _sig, _disk, _cd_disk, _here, _total, cd_size, cd_offset, _comment = _EOCD.unpack_from(data, at)
        if cd_offset == 0xFFFFFFFF or cd_size == 0xFFFFFFFF or cd_offset >= start:
            return
        lead = min(cd_size // 4, _MAX_DIRECTORY_LEAD) + _MEMBER_LEAD
        self.prefetch(max(0, cd_offset - lead), start)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = self.size - self._pos
        end = min(self._pos + size, self.size)
        if end <= self._pos:
            return b""
        data = self._cached(self._pos, end)
        if data is None:
            self.prefetch(self._pos, max(end, self._pos + 4096))
            data = self._cached(self._pos, end)
            if data is None:
                raise OSError(f"range read of bytes {self._pos}-{end - 1} came back short")
        self._pos = end
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def _metadata_member(zf: zipfile.ZipFile, filename: str) -> zipfile.ZipInfo:
    infos = zf.infolist()
    return infos[_metadata_choice([i.filename for i in infos], filename)]


def _metadata_choice(names: list[str], filename: str) -> int:
    """Which of a wheel's member `names` is its METADATA: the one top-level .dist-info/METADATA,
    or of several, the one whose directory names the wheel's project."""
    project = canonicalize_name(filename.split("-", 1)[0])
    suffix = ".dist-info/METADATA"
    candidates = [n for n, name in enumerate(names) if name.count("/") == 1 and name.endswith(suffix)]
    matching = [
        n for n in candidates if canonicalize_name(names[n][: -len(suffix)].rsplit("-", 1)[0]) == project
    ]
    chosen = matching or candidates
    if len(chosen) != 1:
        raise MetadataError(
            f"{filename} has {'no' if not chosen else 'more than one'} .dist-info/METADATA",
            hint="the wheel is malformed; report it to its publisher",
        )
    return chosen[0]


def _metadata_by_directory(rf: _RangeFile, filename: str, max_size: int | None) -> bytes | None:
    """The METADATA member read by walking the central directory's records for it alone, where
    zipfile would build an entry for each of a wheel's thousands of files; None when the archive
    is one this walk leaves to zipfile (zip64, a comment, data before the archive, an encrypted or
    not deflated member, a directory not yet read). Raises zipfile.BadZipFile as zipfile would."""
    tail_start, tail = rf._chunks[0]
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size != len(tail) or tail_start + len(tail) != rf.size:
        return None  # no end record, or one followed by a comment
    _sig, disk, cd_disk, _here, entries, cd_size, cd_offset, _comment = _EOCD.unpack_from(tail, at)
    eocd = tail_start + at
    if disk or cd_disk or _ZIP64 in (cd_size, cd_offset) or entries == 0xFFFF or cd_offset + cd_size != eocd:
        return None
    directory = rf._cached(cd_offset, eocd)
    if directory is None:
        return None
    names: list[str] = []
    records: list[tuple[int, ...]] = []
    pos = 0
    unpack = _CENTRAL.unpack_from
    while pos < cd_size:
        record = unpack(directory, pos)
        if record[0] != b"PK\x01\x02":
            raise zipfile.BadZipFile("Bad magic number for central directory")
        name_end = pos + _CENTRAL.size + record[12]
        raw = directory[pos + _CENTRAL.size : name_end]
        if raw.endswith(b".dist-info/METADATA"):
            names.append(raw.decode("utf-8" if record[5] & _UTF8_NAME else "cp437"))
            records.append(record)
        pos = name_end + record[13] + record[14]
    if pos != cd_size or len(names) == 0:
        return None  # an odd directory: zipfile says what is wrong
    chosen = _metadata_choice(names, filename)
    name, record = names[chosen], records[chosen]
    flags, method, crc, compressed, size, offset = (
        record[5],
        record[6],
        record[9],
        record[10],
        record[11],
        record[18],
    )
    if (
        flags & _ENCRYPTED
        or method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
        or _ZIP64 in (compressed, size, offset)
    ):
        return None
    _check_size(size, filename, max_size)
    rf.prefetch(offset, offset + _LOCAL_HEADER_SLACK + len(name) + compressed)
    rf.seek(offset)
    local = _LOCAL.unpack(rf.read(_LOCAL.size))
    if local[0] != b"PK\x03\x04":
        raise zipfile.BadZipFile("Bad magic number for file header")
    if rf.read(local[10]) != name.encode("utf-8" if flags & _UTF8_NAME else "cp437"):
        raise zipfile.BadZipFile(f"File name in directory {name!r} and header differ.")
    rf.seek(local[11], os.SEEK_CUR)
    data = rf.read(compressed)
    if method == zipfile.ZIP_DEFLATED:
        inflate = zlib.decompressobj(-15)
        data = inflate.decompress(data, size + 1) + inflate.flush()
    if len(data) != size or zlib.crc32(data) != crc:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {name!r}")
    return data


def _check_size(size: int, filename: str, max_size: int | None) -> None:
    if max_size is not None and size > max_size:
        raise MetadataTooLarge(
            f"the METADATA of {filename} is {size} bytes, over the limit of {max_size}",
            hint="raise KERNODECK_MAX_METADATA_BYTES if this metadata really is that big",
        )


def read_wheel_metadata(data: bytes | Path, filename: str, *, max_size: int | None = None) -> bytes:
    """The METADATA member of a whole wheel (bytes or a local path)."""
    src: Any = io.BytesIO(data) if isinstance(data, bytes) else data
    try:
        with zipfile.ZipFile(src) as zf:
            info = _metadata_member(zf, filename)
            _check_size(info.file_size, filename, max_size)
            return zf.read(info)
    except _ZIP_ERRORS as e:
        raise MetadataError(f"{filename} is not a readable wheel: {type(e).__name__}: {e}") from None


def read_wheel_metadata_by_ranges(
    fetch: RangeFetch, filename: str, *, max_size: int | None = None
) -> tuple[bytes, int, int]:
    """(METADATA bytes, range requests made, bytes read). Raises RangeUnsupported from `fetch`."""
    rf = _RangeFile(fetch)
    rf.cover_central_directory()
    try:
        found = _metadata_by_directory(rf, filename, max_size)
        if found is not None:
            return found, rf.requests, rf.bytes_read
        with zipfile.ZipFile(rf) as zf:
            info = _metadata_member(zf, filename)
            _check_size(info.file_size, filename, max_size)
            rf.prefetch(
                info.header_offset,
                info.header_offset + _LOCAL_HEADER_SLACK + len(info.filename) + info.compress_size,
            )
            data = zf.read(info)
    except _ZIP_ERRORS as e:
        raise MetadataError(f"{filename} is not a readable wheel: {type(e).__name__}: {e}") from None
    return data, rf.requests, rf.bytes_read


# --- parsing ------------------------------------------------------------------------------------------

#: The fields the resolver reads: (RawMetadata key, the header's name in messages).
_FIELDS = (
    ("name", "Name"),
    ("version", "Version"),
    ("requires_dist", "Requires-Dist"),
    ("requires_python", "Requires-Python"),
    ("provides_extra", "Provides-Extra"),
)
#: Of those, the fields that may appear once.
_SINGLE = frozenset({"name", "version", "requires_python"})


#: Header names as the email parser reads them in a header block (no space, no colon).
_HEADER_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]*")
#: A line that does not continue the one before (no space or tab first), after its newline.
_LINE_START = re.compile(r"\n([^ \t\n][^\n]*)")
#: The field of each header in `_FIELDS` (lowercase), and the other way round.
_WANTED = {header.lower(): key for key, header in _FIELDS}
_HEADER_OF = {key: header for header, key in _WANTED.items()}


def _plain_headers(data: bytes) -> tuple[dict[str, Any], dict[str, list[str]]] | None:
    """What `parse_email` gives for the fields in `_FIELDS`, read from METADATA as build tools
    write it: `Name: value` lines, UTF-8, LF or CRLF line ends, a field read here on one line with
    an ASCII value. None for anything else (a folded or non-ASCII field, a line that is not a
    header, a lone CR, a `From ` line): `parse_email` then reads the file. The email parser was
    most of the time of reading one file's metadata from the cache. Only the lines that start a
    header are looked at: some License fields fold a thousand lines into the header block."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")  # a line end to the email parser, as LF is
    end = data.find(b"\n\n")
    try:
        head = (data if end < 0 else data[:end]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in head:
        return None
    # the header lines (no empty one inside: the block ends at the first), less the newline the
    # file ends with after its last header
    block = head[:-1] if end < 0 and head.endswith("\n") else head
    if not block:
        return ({}, {}) if not head and end < 0 else None  # an empty file; else an empty line
    if block[0] in " \t\n":
        return None  # a block starting with a continuation, or with an empty line
    text = "\n" + block
    found: dict[str, list[str]] = {}
    for m in _LINE_START.finditer(text):
        line = m.group(1)
        name, sep, value = line.partition(":")
        if not sep or line.startswith("From ") or not _HEADER_NAME.fullmatch(name):
            return None  # the email parser ends the header block here, or reads a Unix From line
        current = _WANTED.get(name.lower())
        if current is not None:
            if not value.isascii() or text.startswith(("\n ", "\n\t"), m.end()):
                return None  # non-ASCII, or folded onto the next line
            found.setdefault(current, []).append(value.lstrip(" \t"))
    return _raw_fields(found)


def _raw_fields(found: dict[str, list[str]]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The fields read, as `parse_email` gives them: a single-use field once as its value; repeated,
    unparsed (as the email parser leaves it)."""
    raw: dict[str, Any] = {}
    unparsed: dict[str, list[str]] = {}
    for key, values in found.items():
        if key not in _SINGLE:
            raw[key] = values
        elif len(values) == 1:
            raw[key] = values[0]
        else:
            unparsed[_HEADER_OF[key]] = values
    return raw, unparsed


def parse_core_metadata(data: bytes, *, source: str) -> CoreMetadata:
    """Parse METADATA / PKG-INFO bytes as `packaging.metadata` does. Raises MetadataError naming
    `source` (and the field) when a field the resolver needs is missing, repeated where it may
    appear once, not UTF-8, or invalid. Other fields are not looked at (an index's odd
    `Classifier` never stops a lock)."""
    found = _plain_headers(data)
    raw: Mapping[str, Any]
    if found is None:
        from packaging.metadata import parse_email  # the email parser: only for what it must read

        raw, unparsed = parse_email(data)
    else:
        raw, unparsed = found
    for key, header in _FIELDS:
        bad = unparsed.get(header.lower())
        if bad is not None:
            why = "appears more than once" if len(bad) > 1 and key in _SINGLE else "is not UTF-8"
            raise MetadataError(
                f"core metadata of {source} has an unreadable {header} ({why}): {short_values(bad)}",
                hint="the distribution's metadata is malformed; report it to its publisher",
            )
    name = (raw.get("name") or "").strip()
    version = (raw.get("version") or "").strip()
    if not name or not version:
        raise MetadataError(f"core metadata of {source} has no Name or Version")
    # validated as packaging.metadata.Metadata validates these fields (Version, Requirement,
    # SpecifierSet), without building one: a Requires-Dist text met before is not parsed again
    try:
        v = Version(version)
    except InvalidVersion:
        raise MetadataError(f"core metadata of {source} has an invalid Version {version!r}") from None
    reqs: list[Requirement] = []
    for text in raw.get("requires_dist") or ():
        try:
            reqs.append(_requirement(text.strip()))
        except InvalidRequirement as e:
            raise MetadataError(
                f"core metadata of {source} has an invalid Requires-Dist {text.strip()!r}",
                context=[str(e).splitlines()[0]],
            ) from None
    requires_python = (raw.get("requires_python") or "").strip()
    rp: SpecifierSet | None = None
    if requires_python:
        try:
            rp = SpecifierSet(requires_python)
        except InvalidSpecifier:
            raise MetadataError(
                f"core metadata of {source} has an invalid Requires-Python {requires_python!r}"
            ) from None
    extras = frozenset(canonicalize_name(e.strip()) for e in raw.get("provides_extra") or ())
    return CoreMetadata(
        name=name,
        version=v,
        requires_dist=tuple(reqs),
        requires_python=rp,
        provides_extra=extras,
        raw=data,
    )


_requirements: dict[str, Requirement] = {}


def _requirement(text: str) -> Requirement:
    """`Requirement(text)`, parsed once per text (the wheels of one version, and many packages,
    repeat the same Requires-Dist lines); callers never change the object they get."""
    hit = _requirements.get(text)
    if hit is None:
        hit = Requirement(text)
        if len(_requirements) > 50_000:
            _requirements.clear()
        _requirements[text] = hit
    return hit


def short_values(values: list[str] | str | bytes) -> str:
    """A field's unusable value(s) for a message: repr, at most 120 characters."""
    text = repr(values)
    return text if len(text) <= 120 else text[:117] + "..."


# --- sdists -----------------------------------------------------------------------------------------


def _safe_extract(archive: Path, dest: Path) -> Path:
    """Extract an sdist without letting a member escape `dest`; returns the project folder."""
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                target = (dest / name).resolve()
                if not str(target).startswith(str(dest.resolve()) + os.sep) and target != dest.resolve():
                    raise MetadataError(f"{archive.name} holds a path outside the archive: {name!r}")
            zf.extractall(dest)
    else:
        import tarfile  # sdists only: a lock of wheels never needs it

        with tarfile.open(archive) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")
            else:  # pragma: no cover - Python < 3.10.12
                for m in tf.getmembers():
                    target = (dest / m.name).resolve()
                    if m.issym() or m.islnk() or not str(target).startswith(str(dest.resolve())):
                        raise MetadataError(f"{archive.name} holds an unsafe member: {m.name!r}")
                tf.extractall(dest)
    entries = [p for p in dest.iterdir() if p.is_dir()]
    if (dest / "pyproject.toml").exists() or (dest / "setup.py").exists():
        return dest
    if len(entries) == 1:
        return entries[0]
    raise MetadataError(f"{archive.name} does not hold one project folder")


#: How many of the last lines a failed build backend printed are shown: its error is at the end.
BACKEND_TAIL = 6


def _backend_said(e: BaseException) -> list[str]:
    """The last lines a failed build backend printed (its traceback's end: the error), each as
    `| line`; empty when it printed nothing."""
    inner = getattr(e, "exception", None)
    out = getattr(inner, "output", None) or getattr(inner, "stderr", None)
    if isinstance(out, bytes):
        out = out.decode("utf-8", errors="replace")
    if not isinstance(out, str):
        return []
    lines = [line.rstrip() for line in out.splitlines() if line.strip()]
    tb = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if tb:  # what it printed before its traceback, and the error the traceback ends with
        lines = [*lines[: tb[-1]][-(BACKEND_TAIL - 1) :], lines[-1]]
    return [f"| {line}" for line in lines[-BACKEND_TAIL:]]


def build_sdist_metadata(archive: Path, sources: BuildSources | None = None) -> bytes:
    """Core metadata of an sdist by a PEP 517 `prepare_metadata_for_build_wheel` in an isolated
    env, its build requirements installed from `sources` (see `kernodeck.index.buildenv`)."""
    try:
        from build import BuildBackendException, BuildException, ProjectBuilder
        from build.env import DefaultIsolatedEnv
        from pyproject_hooks import BuildBackendWarning, quiet_subprocess_runner

        from kernodeck.index.buildenv import BuildRequirementsError, BuildSources, install_build_requirements
    except ImportError as e:  # pragma: no cover - build is a dependency
        raise MetadataError(f"cannot build {archive.name}: the 'build' package is missing ({e})") from None
    # The backend's own warnings (setuptools' deprecation notices, dozens of lines per sdist) are
    # the package author's business, not the locker's: pyproject_hooks re-raises them in this
    # process, where they would bury the lock's output.
    warnings.filterwarnings("ignore", category=BuildBackendWarning)
    import tempfile

    got = sources or BuildSources()
    with tempfile.TemporaryDirectory(prefix="kernodeck-sdist-") as tmp:
        src = _safe_extract(archive, Path(tmp) / "src")
        out = Path(tmp) / "meta"
        out.mkdir()
        try:
            with DefaultIsolatedEnv() as env:
                builder = ProjectBuilder.from_isolated_env(env, src, runner=quiet_subprocess_runner)
                install_build_requirements(env.python_executable, sorted(builder.build_system_requires), got)
                install_build_requirements(
                    env.python_executable, sorted(builder.get_requires_for_build("wheel")), got
                )
                dist_info = Path(builder.metadata_path(out))
        except BuildRequirementsError as e:
            raise MetadataError(
                f"building the metadata of {archive.name} failed", context=[e.first_error], hint=e.hint
            ) from None
        except (BuildException, BuildBackendException, OSError) as e:
            said = _backend_said(e)
            hint = (
                "its build imports pkg_resources, which setuptools 81 and later no longer ship: add "
                'build-constraints = ["setuptools<81"] to [packages], or pick a version with a wheel'
                if any("No module named 'pkg_resources'" in line for line in said)
                else "the sdist needs its build requirements and a working build backend; constrain "
                "them with [packages] build-constraints, prefer a wheel, or remove the package from "
                "allow-sdist"
            )
            raise MetadataError(
                f"building the metadata of {archive.name} failed",
                context=[str(e).splitlines()[0] if str(e) else type(e).__name__, *said],
                hint=hint,
            ) from None
        meta = dist_info / "METADATA"
        with contextlib.suppress(OSError):
            return meta.read_bytes()
        raise MetadataError(f"building {archive.name} produced no METADATA")
