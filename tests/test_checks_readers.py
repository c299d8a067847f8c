"""Readers: every format reads back, keys pick one array/tensor/field, failures are values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file as save_np
from safetensors.torch import save_file as save_pt

from kernodeck.checks.readers import Loaded, Unreadable, dtype_name, lookup, read_output


def loaded(path: Path, key: str | None = None) -> Loaded:
    r = read_output(path, key)
    assert isinstance(r, Loaded), r
    return r


def test_npy(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((2, 3), dtype=np.float16))
    r = loaded(tmp_path / "a.npy")
    assert r.dtype == "float16" and r.value.shape == (2, 3)
    assert isinstance(read_output(tmp_path / "a.npy", "x"), Unreadable)


def test_npz_per_array(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", logits=np.ones((4, 2), np.float32), labels=np.arange(4))
    assert loaded(tmp_path / "a.npz", "labels").dtype == "int64"
    r = read_output(tmp_path / "a.npz")
    assert isinstance(r, Unreadable) and "labels, logits" in r.reason and "key" in r.reason
    missing = read_output(tmp_path / "a.npz", "nope")
    assert isinstance(missing, Unreadable) and "no array 'nope'" in missing.reason


def test_safetensors_per_tensor_and_bfloat16(tmp_path: Path) -> None:
    save_np({"w": np.ones((3, 4), np.float32), "b": np.zeros(3, np.float32)}, str(tmp_path / "m.safetensors"))
    assert loaded(tmp_path / "m.safetensors", "w").value.shape == (3, 4)
    save_pt({"h": torch.ones(2, 2, dtype=torch.bfloat16)}, str(tmp_path / "bf.safetensors"))
    r = loaded(tmp_path / "bf.safetensors")
    assert r.dtype == "bfloat16" and r.value.dtype == np.float32


def test_pt_weights_only_with_dotted_key(tmp_path: Path) -> None:
    torch.save({"model": {"0.weight": torch.ones(16, 8)}, "step": 3}, tmp_path / "c.pt")
    r = loaded(tmp_path / "c.pt", "model.0.weight")
    assert r.dtype == "float32" and r.value.shape == (16, 8)
    assert loaded(tmp_path / "c.pt", "step").value == 3


def test_pt_refuses_pickled_objects(tmp_path: Path) -> None:
    torch.save({"obj": Path("x")}, tmp_path / "evil.pt")
    r = read_output(tmp_path / "evil.pt")
    assert isinstance(r, Unreadable) and "cannot read evil.pt" in r.reason


def test_json_jsonl_csv(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text(json.dumps({"eval": {"accuracy": 0.9}, "labels": ["a", "b"]}))
    assert loaded(tmp_path / "m.json", "eval.accuracy").value == 0.9
    (tmp_path / "r.jsonl").write_text('{"id": "a", "y": 1}\n\n{"id": "b", "y": 2}\n')
    assert loaded(tmp_path / "r.jsonl").value == [{"id": "a", "y": 1}, {"id": "b", "y": 2}]
    assert loaded(tmp_path / "r.jsonl", "id").value == ["a", "b"]
    bad = read_output(tmp_path / "r.jsonl", "z")
    assert isinstance(bad, Unreadable) and "record 1 has no 'z'" in bad.reason
    (tmp_path / "t.csv").write_text("id,score,label\n1,0.5,cat\n2,1.5,dog\n")
    assert loaded(tmp_path / "t.csv", "score").value == [0.5, 1.5]
    assert loaded(tmp_path / "t.csv", "id").value == [1, 2]
    assert loaded(tmp_path / "t.csv", "label").value == ["cat", "dog"]
    assert len(loaded(tmp_path / "t.csv").value) == 2


def test_missing_corrupt_and_unknown(tmp_path: Path) -> None:
    r = read_output(tmp_path / "none.npy")
    assert isinstance(r, Unreadable) and r.missing_file
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    r = read_output(tmp_path / "bad.npy")
    assert isinstance(r, Unreadable) and not r.missing_file and "cannot read bad.npy" in r.reason
    (tmp_path / "x.parquet").write_bytes(b"")
    r = read_output(tmp_path / "x.parquet")
    assert isinstance(r, Unreadable) and "no reader for .parquet" in r.reason


@pytest.mark.parametrize(
    ("given", "name"),
    [("f4", "float32"), ("<f4", "float32"), ("torch.bfloat16", "bfloat16"), ("float64", "float64")],
)
def test_dtype_name(given: str, name: str) -> None:
    assert dtype_name(given) == name


def test_lookup_literal_then_dotted() -> None:
    assert lookup({"rng.python": 1}, "rng.python") == (True, 1)
    assert lookup({"rng": {"cuda": []}}, "rng.cuda") == (True, [])
    assert lookup({"a": [10, 20]}, "a.1") == (True, 20)
    assert lookup({"a": 1}, "b") == (False, None)


def test_every_listed_suffix_has_a_reader_and_no_other() -> None:
    from kernodeck.checks.readers import _READERS, SUFFIXES

    assert sorted(_READERS) == sorted(SUFFIXES)
