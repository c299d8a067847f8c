"""Seed and pin the sources of numerical variation an application run can control.

An application calls `apply()` first thing. It reads the `[determinism]` table of a manifest, or,
when Kernodeck runs the application as a check, the `KERNODECK_*` variables the check runner sets
(see `env_for`). It seeds Python, NumPy and torch (every device), sets deterministic algorithms,
the cuDNN flags and the float32 matmul precision as declared, and returns what it set, including
the generators used, so a report can explain numeric differences.

Importing this module imports only the standard library; NumPy and torch are imported by `apply()`
and only when they are installed. A manifest model is accepted but never required, so an
application can use this file without pydantic.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernodeck.support import envvars

if TYPE_CHECKING:
    from kernodeck.manifest.schema import Determinism, Manifest

ENV_SEED = envvars.SEED.name
ENV_DETERMINISTIC = envvars.DETERMINISTIC_ALGORITHMS.name
ENV_CUDNN_BENCHMARK = envvars.CUDNN_BENCHMARK.name
ENV_CUDNN_DETERMINISTIC = envvars.CUDNN_DETERMINISTIC.name
ENV_MATMUL_PRECISION = envvars.FLOAT32_MATMUL_PRECISION.name
ENV_REPORT = envvars.DETERMINISM_REPORT.name
"""When set (by the check runner), `apply()` also writes what it set to this JSON file."""

DEFAULT_CUBLAS_WORKSPACE_CONFIG = ":4096:8"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_for(determinism: Determinism | None) -> dict[str, str]:
    """The variables a check runner sets for a declared `[determinism]` table.

    `KERNODECK_*` carry the settings to `apply()` in the application's process. `PYTHONHASHSEED`
    defaults to the seed and `CUBLAS_WORKSPACE_CONFIG` to `:4096:8` when deterministic
    algorithms are asked for (cuBLAS refuses deterministic mode without it); the table's own
    `env` is applied last and wins.
    """
    if determinism is None:
        return {}
    out: dict[str, str] = {}
    if determinism.seed is not None:
        out[ENV_SEED] = str(determinism.seed)
        out["PYTHONHASHSEED"] = str(determinism.seed % 4294967296)
    if determinism.deterministic_algorithms is not None:
        out[ENV_DETERMINISTIC] = _flag(determinism.deterministic_algorithms)
        if determinism.deterministic_algorithms:
            out["CUBLAS_WORKSPACE_CONFIG"] = DEFAULT_CUBLAS_WORKSPACE_CONFIG
    if determinism.cudnn_benchmark is not None:
        out[ENV_CUDNN_BENCHMARK] = _flag(determinism.cudnn_benchmark)
    if determinism.cudnn_deterministic is not None:
        out[ENV_CUDNN_DETERMINISTIC] = _flag(determinism.cudnn_deterministic)
    if determinism.float32_matmul_precision is not None:
        out[ENV_MATMUL_PRECISION] = determinism.float32_matmul_precision
    out.update(determinism.env)
    return out


def declared_env(determinism: Determinism | None) -> dict[str, str]:
    """The `[determinism] env` table: the variables the run must be started with."""
    return dict(determinism.env) if determinism is not None else {}


def env_prefix(determinism: Determinism | None) -> str:
    """`NAME=value ...` before a command a procedure runs (REBUILD.md), shell-quoted; "" when none."""
    import shlex

    return "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(declared_env(determinism).items()))


@contextmanager
def started_with_declared_env(determinism: Determinism | None) -> Iterator[None]:
    """This process's environment with `[determinism] env` set, for the processes it starts inside
    (rebuild's verify: the procedure starts the run as the manifest says), restored after."""
    wanted = declared_env(determinism)
    before = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Read the settings `env_for` wrote; keys are those of the `[determinism]` table."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    if env.get(ENV_SEED, "").strip():
        out["seed"] = int(env[ENV_SEED])
    for key, var in (
        ("deterministic-algorithms", ENV_DETERMINISTIC),
        ("cudnn-benchmark", ENV_CUDNN_BENCHMARK),
        ("cudnn-deterministic", ENV_CUDNN_DETERMINISTIC),
    ):
        if var in env:
            out[key] = _parse_flag(var, env[var])
    if env.get(ENV_MATMUL_PRECISION):
        precision = env[ENV_MATMUL_PRECISION]
        if precision not in ("highest", "high", "medium"):
            raise ValueError(f"{ENV_MATMUL_PRECISION}={precision!r}: expected highest, high or medium")
        out["float32-matmul-precision"] = precision
    return out


def apply(
    manifest: Manifest | Determinism | str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Apply the declared settings in this process and return what was set.

    `manifest` is a Manifest, its Determinism table, or the path of a repro.toml; without it the
    `KERNODECK_*` variables are read. The result lists, per library, what was seeded or set and the
    generator used (e.g. numpy's default bit generator, torch's CPU generator).
    """
    settings = _settings(manifest, environ)
    result: dict[str, Any] = {"settings": dict(settings)}
    seed = settings.get("seed")

    hashseed = (os.environ if environ is None else environ).get("PYTHONHASHSEED")
    py: dict[str, Any] = {
        "version": ".".join(map(str, sys.version_info[:3])),
        "generator": "random.Random (MT19937)",
        "PYTHONHASHSEED": hashseed,
        "hash-randomization": bool(sys.flags.hash_randomization),
    }
    if seed is not None:
        random.seed(seed)
        py["seeded"] = True
    result["python"] = py

    if _installed("numpy"):
        result["numpy"] = _apply_numpy(seed)
    if _installed("torch"):
        result["torch"] = _apply_torch(settings)

    report = (os.environ if environ is None else environ).get(ENV_REPORT)
    if report:
        _write_json(Path(report), result)
    return result


# --- libraries ---------------------------------------------------------------------------------


def _apply_numpy(seed: int | None) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {
        "version": np.__version__,
        "legacy-generator": "RandomState (MT19937)",
        "default-bit-generator": type(np.random.default_rng(0).bit_generator).__name__,
    }
    if seed is not None:
        np.random.seed(seed % 4294967296)
        out["seeded"] = True
    return out


def _apply_torch(settings: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {
        "version": str(torch.__version__),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "generator": "mt19937 (cpu)",
    }
    cuda = bool(torch.cuda.is_available())
    if cuda:
        out["device-generator"] = "philox4x32-10 (cuda)"
        out["device-count"] = torch.cuda.device_count()
    seed = settings.get("seed")
    if seed is not None:
        torch.manual_seed(seed)  # seeds the CPU generator and every device's
        if cuda:
            torch.cuda.manual_seed_all(seed)
        out["seeded"] = "all devices" if cuda else "cpu"
    deterministic = settings.get("deterministic-algorithms")
    if deterministic is not None:
        if deterministic and cuda:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", DEFAULT_CUBLAS_WORKSPACE_CONFIG)
        torch.use_deterministic_algorithms(bool(deterministic))
        out["deterministic-algorithms"] = bool(torch.are_deterministic_algorithms_enabled())
        out["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    cudnn = torch.backends.cudnn
    if settings.get("cudnn-benchmark") is not None:
        cudnn.benchmark = bool(settings["cudnn-benchmark"])
    cudnn_det = settings.get("cudnn-deterministic")
    if cudnn_det is None and deterministic:
        cudnn_det = True  # deterministic algorithms imply deterministic cuDNN kernels
    if cudnn_det is not None:
        cudnn.deterministic = bool(cudnn_det)
    precision = settings.get("float32-matmul-precision")
    if precision is not None:
        torch.set_float32_matmul_precision(precision)
        cudnn.allow_tf32 = precision != "highest"
    out["cudnn"] = {
        "benchmark": bool(cudnn.benchmark),
        "deterministic": bool(cudnn.deterministic),
        "allow-tf32": bool(cudnn.allow_tf32),
    }
    out["float32-matmul-precision"] = torch.get_float32_matmul_precision()
    return out


def declared_settings(determinism: Determinism | None) -> dict[str, Any]:
    """The torch-level settings a `[determinism]` table declares, keyed as `apply()` keys them."""
    return _settings(determinism, None) if determinism is not None else {}


def torch_settings() -> dict[str, Any] | None:
    """What this process's torch is set to now, keyed as `apply()` keys them (`seed`: torch's
    initial seed); None when torch is not imported here (it is never imported for this)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cudnn = torch.backends.cudnn
    return {
        "seed": int(torch.initial_seed()),
        "deterministic-algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "cudnn-benchmark": bool(cudnn.benchmark),
        "cudnn-deterministic": bool(cudnn.deterministic),
        "float32-matmul-precision": str(torch.get_float32_matmul_precision()),
    }


# --- helpers -----------------------------------------------------------------------------------


def _settings(
    manifest: Manifest | Determinism | str | Path | None, environ: Mapping[str, str] | None
) -> dict[str, Any]:
    if manifest is None:
        return settings_from_env(environ)
    if isinstance(manifest, str | Path):
        from kernodeck.manifest.load import load_manifest

        manifest = load_manifest(manifest)
    # a Manifest or a Determinism was built with pydantic: importing the schema costs nothing more
    from kernodeck.manifest.schema import Manifest as _Manifest

    det = manifest.determinism if isinstance(manifest, _Manifest) else manifest
    if det is None:
        return {}
    out: dict[str, Any] = {}
    for key, value in (
        ("seed", det.seed),
        ("deterministic-algorithms", det.deterministic_algorithms),
        ("cudnn-benchmark", det.cudnn_benchmark),
        ("cudnn-deterministic", det.cudnn_deterministic),
        ("float32-matmul-precision", det.float32_matmul_precision),
    ):
        if value is not None:
            out[key] = value
    return out


def _installed(name: str) -> bool:
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _flag(v: bool) -> str:
    return "1" if v else "0"


def _parse_flag(var: str, value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{var}={value!r}: expected 1 or 0")


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
