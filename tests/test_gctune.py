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


def test_objects_left_by_the_block_go_to_the_oldest_generation_unwalked() -> None:
    gc.collect()
    with fewer_collections():
        kept = [[i] for i in range(20_000)]  # young objects that outlive the block
    assert gc.get_count()[0] < 20_000  # not waiting in the youngest generation to be walked
    assert gc.get_freeze_count() == 0
    assert len(kept) == 20_000


def test_a_callers_frozen_objects_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with fewer_collections():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
