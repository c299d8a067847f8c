"""`fewer_collections`: raised collector thresholds inside the block, the caller's restored after
(also when the block fails), so a library caller of `lock_manifest` keeps its own settings."""

from __future__ import annotations

import gc

import pytest

from kernodeck.gctune import THRESHOLDS, fewer_collections


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
