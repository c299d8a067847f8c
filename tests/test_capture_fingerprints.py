"""Fingerprints filled in, not typed: a [[data]]/[[weights]] entry may leave sha256 out or empty;
validate warns, verify fails with a hint, capture computes and writes it keeping the rest of the
file byte for byte, and `capture --data NAME` refreshes one entry."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernodeck.capture import capture
from kernodeck.cli import cli, main
from kernodeck.fingerprint import fingerprint
from kernodeck.manifest import load_manifest

TODAY = dt.date(2026, 12, 2)

MANIFEST = """# A manifest written by hand.   Odd   spacing is kept.
schema-version = 1

[reference]
name = "fp"   # the name
id = "2026-11-01.1"

[python]
version = "3.11"

[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"

# the training set; its fingerprint is not typed by hand
[[data]]
name = "train"
path = "data/train.jsonl"   # one sample per line

[[data]]
name = "shards"
path = "data/shards"
sha256 = ""   # a folder

[[weights]]
name = "init"
path = "checkpoints/init.bin"
sha256 = ""
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "data" / "shards").mkdir(parents=True)
    (proj / "checkpoints").mkdir()
    (proj / "data" / "train.jsonl").write_bytes(b'{"x": 1}\n{"x": 2}\n')
    (proj / "data" / "shards" / "a.bin").write_bytes(b"a" * 100)
    (proj / "data" / "shards" / "b.bin").write_bytes(b"b" * 50)
    (proj / "checkpoints" / "init.bin").write_bytes(b"\x00\x01weights")
    (proj / "repro.toml").write_text(MANIFEST, encoding="utf-8")
    return proj


def _verify_data(proj: Path, tmp_path: Path) -> dict[str, dict[str, object]]:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli, ["verify", str(proj / "repro.toml"), "--only", "data", "--json", str(out)]
    )
    assert out.exists(), result.output
    steps = json.loads(out.read_text())["steps"]
    return {s["name"]: s for s in steps if s["layer"] == "data"}


def test_validate_accepts_missing_fingerprints_with_a_warning(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(project / "repro.toml")]) == 0
    err = capsys.readouterr().err
    assert "warning: data[0].sha256: data 'train' has no sha256 yet" in err
    assert "warning: data[1].sha256: data 'shards' has no sha256 yet" in err
    assert "warning: weights[0].sha256: weights 'init' has no sha256 yet" in err


def test_verify_fails_an_unrecorded_fingerprint_with_a_hint(project: Path, tmp_path: Path) -> None:
    steps = _verify_data(project, tmp_path)
    train = steps["data:train"]
    assert train["status"] == "failed"
    assert "no recorded sha256" in str(train["error"])
    assert "kernodeck capture --data train" in str(train["hint"])
    assert steps["weights:init"]["status"] == "failed"


def test_capture_fills_fingerprints_keeping_everything_else(project: Path, tmp_path: Path) -> None:
    result = capture(project / "repro.toml", system_probe=None, today=TODAY)
    assert result.written and result.new_id is None  # recorded, not changed: the id stays
    text = (project / "repro.toml").read_text(encoding="utf-8")
    train = hashlib.sha256(b'{"x": 1}\n{"x": 2}\n').hexdigest()
    shards = fingerprint(project / "data" / "shards").sha256
    init = hashlib.sha256(b"\x00\x01weights").hexdigest()
    expected = (
        MANIFEST.replace(
            'path = "data/train.jsonl"   # one sample per line\n',
            f'path = "data/train.jsonl"   # one sample per line\nsha256 = "{train}"\n',
        )
        .replace('sha256 = ""   # a folder', f'sha256 = "{shards}"   # a folder')
        .replace(
            'path = "checkpoints/init.bin"\nsha256 = ""', f'path = "checkpoints/init.bin"\nsha256 = "{init}"'
        )
    )
    assert text == expected
    m = load_manifest(project / "repro.toml")
    assert (m.reference.id, m.data[0].sha256, m.data[1].sha256) == ("2026-11-01.1", train, shards)

    steps = _verify_data(project, tmp_path)
    assert {n: s["status"] for n, s in steps.items()} == {
        "data:train": "passed",
        "data:shards": "passed",
        "weights:init": "passed",
    }
    again = capture(project / "repro.toml", system_probe=None, today=TODAY)
    assert not again.filled and not again.changes and not again.written


