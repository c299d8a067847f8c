"""METADATA of a remote wheel by range requests: how many requests it takes.

The tail comes first; when the central directory does not fit in it, the rest of the directory is
fetched together with what precedes it, where a wheel keeps its .dist-info (METADATA, WHEEL,
RECORD): two requests where three were made before, the same bytes out."""

from __future__ import annotations

import io
import zipfile

import pytest

from kernodeck.index.metadata import TAIL_BYTES, RangeFetch, read_wheel_metadata_by_ranges
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
