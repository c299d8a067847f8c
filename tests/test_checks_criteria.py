"""Criteria: one Step per criterion; a failure names the output, the criterion and what was observed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernodeck.checks.criteria import Mode, evaluate
from kernodeck.manifest.schema import CheckOutput
from kernodeck.report import Status, Step


def judge(tmp_path: Path, spec: dict[str, Any], mode: Mode = "check") -> dict[str, Step]:
    out = tmp_path / "out"
    o = CheckOutput.model_validate(spec)
    steps = evaluate("c", o, out, tmp_path, mode=mode)
    return {s.name.split(": ", 1)[1]: s for s in steps}


@pytest.fixture
def emb(tmp_path: Path) -> np.ndarray:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 8)).astype(np.float32)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    (tmp_path / "out").mkdir()
    (tmp_path / "ref").mkdir()
    np.save(tmp_path / "ref" / "e.npy", a)
    np.save(tmp_path / "out" / "e.npy", a)
    return a


def test_all_pass_with_names_and_order(tmp_path: Path, emb: np.ndarray) -> None:
    spec = {"path": "e.npy", "shape": [-1, 8], "dtype": "float32", "finite": True, "min": -1, "max": 1,
            "reference": "ref/e.npy", "atol": 1e-6, "cosine-min": 0.9999, "count": 4}  # fmt: skip
    steps = judge(tmp_path, spec)
    assert list(steps) == [
        "exists",
        "count",
        "shape",
        "dtype",
        "finite",
        "range",
        "vs reference",
        "cosine-min",
    ]
    assert all(s.status is Status.PASSED for s in steps.values())
    assert steps["vs reference"].details["max-abs-error"] == 0.0
    assert steps["shape"].observed == [4, 8]


def test_wrong_dtype(tmp_path: Path, emb: np.ndarray) -> None:
    np.save(tmp_path / "out" / "e.npy", emb.astype(np.float64))
    s = judge(tmp_path, {"path": "e.npy", "dtype": "float32"})["dtype"]
    assert s.status is Status.FAILED
    assert s.error == "e.npy: dtype: expected float32, observed float64"


def test_nan_fails_finite_and_cosine(tmp_path: Path, emb: np.ndarray) -> None:
    bad = emb.copy()
    bad[2, 5] = np.nan
    np.save(tmp_path / "out" / "e.npy", bad)
    steps = judge(tmp_path, {"path": "e.npy", "finite": True, "reference": "ref/e.npy", "cosine-min": 0.99})
    assert steps["finite"].status is Status.FAILED
    assert (
        steps["finite"].error == "e.npy: finite: expected all finite, observed 1 NaN, 0 Inf (first at [2, 5])"
    )
    assert steps["cosine-min"].status is Status.FAILED and "row 2" in (steps["cosine-min"].error or "")


def test_shape_mismatch_skips_the_comparison(tmp_path: Path, emb: np.ndarray) -> None:
    np.save(tmp_path / "out" / "e.npy", emb[:3])
    steps = judge(tmp_path, {"path": "e.npy", "shape": [4, 8], "reference": "ref/e.npy", "atol": 1e-3})
    assert steps["shape"].error == "e.npy: shape: expected [4, 8], observed [3, 8]"
    assert steps["vs reference"].status is Status.SKIPPED


def test_tolerance_reports_max_abs_and_rel_error(tmp_path: Path, emb: np.ndarray) -> None:
    moved = emb.copy()
    moved[1, 3] += 1e-3
    np.save(tmp_path / "out" / "e.npy", moved)
    s = judge(tmp_path, {"path": "e.npy", "reference": "ref/e.npy", "atol": 1e-5})["vs reference"]
    assert s.status is Status.FAILED
    assert s.details["max-abs-error"] == pytest.approx(1e-3, rel=1e-3)
    assert s.details["worst"] == [1, 3]
    assert "max abs error 0.001" in (s.error or "") and "1 of 32 values outside (worst at [1, 3])" in (
        s.error or ""
    )
    ok = judge(tmp_path, {"path": "e.npy", "reference": "ref/e.npy", "atol": 2e-3})["vs reference"]
    assert ok.status is Status.PASSED
    rel = judge(tmp_path, {"path": "e.npy", "reference": "ref/e.npy", "rtol": 1e-9})["vs reference"]
    assert rel.status is Status.FAILED and rel.details["max-rel-error"] > 0


def test_cosine_per_row(tmp_path: Path, emb: np.ndarray) -> None:
    moved = emb.copy()
    moved[3] = -moved[3]
    np.save(tmp_path / "out" / "e.npy", moved)
    s = judge(tmp_path, {"path": "e.npy", "reference": "ref/e.npy", "cosine-min": 0.9999})["cosine-min"]
    assert s.status is Status.FAILED
    assert "min cosine -1.000000 (row 3); 1 of 4 rows below" in (s.error or "")


def test_numeric_reference_without_tolerance_fails_with_a_hint(tmp_path: Path, emb: np.ndarray) -> None:
    s = judge(tmp_path, {"path": "e.npy", "reference": "ref/e.npy"})["reference"]
    assert s.status is Status.FAILED and "atol" in (s.hint or "")


def test_exact_and_labels(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "labels.json").write_text(json.dumps({"labels": ["billing", "bug", "login"]}))
    (tmp_path / "ref.json").write_text(json.dumps({"labels": ["billing", "bug", "account"]}))
    steps = judge(tmp_path, {"path": "labels.json", "key": "labels", "equals": ["billing", "bug", "login"]})
    assert steps["equals"].status is Status.PASSED
    steps = judge(tmp_path, {"path": "labels.json", "key": "labels", "reference": "ref.json"})
    s = steps["equals reference"]
    assert s.status is Status.FAILED
    assert "first difference at position 2: 'login' instead of 'account'" in (s.error or "")


def test_ids_in_order(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"id": f"t-{i}", "text": "x"}) + "\n" for i in range(4))
    )
    (tmp_path / "out" / "ids.json").write_text(json.dumps(["t-0", "t-1", "t-2", "t-3"]))
    assert judge(tmp_path, {"path": "ids.json", "ids-from": "in.jsonl#id"})["ids"].status is Status.PASSED
    (tmp_path / "out" / "ids.json").write_text(json.dumps(["t-0", "t-2", "t-1", "t-3"]))
    s = judge(tmp_path, {"path": "ids.json", "ids-from": "in.jsonl#id"})["ids"]
    assert s.status is Status.FAILED
    assert s.error == (
        "ids.json: ids: expected 4 ids of in.jsonl#id, in order, observed same 4 ids in a different order; "
        "first difference at position 1: 't-2' instead of 't-1'"
    )
    # records with an id field, and a CSV input
    (tmp_path / "out" / "rows.jsonl").write_text(
        "".join(json.dumps({"id": f"t-{i}"}) + "\n" for i in range(3))
    )
    s = judge(tmp_path, {"path": "rows.jsonl", "ids-from": "in.jsonl#id"})["ids"]
    assert s.status is Status.FAILED and "3 items instead of 4" in (s.error or "")
    (tmp_path / "in.csv").write_text("id\n1\n2\n")
    (tmp_path / "out" / "n.json").write_text("[1, 2]")
    assert judge(tmp_path, {"path": "n.json", "ids-from": "in.csv#id"})["ids"].status is Status.PASSED


def test_metric_within_bounds(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "m.json").write_text(json.dumps({"eval": {"accuracy": 0.71}}))
    s = judge(tmp_path, {"path": "m.json", "metric": "eval.accuracy", "min": 0.8})["metric eval.accuracy"]
    assert s.status is Status.FAILED
    assert s.error == "m.json: metric eval.accuracy: expected >= 0.8, observed 0.71"
    s = judge(tmp_path, {"path": "m.json", "metric": "eval.f1", "min": 0.8})["metric eval.f1"]
    assert s.status is Status.FAILED and "missing" in (s.error or "")
    (tmp_path / "ref.json").write_text(json.dumps({"eval": {"accuracy": 0.7}}))
    spec = {"path": "m.json", "metric": "eval.accuracy", "reference": "ref.json", "atol": 0.02}
    assert judge(tmp_path, spec)["metric eval.accuracy vs reference"].status is Status.PASSED


def test_missing_output_and_absent(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "other.npy").write_bytes(b"")
    s = judge(tmp_path, {"path": "e.npy", "shape": [1]})
    assert list(s) == ["exists"]
    assert s["exists"].error == "e.npy: exists: expected present and readable, observed missing"
    assert "other.npy" in (s["exists"].hint or "")
    assert judge(tmp_path, {"path": "debug.log", "exists": False})["exists"].status is Status.PASSED


def test_sha256_pins_reference_and_output_bytes(tmp_path: Path, emb: np.ndarray) -> None:
    ref_sha = hashlib.sha256((tmp_path / "ref" / "e.npy").read_bytes()).hexdigest()
    spec = {"path": "e.npy", "reference": "ref/e.npy", "atol": 1e-6, "sha256": ref_sha}
    assert judge(tmp_path, spec)["reference sha256"].status is Status.PASSED
    spec["sha256"] = "0" * 64
    s = judge(tmp_path, spec)
    assert s["reference sha256"].status is Status.FAILED and "vs reference" not in s
    # without a reference, sha256 is the recorded output: a difference is a warning unless exact
    w = judge(tmp_path, {"path": "e.npy", "sha256": "0" * 64})["sha256"]
    assert w.status is Status.WARNING and not w.required
    f = judge(tmp_path, {"path": "e.npy", "sha256": "0" * 64, "exact": True})["sha256"]
    assert f.status is Status.FAILED


def test_record_mode_leaves_out_reference_comparisons(tmp_path: Path, emb: np.ndarray) -> None:
    spec = {"path": "e.npy", "shape": [4, 8], "reference": "missing/e.npy", "atol": 1e-6, "sha256": "0" * 64}
    steps = judge(tmp_path, spec, mode="record")
    assert list(steps) == ["exists", "shape"]
