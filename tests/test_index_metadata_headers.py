"""`parse_core_metadata` reads plain METADATA headers without the email parser
(`kernodeck.index.metadata._plain_headers`): every answer and every error is the one the email
parser's reading gives, and anything the plain reader does not know goes to the email parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from packaging.metadata import parse_email

from kernodeck.index import metadata as md
from kernodeck.index.metadata import parse_core_metadata
from kernodeck.index.models import CoreMetadata, MetadataError

SOURCE = "demo-1.0-py3-none-any.whl"

HEAD = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"

# (what the plain reader must do: "reads" or "defers", METADATA bytes)
CASES: list[tuple[str, bytes]] = [
    ("reads", (HEAD + "Requires-Dist: numpy>=1.20\nRequires-Dist: rich ; extra == 'x'\n\nbody").encode()),
    ("reads", (HEAD + "Requires-Python:   >=3.9  \nProvides-Extra: X\n").encode()),  # no body, no blank line
    ("reads", (HEAD + "Requires-Python: >=3.9").encode()),  # no newline at the end
    ("reads", HEAD.replace("\n", "\r\n").encode() + b"Requires-Dist: a\r\n\r\nbody\r\n"),  # CRLF
    ("reads", (HEAD + "Author: Jos\u00e9\nDescription: one\n        |two\n\nbody").encode()),  # unread fields
    ("reads", (HEAD + "requires-dist: lower-case-header\nREQUIRES-DIST: UPPER\n").encode()),
    ("reads", (HEAD + "Version: 2.0\n").encode()),  # repeated: the email parser's "unparsed"
    ("reads", (HEAD + "Name: other\nRequires-Python: >=3\nRequires-Python: >=3.8\n").encode()),
    ("reads", b"Name: demo\nVersion: one point oh\n"),
    ("reads", (HEAD + "Requires-Dist: numpy>=>1\n").encode()),
    ("reads", (HEAD + "Requires-Python: >=3.x\n").encode()),
    ("reads", b"Metadata-Version: 2.1\nName: demo\n"),  # no Version
    ("reads", (HEAD + "\nRequires-Dist: in-the-body\n").encode()),  # after the header block
    ("defers", (HEAD + "Requires-Dist: numpy\n  >=1.20\n").encode()),  # a folded field read here
    ("defers", (" Name: demo\n" + HEAD).encode()),  # a block that starts with a continuation
    ("defers", (HEAD + "Requires-Dist: caf\u00e9\n").encode()),  # non-ASCII in a field read here
    ("defers", (HEAD + "not a header line\nRequires-Dist: ignored-by-email\n").encode()),
    ("defers", (HEAD + "Bad Name: x\nRequires-Dist: ignored-by-email\n").encode()),
    ("defers", (HEAD + "Requires-Dist: a\rRequires-Dist: b\n").encode()),  # a lone CR
    ("defers", ("From someone\n" + HEAD).encode()),
    ("defers", (HEAD + "Author: \xe9\n").encode("latin-1")),  # not UTF-8
    ("defers", (HEAD + "Requires-Dist: \xe9\n").encode("latin-1")),
]


def _by_email(data: bytes) -> CoreMetadata | str:
    """`parse_core_metadata` reading every file with the email parser."""
    with mock.patch.object(md, "_plain_headers", return_value=None):
        return _outcome(data)


def _outcome(data: bytes) -> CoreMetadata | str:
    try:
        return parse_core_metadata(data, source=SOURCE)
    except MetadataError as e:
        return f"{e} | {e.context} | {e.hint}"


@pytest.mark.parametrize(("kind", "data"), CASES)
def test_the_plain_reader_answers_as_the_email_parser(kind: str, data: bytes) -> None:
    found = md._plain_headers(data)
    assert (found is not None) == (kind == "reads")
    if found is not None:
        raw: dict[str, Any]
        raw, unparsed = parse_email(data)  # type: ignore[assignment]
        assert found == (
            {k: raw[k] for k, _ in md._FIELDS if k in raw},
            {h.lower(): unparsed[h.lower()] for _, h in md._FIELDS if h.lower() in unparsed},
        )
    assert _outcome(data) == _by_email(data)


def test_a_field_repeated_or_invalid_is_the_same_error_either_way() -> None:
    assert "unreadable Version (appears more than once)" in str(_outcome((HEAD + "Version: 2\n").encode()))
    bad = _outcome((HEAD + "Requires-Dist: numpy>=>1\n").encode())
    assert isinstance(bad, str) and "invalid Requires-Dist 'numpy>=>1'" in bad


def test_the_same_requirement_text_is_parsed_once() -> None:
    a = parse_core_metadata(
        (HEAD + "Requires-Dist: shared-dep>=1 ; python_version>'3'\n").encode(), source="a"
    )
    b = parse_core_metadata(
        (HEAD + "Requires-Dist: shared-dep>=1 ; python_version>'3'\n").encode(), source="b"
    )
    assert a.requires_dist == b.requires_dist
    assert a.requires_dist[0] is b.requires_dist[0]


def test_real_wheels_metadata_reads_plainly(tmp_path: Path) -> None:
    """METADATA as setuptools, hatchling and flit write it (the wheels of this environment)."""
    import importlib.metadata

    read = 0
    for dist in importlib.metadata.distributions():
        path = getattr(dist, "_path", None)
        if path is None or not (Path(path) / "METADATA").is_file():
            continue
        data = (Path(path) / "METADATA").read_bytes()
        if md._plain_headers(data) is not None:
            read += 1
        assert _outcome(data) == _by_email(data), dist.metadata["Name"]
    assert read >= 20


def test_a_long_folded_license_and_damaged_blocks_read_as_the_email_parser_reads_them() -> None:
    """A License field folded over a thousand lines (as numpy's and scipy's METADATA carry it),
    then that block damaged at random (seeded): a newline, a blank, a tab, a colon, a CR, a From
    line, a non-ASCII letter or a field read here put anywhere. The plain reader answers as the
    email parser does, or defers to it."""
    import random

    folds = "".join(f"        line {i}: terms\n" for i in range(1200))
    license_ = "License: Copyright (c) the authors\n" + folds
    block = (
        HEAD
        + "Summary: demo\n"
        + license_
        + "Requires-Python: >=3.9\nRequires-Dist: numpy>=1.20\nProvides-Extra: test\n"
        + "Requires-Dist: pytest ; extra == 'test'\n\nThe description.\n"
    ).encode()
    assert md._plain_headers(block) is not None  # the whole file, undamaged, is read here
    assert _outcome(block) == _by_email(block)
    pieces = [b"\n", b"\n ", b"\n\t", b" ", b":", b"\r", b"\r\n", b"\nFrom x\n", b"\xc3\xa9", b"\n\n"]
    pieces += [b"\nRequires-Dist: extra-dep\n", b"\nrequires-python:>=3\n", b"\nName:\n", b"\n  folded"]
    rnd = random.Random(20261206)
    read = deferred = 0
    for _ in range(300):
        data = bytearray(block)
        for _ in range(rnd.randrange(1, 4)):
            at = rnd.randrange(len(data) + 1)
            data[at:at] = rnd.choice(pieces)
        found = md._plain_headers(bytes(data))
        if found is None:
            deferred += 1
        else:
            read += 1
            raw, unparsed = parse_email(bytes(data))
            assert found == (
                {k: raw[k] for k, _ in md._FIELDS if k in raw},  # type: ignore[literal-required]
                {h.lower(): unparsed[h.lower()] for _, h in md._FIELDS if h.lower() in unparsed},
            ), bytes(data)
        assert _outcome(bytes(data)) == _by_email(bytes(data))
    assert read > 50 and deferred > 50  # both ways taken
