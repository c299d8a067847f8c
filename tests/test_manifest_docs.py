"""docs/manifest.md is generated from the schema models: the committed file is current, and every
key of every table is in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernodeck.manifest import schema
from kernodeck.manifest.docs import manifest_reference
from kernodeck.manifest.model import models_of, pydantic_model

ROOT = Path(__file__).resolve().parents[1]


def test_committed_reference_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_manifest_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr + " (run: python scripts/gen_manifest_docs.py)"


def test_every_key_of_every_model_is_documented() -> None:
    text = manifest_reference()
    models = models_of(schema.__name__)
    assert len(models) > 10
    for model in models:
        for name, field in pydantic_model(model).model_fields.items():
            assert f"| `{field.alias or name}` |" in text, f"{model.__name__}.{name}"
    assert "## `[[packages.index]]`" in text and "## `[[check.output]]`" in text


def test_examples_are_linked_and_exist() -> None:
    text = (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8")
    linked = [line.split("](../", 1)[1].rstrip(")") for line in text.splitlines() if "](../" in line]
    assert linked, "the examples are listed"
    for rel in linked:
        assert (ROOT / rel).is_file(), rel


def test_guides_link_only_to_files_in_the_repository() -> None:
    import re

    for guide in sorted((ROOT / "docs").rglob("*.md")):
        for target in re.findall(r"\]\(([^)#]+)\)", guide.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (guide.parent / target).resolve().is_file(), f"{guide.relative_to(ROOT)} -> {target}"
