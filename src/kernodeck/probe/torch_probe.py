"""The torch probe: the one collector of torch's facts (import, devices, control computation).

Standard library plus torch. `stages()` yields one JSON-ready object per stage ({"stage":
"import", ...}, {"stage": "devices", ...}, {"stage": "compute", ...}); probe/runner.py turns them
into TorchFacts. It is used two ways:

- isolated: run as a script in its own process under the TARGET interpreter, with a timeout; it
  prints each stage as one JSON line, flushed, so that a crash or a hang in a later stage keeps
  what the earlier stages found (`--python` targets, `--isolate-torch`);

      python -I torch_probe.py [--device auto|cpu|cuda|mps|xpu] [--no-compute] [--size N]

- in-process: imported as kernodeck.probe.torch_probe by the interpreter being checked
  (`require()`, verify of the running interpreter), on the torch module the script imports
  anyway (runner.py `collect_torch_in_process`). A crash there is the caller's crash.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: The stated tolerance of the control computation: relative Frobenius error of a float32 matrix
#: product against the float64 CPU product, with float32 matmul precision set to "highest".
REL_TOLERANCE = 1e-3


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


def first_error(e: BaseException) -> str:
    lines = traceback.format_exception_only(type(e), e)
    text = "".join(lines).strip().splitlines()
    return text[-1] if text else type(e).__name__


def build_kind(torch: Any) -> str:
    v = torch.version
    if getattr(v, "hip", None):
        return "rocm"
    if getattr(v, "cuda", None):
        return "cuda"
    if getattr(v, "xpu", None):
        return "xpu"
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    if sys.platform == "darwin" and mps is not None and mps.is_built():
        return "mps"
    return "cpu"


def devices(torch: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"stage": "devices"}
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out["cuda_available"] = bool(torch.cuda.is_available())
            out["device_count"] = int(torch.cuda.device_count()) if out["cuda_available"] else 0
        except Exception as e:
            out["cuda_available"] = False
            out["device_count"] = 0
            out["error"] = first_error(e)
        devs: list[dict[str, Any]] = []
        for i in range(out["device_count"]):
            try:
                p = torch.cuda.get_device_properties(i)
                devs.append(
                    {
                        "index": i,
                        "name": str(p.name),
                        "capability": [int(p.major), int(p.minor)],
                        "total_memory": int(p.total_memory),
                        "multi_processor_count": int(getattr(p, "multi_processor_count", 0)),
                        "gcn_arch": getattr(p, "gcnArchName", None),
                    }
                )
            except Exception as e:
                devs.append({"index": i, "error": first_error(e)})
        out["devices"] = devs
        try:
            out["arch_list"] = list(torch.cuda.get_arch_list()) if out["cuda_available"] else []
        except Exception as e:
            out["arch_list"] = []
            out["arch_list_error"] = first_error(e)
        caught.extend(str(x.message).strip().splitlines()[0] for x in w if str(x.message).strip())
    try:
        out["cudnn"] = torch.backends.cudnn.version() if out["cuda_available"] else None
    except Exception:
        out["cudnn"] = None
    mps = getattr(torch.backends, "mps", None)
    out["mps_built"] = bool(mps is not None and mps.is_built())
    out["mps_available"] = bool(mps is not None and mps.is_available())
    xpu = getattr(torch, "xpu", None)
    try:
        out["xpu_available"] = bool(xpu is not None and xpu.is_available())
        out["xpu_device_count"] = int(xpu.device_count()) if xpu is not None and out["xpu_available"] else 0
    except Exception:
        out["xpu_available"] = False
        out["xpu_device_count"] = 0
    out["warnings"] = caught
    return out


def pick_device(torch: Any, want: str, devs: dict[str, Any]) -> str | None:
    """The device to compute on, or None when the wanted kind is not usable (never a fallback)."""
    if want in ("cuda", "rocm"):
        return "cuda:0" if devs.get("cuda_available") and devs.get("device_count") else None
    if want == "mps":
        return "mps" if devs.get("mps_available") else None
    if want == "xpu":
        return "xpu:0" if devs.get("xpu_available") else None
    if want == "cpu":
        return "cpu"
    # auto: the best accelerator there is, else the CPU
    if devs.get("cuda_available") and devs.get("device_count"):
        return "cuda:0"
    if devs.get("mps_available"):
        return "mps"
    if devs.get("xpu_available"):
        return "xpu:0"
    return "cpu"


def synchronize(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()
    elif device.startswith("xpu"):
        torch.xpu.synchronize()


def compute(torch: Any, device: str, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "stage": "compute",
        "device": device,
        "n": n,
        "dtype": "float32",
        "tolerance": REL_TOLERANCE,
    }
    precision = None
    try:
        # in-process this is the user's torch: its global setting is put back below
        precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        g = torch.Generator().manual_seed(0)
        a64 = torch.randn(n, n, generator=g, dtype=torch.float64)
        b64 = torch.randn(n, n, generator=g, dtype=torch.float64)
        ref = a64 @ b64
        a = a64.to(torch.float32).to(device)
        b = b64.to(torch.float32).to(device)
        synchronize(torch, device)
        (a @ b).sum().item()  # warm-up: kernel selection and context creation are not timed
        synchronize(torch, device)
        t0 = time.perf_counter()
        c = a @ b
        synchronize(torch, device)
        out["seconds"] = time.perf_counter() - t0
        c64 = c.to("cpu").to(torch.float64)
        rel = float(torch.linalg.norm(c64 - ref) / torch.linalg.norm(ref))
        out["rel_err"] = rel
        out["max_abs_err"] = float((c64 - ref).abs().max())
        out["finite"] = bool(torch.isfinite(c64).all())
        out["status"] = "ok" if out["finite"] and rel <= REL_TOLERANCE else "mismatch"
    except Exception as e:
        out["status"] = "failed"
        out["error"] = first_error(e)
    finally:
        if precision is not None:
            torch.set_float32_matmul_precision(precision)
    return out


def import_torch() -> Any:
    """torch: the module already imported when there is one (in-process), else imported now."""
    mod = sys.modules.get("torch")
    return mod if mod is not None else importlib.import_module("torch")


@dataclass(frozen=True)
class Imported:
    """The outcome of an `import torch` done ahead of the stages (require() imports torch while
    the environment probe runs): the module or what the import raised, and how long it took."""

    module: Any
    error: BaseException | None
    seconds: float

    def importer(self) -> Any:
        """The `importer` of `stages`: the module, or the import's error raised again."""
        if self.error is not None:
            raise self.error
        return self.module


