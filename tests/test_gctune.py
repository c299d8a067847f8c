"""`fewer_collections`: raised collector thresholds inside the block, the caller's restored after
(also when the block fails), so a library caller of `lock_manifest` keeps its own settings."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from kernodeck.support.gctune import THRESHOLDS, fewer_collections


def test_thresholds_are_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == THRESHOLDS
    assert gc.get_threshold() == before


def test_thresholds_are_restored_after_an_error() -> None:
    gc.set_threshold(1234, 11, 12)
    try:
        with pytest.raises(RuntimeError), fewer_collections():
            raise RuntimeError("boom")
        assert gc.get_threshold() == (1234, 11, 12)
    finally:
        gc.set_threshold(700, 10, 10)


def test_verify_and_require_check_with_fewer_collections(tmp_path: Path) -> None:
    """A training script has imported torch before `require()`: every full collection then walks
    torch's objects too, so the check runs with the raised thresholds, and the script's own are
    back afterwards (also when the check raises)."""
    from kernodeck.api import require
    from kernodeck.errors import CheckFailed
    from kernodeck.probe.runner import FakeProbe
    from tests.fixtures.verify_project import load, project

    seen: list[tuple[int, int, int]] = []

    class Recording(FakeProbe):
        def collect(self, request: Any) -> Any:
            seen.append(gc.get_threshold())
            return super().collect(request)

    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    gc.set_threshold(900, 9, 9)
    try:
        require(tmp_path / "repro.toml", probe=Recording(facts), cache_dir=tmp_path / "cache")
        assert seen and set(seen) == {THRESHOLDS}
        assert gc.get_threshold() == (900, 9, 9)
        (tmp_path / "requirements-rebuild-linux-x86_64-cpu.txt").write_text(
            "numpy==0.0.1 --hash=sha256:" + "0" * 64 + "\n"
        )
        with pytest.raises(CheckFailed):
            require(tmp_path / "repro.toml", probe=Recording(facts), cache_dir=tmp_path / "cache")
        assert gc.get_threshold() == (900, 9, 9)
    finally:
        gc.set_threshold(700, 10, 10)
