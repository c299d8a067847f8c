"""`kernodeck.index.metadata.parse_core_metadata`: METADATA bytes through `packaging.metadata`,
with located errors for what the resolver cannot use."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from kernodeck.index.metadata import parse_core_metadata
from kernodeck.index.models import MetadataError

SOURCE = "demo-1.0-py3-none-any.whl"


def meta(*lines: str, body: str = "") -> bytes:
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def test_fields_the_resolver_needs() -> None:
    m = parse_core_metadata(
        meta(
            "Metadata-Version: 2.1",
            "Name: Demo_Pkg",
            "Version: 1.0.post1 ",
            "Requires-Dist: numpy>=1.20",
            "Requires-Dist: rich ; extra == 'Fancy'",
            "Requires-Python: >=3.9",
            "Provides-Extra: Fancy",
            "Classifier: not a real classifier",
            body="Requires-Dist: body-text-is-not-a-header\n",
        ),
        source=SOURCE,
    )
    assert m.name == "Demo_Pkg"
    assert m.version == Version("1.0.post1")
    assert m.requires_dist == (Requirement("numpy>=1.20"), Requirement("rich ; extra == 'Fancy'"))
    assert m.requires_python == SpecifierSet(">=3.9")
    assert m.provides_extra == frozenset({"fancy"})


def test_blank_requires_python_and_no_metadata_version_are_accepted() -> None:
    m = parse_core_metadata(meta("Name: demo", "Version: 1", "Requires-Python: "), source=SOURCE)
    assert m.requires_python is None
    assert m.requires_dist == ()


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (("Version: 1.0",), "has no Name or Version"),
        (("Name: demo",), "has no Name or Version"),
        (("Name: demo", "Version: one point oh"), "invalid Version 'one point oh'"),
        (("Name: demo", "Version: 1", "Requires-Python: >=3.x"), "invalid Requires-Python '>=3.x'"),
        (("Name: demo", "Version: 1", "Version: 2"), "unreadable Version (appears more than once)"),
        (("Name: demo", "Name: other", "Version: 1"), "unreadable Name (appears more than once)"),
    ],
)
def test_malformed_metadata_is_a_located_error(lines: tuple[str, ...], words: str) -> None:
    with pytest.raises(MetadataError) as e:
        parse_core_metadata(meta(*lines), source=SOURCE)
    assert f"core metadata of {SOURCE}" in e.value.message
    assert words in e.value.message


def test_invalid_requires_dist_names_the_line_and_the_reason() -> None:
    with pytest.raises(MetadataError) as e:
        parse_core_metadata(
            meta("Name: demo", "Version: 1", "Requires-Dist: fine>=1", "Requires-Dist: broken >=>= 2"),
            source=SOURCE,
        )
    assert e.value.message == f"core metadata of {SOURCE} has an invalid Requires-Dist 'broken >=>= 2'"
    assert e.value.context and e.value.context[0]  # packaging's reason, first line


def test_a_field_that_is_not_utf8_is_named() -> None:
    data = b"Name: demo\nVersion: 1\nRequires-Dist: caf\xe9\n\n"
    with pytest.raises(MetadataError) as e:
        parse_core_metadata(data, source=SOURCE)
    assert "unreadable Requires-Dist (is not UTF-8)" in e.value.message


def test_a_field_the_resolver_does_not_read_may_be_malformed() -> None:
    data = b"Name: demo\nVersion: 1\nSummary: caf\xe9\nSummary: twice\n\n"
    assert parse_core_metadata(data, source=SOURCE).version == Version("1")
