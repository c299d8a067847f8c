"""`verify --only/--skip` take layers comma-separated as well as repeated, and the report's settings
name the layers that were meant, whichever way they were written."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.installed_env import manifest_text

DATA = b"rows\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "d.txt").write_bytes(DATA)
    sha = hashlib.sha256(DATA).hexdigest()
    (tmp_path / "repro.toml").write_text(
        manifest_text(f'[[data]]\nname = "d"\npath = "d.txt"\nsha256 = "{sha}"\n')
    )
    return tmp_path


def _report(project: Path, *args: str) -> dict[str, object]:
    r = subprocess.run(
        [sys.executable, "-m", "kernodeck", "verify", str(project), "--json", "-", "--no-compute", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KERNODECK_CACHE_DIR": str(project / ".cache")},
    )
    assert r.returncode in (0, 1), r.stderr
    data: dict[str, object] = json.loads(r.stdout)
    return data


def _layers(report: dict[str, object]) -> set[str]:
    steps = report["steps"]
    assert isinstance(steps, list)
    return {s["layer"] for s in steps}


def test_comma_separated_only_equals_repeated_only(project: Path) -> None:
    comma = _report(project, "--only", "data,interpreter")
    repeated = _report(project, "--only", "data", "--only", "interpreter")
    assert _layers(comma) == _layers(repeated) == {"data", "interpreter"}
    assert comma["settings"] == repeated["settings"]
    assert isinstance(comma["settings"], dict) and comma["settings"]["only"] == ["data", "interpreter"]


def test_comma_separated_skip(project: Path) -> None:
    report = _report(project, "--only", "data, interpreter", "--skip", "interpreter,packages")
    assert _layers(report) == {"data"}
    assert isinstance(report["settings"], dict) and report["settings"]["skip"] == ["interpreter", "packages"]


def test_unknown_layer_in_a_list_is_a_usage_error(project: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "kernodeck", "verify", str(project), "--only", "data,bogus"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "unknown layer 'bogus'" in r.stderr
