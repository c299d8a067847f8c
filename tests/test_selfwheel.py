"""The Kernodeck a bundle carries: the extras its checks need, and requirements hashed line by line."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kernodeck.handover import selfwheel
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.schema import Manifest

BASE = (
    'schema-version = 1\n[reference]\nname = "s"\nid = "1"\n[python]\nversion = "3.11"\n'
    '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
)
NPY_CHECK = '[[check]]\nname = "c"\nrun = ["python", "a.py"]\n[[check.output]]\npath = "x.npy"\nshape = [3]\n'


def _manifest(tmp_path: Path, extra: str = "") -> Manifest:
    (tmp_path / "repro.toml").write_text(BASE + extra)
    return load_manifest(tmp_path / "repro.toml")


def test_an_npy_output_asks_for_the_checks_extra_and_its_pins(tmp_path: Path) -> None:
    assert selfwheel.needed_extras(_manifest(tmp_path)) == []
    assert selfwheel.needed_extras(_manifest(tmp_path, NPY_CHECK)) == ["checks"]
    names = {p.split("==")[0] for p in selfwheel.dependency_pins(["checks"])}
    assert {"numpy", "safetensors", "click", "pydantic"} <= names
    assert not {"numpy", "safetensors"} & {p.split("==")[0] for p in selfwheel.dependency_pins()}


def test_every_line_is_hashed_from_the_locks_and_the_wheel(tmp_path: Path) -> None:
    m = _manifest(tmp_path, NPY_CHECK)
    pins = selfwheel.dependency_pins(["checks"])
    lock = "--index-url http://127.0.0.1:9/simple\n" + "".join(
        f"{p.split(';')[0].strip()} --hash=sha256:{hashlib.sha256(p.encode()).hexdigest()}\n" for p in pins
    )
    tool = selfwheel.tool_files(m, "_kernodeck", lock_texts=[lock])
    assert tool.warnings == []
    ((path, wheel),) = tool.files.items()
    lines = tool.requirements.replace("\\\n", " ").splitlines()
    assert lines[1] == "--index-url http://127.0.0.1:9/simple"
    assert lines[2] == f"./{path} --hash=sha256:{hashlib.sha256(wheel).hexdigest()}"
    assert len(lines[3:]) == len(pins) and all("--hash=sha256:" in line for line in lines[3:])


def test_pins_without_a_hash_are_named_in_a_warning(tmp_path: Path) -> None:
    tool = selfwheel.tool_files(_manifest(tmp_path), "_kernodeck", lock_texts=[])
    (warning,) = tool.warnings
    assert warning.startswith("_kernodeck/requirements.txt: no file hash for ")
    assert "click==" in warning and "no lock file names an index" in warning
