"""The Hugging Face cache layout has one owner: capture and verify find models, datasets and spaces
at the same place."""

from __future__ import annotations

from pathlib import Path

from kernodeck import hfcache
from kernodeck.capture import hub_cache_file


def test_roots_in_the_order_the_hub_library_uses(tmp_path: Path) -> None:
    assert hfcache.default_root({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == Path("/a")
    assert hfcache.default_root({"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}) == Path("/b/hub")
    assert hfcache.default_root({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/hub")


def test_kinds_of_repositories() -> None:
    assert hfcache.repo_folder("/r", "org/name") == Path("/r/models--org--name")
    assert hfcache.repo_folder("/r", "datasets/org/set") == Path("/r/datasets--org--set")
    assert hfcache.repo_folder("/r", "spaces/org/app") == Path("/r/spaces--org--app")
    assert hfcache.snapshot("/r", "org/name", "abc") == Path("/r/models--org--name/snapshots/abc")


def test_capture_finds_a_dataset_file_where_verify_looks(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    snap = hfcache.snapshot(root, "datasets/org/set", "0" * 40)
    snap.mkdir(parents=True)
    (snap / "train.jsonl").write_text("{}\n")
    found = hub_cache_file("datasets/org/set", "0" * 40, "train.jsonl", {"HF_HUB_CACHE": str(root)})
    assert found == snap / "train.jsonl"
    assert hub_cache_file("org/set", "0" * 40, "train.jsonl", {"HF_HUB_CACHE": str(root)}) is None
