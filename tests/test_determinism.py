"""kernodeck.determinism: the variables the runner sets, and what apply() sets and reports."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from kernodeck import determinism
from kernodeck.manifest.schema import Determinism


@pytest.fixture(autouse=True)
def _restore_torch_flags() -> object:
    flags = (torch.are_deterministic_algorithms_enabled(), torch.get_float32_matmul_precision(),
             torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32)  # fmt: skip
    yield None
    torch.use_deterministic_algorithms(flags[0])
    torch.set_float32_matmul_precision(flags[1])
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32 = (
        flags[2:]
    )


def test_env_for_and_settings_from_env_round_trip() -> None:
    det = Determinism(
        seed=1234, deterministic_algorithms=True, cudnn_benchmark=False, float32_matmul_precision="highest"
    )
    env = determinism.env_for(det)
    assert env["KERNODECK_SEED"] == "1234" and env["PYTHONHASHSEED"] == "1234"
    assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert determinism.settings_from_env(env) == {
        "seed": 1234,
        "deterministic-algorithms": True,
        "cudnn-benchmark": False,
        "float32-matmul-precision": "highest",
    }
    assert determinism.env_for(None) == {}
    with pytest.raises(ValueError, match="KERNODECK_CUDNN_BENCHMARK"):
        determinism.settings_from_env({"KERNODECK_CUDNN_BENCHMARK": "maybe"})


def test_apply_seeds_every_generator_and_reports_them(tmp_path: Path) -> None:
    env = determinism.env_for(
        Determinism(seed=5, deterministic_algorithms=True, float32_matmul_precision="high")
    )
    env["KERNODECK_DETERMINISM_REPORT"] = str(tmp_path / "det.json")
    first = determinism.apply(environ=env)
    draws = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    second = determinism.apply(environ=env)
    assert draws == (random.random(), float(np.random.rand()), float(torch.rand(1)))
    assert first == second
    assert first["settings"]["seed"] == 5
    assert first["numpy"]["default-bit-generator"] == "PCG64"
    assert first["torch"]["generator"].startswith("mt19937")
    assert first["torch"]["deterministic-algorithms"] is True and torch.are_deterministic_algorithms_enabled()
    assert first["torch"]["cudnn"]["deterministic"] is True
    assert first["torch"]["float32-matmul-precision"] == "high"
    assert json.loads((tmp_path / "det.json").read_text())["settings"]["seed"] == 5


def test_apply_from_a_manifest_model(tmp_path: Path) -> None:
    det = Determinism(seed=3, cudnn_benchmark=False, float32_matmul_precision="highest")
    out = determinism.apply(det, environ={})
    assert out["settings"] == {"seed": 3, "cudnn-benchmark": False, "float32-matmul-precision": "highest"}
    assert out["torch"]["cudnn"]["allow-tf32"] is False


def test_apply_without_settings_sets_nothing() -> None:
    out = determinism.apply(environ={})
    assert out["settings"] == {}
    assert "seeded" not in out["python"]


def test_importing_does_not_import_torch_numpy_or_pydantic() -> None:
    code = "import sys, kernodeck.determinism; print(sorted(m for m in ('torch', 'numpy', 'pydantic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
