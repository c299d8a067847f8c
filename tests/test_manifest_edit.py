"""manifest.edit: tomlkit edits keep comments and order, paths address arrays of tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.errors import ManifestError
from kernodeck.manifest.edit import (
    get_value,
    load_document,
    parse_path,
    remove_value,
    save_document,
    set_value,
)

TEXT = """\
#:schema ../../schema/repro.schema.json
schema-version = 1   # keep me

[[check]]
name = "a"
run = ["python", "x.py"]

[[check.output]]
path = "e.npy"
atol = 1e-5   # justified tolerance

[resume]
checkpoint = { path = "c.pt" }
"""


def test_parse_path() -> None:
    assert parse_path("check[0].output[1].sha256") == ["check", 0, "output", 1, "sha256"]
    assert parse_path("check.0.output") == ["check", 0, "output"]
    assert parse_path('packages.sources."my.pkg"') == ["packages", "sources", "my.pkg"]
    assert parse_path(["a", 1]) == ["a", 1]


def test_set_values_keeps_comments_and_order(tmp_path: Path) -> None:
    p = tmp_path / "repro.toml"
    p.write_text(TEXT)
    doc = load_document(p)
    set_value(doc, "check[0].output[0].sha256", "a" * 64)
    set_value(doc, "check[0].output[0].shape", [16, 384])
    set_value(doc, "resume.checkpoint.sha256", "b" * 64)
    set_value(doc, "reference.id", "2")
    save_document(doc, p)
    text = p.read_text()
    assert text.startswith("#:schema ../../schema/repro.schema.json\nschema-version = 1   # keep me\n")
    assert "atol = 1e-5   # justified tolerance\n" in text
    assert "shape = [16, 384]" in text
    assert f'checkpoint = {{ path = "c.pt", sha256 = "{"b" * 64}" }}' in text
    assert get_value(load_document(p), "check[0].output[0].sha256") == "a" * 64
    assert get_value(doc, "check[3].name", "none") == "none"
    assert remove_value(doc, "reference.id") and not remove_value(doc, "reference.id")


def test_missing_array_item_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "repro.toml"
    p.write_text(TEXT)
    with pytest.raises(KeyError, match=r"check\[2\]"):
        set_value(load_document(p), "check[2].name", "x")


def test_syntax_error_is_located(tmp_path: Path) -> None:
    p = tmp_path / "repro.toml"
    p.write_text("a = \n")
    with pytest.raises(ManifestError):
        load_document(p)