def import_ahead() -> Imported:
    """`import torch` now (the module already imported when there is one), its failure kept as a
    value for `stages` to report as the import stage's (only KeyboardInterrupt goes through)."""
    t0 = time.perf_counter()
    try:
        return Imported(import_torch(), None, time.perf_counter() - t0)
    except BaseException as e:  # as stages(): an ImportError, an OSError, a SystemExit...
        if isinstance(e, KeyboardInterrupt):
            raise
        return Imported(None, e, time.perf_counter() - t0)


def stages(
    device: str = "auto",
    compute_: bool = True,
    size: int = 256,
    importer: Callable[[], Any] = import_torch,
) -> Iterator[dict[str, Any]]:
    """The probe's stages, in order (the one place that decides which facts torch gives)."""
    t0 = time.perf_counter()
    try:
        torch = importer()
    except BaseException as e:  # an ImportError, an OSError from a missing .so, a SystemExit...
        if isinstance(e, KeyboardInterrupt):
            raise
        yield {
            "stage": "import",
            "status": "failed",
            "error": first_error(e),
            "seconds": time.perf_counter() - t0,
        }
        return
    v = torch.version
    yield {
        "stage": "import",
        "status": "ok",
        "seconds": time.perf_counter() - t0,
        "version": str(torch.__version__),
        "cuda": getattr(v, "cuda", None),
        "hip": getattr(v, "hip", None),
        "xpu": getattr(v, "xpu", None),
        "git_version": getattr(v, "git_version", None),
        "debug": bool(getattr(v, "debug", False)),
        "build_kind": build_kind(torch),
        "file": getattr(torch, "__file__", None),
        "num_threads": torch.get_num_threads(),
    }
    devs = devices(torch)
    yield devs
    if not compute_:
        yield {"stage": "compute", "status": "skipped", "error": "--no-compute"}
        return
    where = pick_device(torch, device, devs)
    if where is None:
        yield {"stage": "compute", "status": "skipped", "error": f"no usable {device} device"}
        return
    yield compute(torch, where, size)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kernodeck-torch-probe")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "rocm", "mps", "xpu"])
    ap.add_argument("--no-compute", action="store_true")
    ap.add_argument("--size", type=int, default=256)
    args = ap.parse_args(argv)

    emit({"stage": "start", "python": sys.version.split()[0]})
    for stage in stages(args.device, not args.no_compute, args.size):
        emit(stage)
    return 0


if __name__ == "__main__":
    sys.exit(main())