def test_capture_data_refreshes_one_entry(project: Path) -> None:
    capture(project / "repro.toml", system_probe=None, today=TODAY)
    (project / "data" / "train.jsonl").write_bytes(b'{"x": 3}\n')
    (project / "checkpoints" / "init.bin").write_bytes(b"changed too")
    before = (project / "repro.toml").read_text()
    result = CliRunner().invoke(
        cli, ["capture", str(project / "repro.toml"), "--no-system", "--data", "train"]
    )
    assert result.exit_code == 0, result.output
    assert "data[0].sha256" in result.output
    after = (project / "repro.toml").read_text()
    new = hashlib.sha256(b'{"x": 3}\n').hexdigest()
    assert f'sha256 = "{new}"' in after
    m = load_manifest(project / "repro.toml")
    assert m.weights[0].sha256 == hashlib.sha256(b"\x00\x01weights").hexdigest()  # not refreshed
    assert m.reference.id != "2026-11-01.1"  # a recorded fingerprint changed: a new reference
    assert before.count("\n") == after.count("\n")

    bad = CliRunner().invoke(cli, ["capture", str(project / "repro.toml"), "--data", "nope"])
    assert bad.exit_code == 2
    assert "no [[data]] or [[weights]] entry named 'nope'" in bad.output and "train" in bad.output


def test_a_folder_mismatch_names_the_files_added_removed_and_changed(project: Path, tmp_path: Path) -> None:
    shards = project / "data" / "shards"
    for i in range(8):
        (shards / f"extra-{i}.bin").write_bytes(bytes([i]) * 10)
    capture(project / "repro.toml", system_probe=None, today=TODAY)
    recorded = fingerprint(shards).sha256
    kept = project / ".kernodeck" / "listings" / f"{recorded}.sha256"
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == recorded  # the digest is of the listing
    (shards / "a.bin").write_bytes(b"A" * 100)  # changed
    (shards / "b.bin").unlink()  # removed
    for i in range(7):
        (shards / f"new-{i}.bin").write_bytes(b"n")  # added
    step: Any = _verify_data(project, tmp_path)["data:shards"]
    assert step["status"] == "failed" and step["details"]["cause"] == "hash-mismatch"
    assert step["error"] == (
        "data/shards differs from the reference's 10 files: "
        "7 added (new-0.bin, new-1.bin, new-2.bin, new-3.bin, new-4.bin and 2 more); "
        "1 removed (b.bin); 1 changed (a.bin)"
    )
    assert step["details"]["removed"] == ["b.bin"] and step["details"]["reference_files"] == 10


def test_a_folder_mismatch_without_a_kept_listing_says_the_count(project: Path, tmp_path: Path) -> None:
    capture(project / "repro.toml", system_probe=None, today=TODAY)
    listings = project / ".kernodeck" / "listings"
    recorded = fingerprint(project / "data" / "shards").sha256
    (listings / f"{recorded}.sha256").write_text("edited\n")  # not the listing the digest is of
    (project / "data" / "shards" / "c.bin").write_bytes(b"c")
    step: Any = _verify_data(project, tmp_path)["data:shards"]
    assert step["status"] == "failed"
    assert "3 files now; the reference's files were not listed" in step["error"]
    assert "kernodeck capture --data shards" in step["error"]
    (listings / f"{recorded}.sha256").unlink()  # an older manifest: no listing at all
    assert "3 files now" in str(_verify_data(project, tmp_path)["data:shards"]["error"])
