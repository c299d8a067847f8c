"""Every example validates; the checked-in JSON Schema is current; tomlkit round trips are exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomlkit

from kernodeck.cli import main
from kernodeck.manifest import load_manifest
from kernodeck.manifest.jsonschema import schema_dict, schema_text

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(ROOT.glob("manifests/*/repro.toml"))


def test_required_examples_exist() -> None:
    names = {p.parent.name for p in EXAMPLES}
    assert {"embeddings", "training-resume"} <= names
    rocm = [
        p for p in EXAMPLES if any((pl.backend or "").startswith("rocm") for pl in load_manifest(p).platform)
    ]
    assert rocm, "one example must declare a ROCm platform"


def test_embeddings_example_platforms() -> None:
    m = load_manifest(ROOT / "manifests/embeddings/repro.toml")
    kinds = {(p.os, p.backend) for p in m.platform}
    assert ("linux", "cpu") in kinds and ("macos", None) in {
        (os, b if b != "mps" else None) for os, b in kinds
    }
    assert any(b and b.startswith("cu") for _, b in kinds)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_example_validates(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(path)]) == 0
    assert "valid" in capsys.readouterr().out


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_example_declares_schema(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first == "#:schema ../../schema/repro.schema.json"
    assert (path.parent / "../../schema/repro.schema.json").resolve().is_file()


@pytest.mark.parametrize(
    "path", [*EXAMPLES, ROOT / "tests/data/design-example.toml"], ids=lambda p: p.parent.name
)
def test_tomlkit_round_trip_is_byte_identical(path: Path) -> None:
    raw = path.read_bytes()
    doc = tomlkit.parse(raw.decode("utf-8"))
    assert tomlkit.dumps(doc).encode("utf-8") == raw
    comments = [line for line in raw.decode().splitlines() if line.lstrip().startswith("#")]
    assert all(c in tomlkit.dumps(doc) for c in comments)


def test_checked_in_schema_is_current() -> None:
    on_disk = (ROOT / "schema/repro.schema.json").read_text(encoding="utf-8")
    assert on_disk == schema_text(), "schema/repro.schema.json is stale: run `make schema`"


def test_schema_command_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == schema_dict()
    assert printed["properties"]["schema-version"]["const"] == 1
    assert printed["additionalProperties"] is False
    assert "allow-dirty" in printed["$defs"]["Code"]["properties"]
