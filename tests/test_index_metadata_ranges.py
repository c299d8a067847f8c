"""METADATA of a remote wheel by range requests: how many requests it takes.

The tail comes first; when the central directory does not fit in it, the rest of the directory is
fetched together with what precedes it, where a wheel keeps its .dist-info (METADATA, WHEEL,
RECORD): two requests where three were made before, the same bytes out."""

from __future__ import annotations

import io
import zipfile

import pytest

from kernodeck.index.metadata import (
    TAIL_BYTES,
    MetadataTooLarge,
    RangeFetch,
    _metadata_by_directory,
    _RangeFile,
    read_wheel_metadata_by_ranges,
)
from kernodeck.index.models import MetadataError

METADATA = b"Metadata-Version: 2.1\nName: big\nVersion: 1.0\nRequires-Dist: numpy>=1\n\n" + b"x" * 30_000


def _wheel(files: int, *, dist_info_first: bool = False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        info = [
            ("big-1.0.dist-info/METADATA", METADATA),
            ("big-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n"),
        ]
        payload = [(f"big/sub/module_{i:05d}.py", f"x = {i}\n".encode()) for i in range(files)]
        record = "".join(f"{n},sha256=abc,{len(d)}\n" for n, d in payload + info).encode()
        entries = info + payload if dist_info_first else payload + info
        for name, data in [*entries, ("big-1.0.dist-info/RECORD", record)]:
            z.writestr(name, data)
    return buf.getvalue()


def _reader(data: bytes) -> tuple[list[tuple[int | None, int]], RangeFetch]:
    asked: list[tuple[int | None, int]] = []

    def fetch(start: int | None, length: int) -> tuple[int, int, bytes]:
        asked.append((start, length))
        if start is None:
            s = max(0, len(data) - length)
            return s, len(data), data[s:]
        return start, len(data), data[start : start + length]

    return asked, fetch


@pytest.mark.parametrize("files", [10, 3_000, 20_000])
def test_metadata_takes_at_most_two_requests_when_dist_info_comes_last(files: int) -> None:
    data = _wheel(files)
    asked, fetch = _reader(data)
    got, requests, read = read_wheel_metadata_by_ranges(fetch, "big-1.0-py3-none-any.whl")
    assert got == METADATA
    assert requests == len(asked) == (1 if len(data) <= TAIL_BYTES else 2)
    assert read < len(data) or len(data) <= TAIL_BYTES


def test_dist_info_written_first_still_reads_right() -> None:
    data = _wheel(3_000, dist_info_first=True)
    _asked, fetch = _reader(data)
    got, requests, _read = read_wheel_metadata_by_ranges(fetch, "big-1.0-py3-none-any.whl")
    assert got == METADATA
    assert requests == 3  # tail, directory, then the member at the start of the file


def test_a_broken_end_record_is_refused() -> None:
    data = bytearray(_wheel(3_000))
    at = data.rfind(b"PK\x05\x06")
    data[at + 16 : at + 20] = (len(data) + 10).to_bytes(4, "little")  # directory beyond the file
    _asked, fetch = _reader(bytes(data))
    with pytest.raises(MetadataError):
        read_wheel_metadata_by_ranges(fetch, "big-1.0-py3-none-any.whl")


def _zip(
    members: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED, comment: bytes = b""
) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as z:
        for name, data in members:
            z.writestr(name, data)
        z.comment = comment
    return buf.getvalue()


def _by_zipfile(data: bytes, member: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.read(member)


@pytest.mark.parametrize(
    ("compression", "comment", "walked"),
    [
        (zipfile.ZIP_DEFLATED, b"", True),
        (zipfile.ZIP_STORED, b"", True),
        (zipfile.ZIP_DEFLATED, b"an archive comment", False),  # left to zipfile
        (zipfile.ZIP_BZIP2, b"", False),  # a method the walk does not inflate: left to zipfile
    ],
)
def test_the_directory_walk_reads_what_zipfile_reads(compression: int, comment: bytes, walked: bool) -> None:
    members = [(f"pkg/m{i}.py", b"x = 1\n") for i in range(500)]
    members += [("other-2.0.dist-info/METADATA", b"Name: other\n"), ("big-1.0.dist-info/METADATA", METADATA)]
    data = _zip(members, compression=compression, comment=comment)
    _asked, fetch = _reader(data)
    rf = _RangeFile(fetch)
    rf.cover_central_directory()
    direct = _metadata_by_directory(rf, "big-1.0-py3-none-any.whl", None)
    assert (direct is not None) is walked
    got, _requests, _read = read_wheel_metadata_by_ranges(fetch, "big-1.0-py3-none-any.whl")
    assert got == _by_zipfile(data, "big-1.0.dist-info/METADATA") == METADATA
    assert direct in (None, got)


@pytest.mark.parametrize("where", ["member", "local name"])
def test_the_directory_walk_refuses_a_tampered_member(where: str) -> None:
    data = bytearray(_wheel(3_000))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo("big-1.0.dist-info/METADATA")
    # inside the deflated bytes, or the name in the local header
    at = info.header_offset + 30 + (len(info.filename) + 10 if where == "member" else 0)
    data[at] ^= 0xFF
    _asked, fetch = _reader(bytes(data))
    with pytest.raises(MetadataError, match="not a readable wheel"):
        read_wheel_metadata_by_ranges(fetch, "big-1.0-py3-none-any.whl")


def test_the_directory_walk_keeps_the_metadata_size_cap() -> None:
    _asked, fetch = _reader(_wheel(10))
    with pytest.raises(MetadataTooLarge, match="over the limit of 1000"):
        read_wheel_metadata_by_ranges(fetch, "big-1.0-py3-none-any.whl", max_size=1000)
