"""[resume]: checkpoint sha256, state keys (weights_only), the run, the trajectory and its first divergence."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch

from kernodeck.checks import resume_steps
from kernodeck.checks.resume import trajectory_step
from kernodeck.manifest import Manifest, loads_manifest
from kernodeck.manifest.schema import Trajectory
from kernodeck.report import Status, Step

PY = sys.executable

HEAD = """
schema-version = 1
[reference]
name = "t"
id = "1"
[python]
version = "3.11"
[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"
"""

# "resumes" by copying the reference log, so only the checkpoint checks differ between tests
APP = "import shutil, sys; shutil.copy('ref.jsonl', sys.argv[1])"


def write_log(path: Path, losses: list[float], start: int = 201) -> None:
    path.write_text("".join(json.dumps({"step": start + i, "loss": v}) + "\n" for i, v in enumerate(losses)))


def make(tmp_path: Path, state: dict[str, object], required: list[str], sha: str | None = None) -> Manifest:
    torch.save(state, tmp_path / "ckpt.pt")
    digest = sha or hashlib.sha256((tmp_path / "ckpt.pt").read_bytes()).hexdigest()
    (tmp_path / "app.py").write_text(APP)
    write_log(tmp_path / "ref.jsonl", [1.0, 0.9, 0.8])
    return loads_manifest(
        HEAD + "[resume]\n"
        f'checkpoint = {{ path = "ckpt.pt", sha256 = "{digest}" }}\n'
        f"required-state = {json.dumps(required)}\n"
        'run = ["python", "app.py", "{out}/log.jsonl"]\n'
        'trajectory = { log = "log.jsonl", reference = "ref.jsonl", metric = "loss", rtol = 1e-4 }\n'
    )


FULL = {
    "model": {"0.weight": torch.ones(2, 2)},
    "step": 200,
    "rng": {"python": (3, (1, 2), None), "torch": torch.get_rng_state(), "cuda": []},
}


def by_name(steps: list[Step]) -> dict[str, Step]:
    return {s.name: s for s in steps}


def test_resume_passes_in_order(tmp_path: Path) -> None:
    m = make(tmp_path, FULL, ["model", "step", "model.0.weight", "rng.python", "rng.torch", "rng.cuda"])
    steps = resume_steps(m, tmp_path, PY, out_dir=tmp_path / "out")
    assert [s.name for s in steps] == [
        "checkpoint ckpt.pt: sha256",
        "checkpoint ckpt.pt: state",
        "resume run",
        "trajectory loss",
    ]
    assert all(s.layer == "resume" and s.status is Status.PASSED for s in steps), [s.error for s in steps]


def test_missing_rng_state_fails_and_skips_the_run(tmp_path: Path) -> None:
    m = make(tmp_path, FULL, ["model", "rng.python", "rng.numpy", "rng.cuda"])
    steps = by_name(resume_steps(m, tmp_path, PY, out_dir=tmp_path / "out"))
    state = steps["checkpoint ckpt.pt: state"]
    assert state.status is Status.FAILED
    assert state.error == "ckpt.pt: state: missing rng.numpy (top-level keys: model, rng, step)"
    assert steps["resume run"].status is Status.SKIPPED


def test_changed_checkpoint_fails_sha256(tmp_path: Path) -> None:
    m = make(tmp_path, FULL, ["model"], sha="0" * 64)
    steps = resume_steps(m, tmp_path, PY, out_dir=tmp_path / "out")
    assert steps[0].status is Status.FAILED and "ckpt.pt: sha256: expected 000" in (steps[0].error or "")
    assert [s.status for s in steps[1:]] == [Status.SKIPPED] * 3


def test_pickled_objects_are_refused_by_weights_only(tmp_path: Path) -> None:
    m = make(tmp_path, {"model": Path("x")}, ["model"])
    state = by_name(resume_steps(m, tmp_path, PY, out_dir=tmp_path / "out"))["checkpoint ckpt.pt: state"]
    assert state.status is Status.FAILED and "weights_only=True" in (state.error or "")


def test_no_resume_declared(tmp_path: Path) -> None:
    steps = resume_steps(loads_manifest(HEAD), tmp_path, PY)
    assert [s.status for s in steps] == [Status.SKIPPED]


# --- trajectory alone ------------------------------------------------------------------------


def traj(tmp_path: Path, got: list[float], ref: list[float], **tol: float) -> tuple[Status, str | None]:
    (tmp_path / "out").mkdir(exist_ok=True)
    write_log(tmp_path / "out" / "log.jsonl", got)
    write_log(tmp_path / "ref.jsonl", ref)
    t = Trajectory(log="log.jsonl", reference="ref.jsonl", metric="loss", **tol)
    s = trajectory_step(t, tmp_path / "out", tmp_path)
    return s.status, s.error


def test_trajectory_within_tolerance(tmp_path: Path) -> None:
    assert traj(tmp_path, [1.0, 0.90000001], [1.0, 0.9], rtol=1e-4)[0] is Status.PASSED


def test_trajectory_reports_the_first_diverging_step(tmp_path: Path) -> None:
    status, error = traj(tmp_path, [1.0, 0.9, 0.7, 0.5], [1.0, 0.9, 0.8, 0.6], rtol=1e-4)
    assert status is Status.FAILED
    assert error is not None and "first divergence at step 203: loss 0.7 vs reference 0.8" in error


def test_trajectory_length_and_tolerance_problems(tmp_path: Path) -> None:
    status, error = traj(tmp_path, [1.0], [1.0, 0.9], atol=1e-6)
    assert status is Status.FAILED and "1 steps logged, the reference has 2" in (error or "")
    status, error = traj(tmp_path, [1.0], [1.0])
    assert status is Status.FAILED and "no tolerance" in (error or "")
    (tmp_path / "out" / "log.jsonl").write_text('{"step": 1, "acc": 0.5}\n')
    t = Trajectory(log="log.jsonl", reference="ref.jsonl", metric="loss", rtol=1e-4)
    assert "line 1 has no 'loss'" in (trajectory_step(t, tmp_path / "out", tmp_path).error or "")
