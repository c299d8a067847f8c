"""Layer `device`: devices torch can use, their capability against the build's arch list, the
`[system] gpu` expectations, and a small timed matrix product against a float64 CPU result.

When the run needs an accelerator and none is usable, the step fails naming the broken link (no
driver, driver too old, CPU-only torch build, devices hidden, capability not in the arch list) and
the computation is skipped: there is never a fallback to the CPU.
"""

from __future__ import annotations

from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from kernodeck.backends import min_driver_for_cuda
from kernodeck.layers.backend import describe_build, torch_relevant
from kernodeck.layers.context import Context
from kernodeck.manifest.schema import Manifest
from kernodeck.probe.facts import Facts, TorchCompute, TorchDevice, TorchFacts
from kernodeck.report import Status, Step

LAYER = "device"

_HIDE_VARS = {
    "cuda": ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
    "rocm": ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"),
    "xpu": ("ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR"),
}


def needed_kind(manifest: Manifest, facts: Facts, ctx: Context) -> str | None:
    """The accelerator kind this run must use; None when the CPU is fine."""
    b = ctx.backend
    if b is not None and b.is_gpu:
        return b.kind
    if manifest.system.rocm:
        return "rocm"
    if manifest.system.cuda or manifest.system.nvidia_driver:
        return "cuda"
    if manifest.system.require_accelerator or manifest.system.gpu is not None:
        kind = facts.torch_build_kind()
        return kind if kind not in (None, "cpu") else "any"
    return None


def torch_device_kind(kind: str | None) -> str:
    """The --device value the torch probe gets for an accelerator kind."""
    return {"cuda": "cuda", "rocm": "cuda", "mps": "mps", "xpu": "xpu", None: "cpu", "any": "auto"}.get(
        kind, "auto"
    )


def _hidden(kind: str, facts: Facts) -> tuple[str, str] | None:
    for var in _HIDE_VARS.get(kind, ()):
        val = facts.env.get(var)
        if val is None:
            continue
        v = val.strip()
        if v in ("", "-1", "none", "void", "NoDevFiles") or v.startswith("-"):
            return var, val
    return None


def diagnose(kind: str, manifest: Manifest, facts: Facts, ctx: Context) -> tuple[str, str, str]:
    """(cause, message, hint) for "no usable device of this kind"."""
    t = facts.torch
    build = facts.torch_build_kind()
    if kind in ("cuda", "rocm", "any") and build == "cpu":
        # both links can be broken at once: say so, or fixing torch alone looks like the cure
        no_driver = ""
        if kind in ("cuda", "any") and facts.nvidia.driver() is None and not facts.rocm.driver_present:
            no_driver = "; the machine has no NVIDIA driver either"
        elif kind == "rocm" and not facts.rocm.driver_present:
            no_driver = "; the machine has no AMD GPU driver (/dev/kfd) either"
        return (
            "cpu-only-build",
            f"torch {t.version} is a CPU-only build: it cannot use any GPU{no_driver}",
            f"install the locked GPU build of torch{f' ({ctx.backend.name})' if ctx.backend else ''}"
            + (" and the GPU driver on the host" if no_driver else ""),
        )
    if kind == "any" and build is not None:
        kind = build
    if kind == "cuda" and build == "cuda":
        drv = facts.nvidia.driver()
        if drv is None:
            return (
                "no-driver",
                "no NVIDIA driver is loaded (/proc/driver/nvidia/version absent, nvidia-smi unavailable): torch sees no GPU",
                "install the NVIDIA driver; in a container, run with the NVIDIA container toolkit (--gpus all)",
            )
        if t.cuda:
            floor, why = min_driver_for_cuda(t.cuda)
            if Version(drv[0]) < Version(floor):
                return (
                    "driver-too-old",
                    f"NVIDIA driver {drv[0]} is too old for torch's CUDA {t.cuda}: {why}",
                    f"upgrade the driver to >= {floor}, or use a torch build for an older CUDA",
                )
    if kind == "rocm" and build == "rocm" and not facts.rocm.driver_present:
        return (
            "no-driver",
            "no AMD GPU driver (/dev/kfd absent): torch sees no GPU",
            "install the amdgpu kernel driver; in a container pass --device=/dev/kfd --device=/dev/dri",
        )
    if kind in ("cuda", "rocm", "xpu"):
        hidden = _hidden(kind, facts)
        if hidden is not None:
            var, val = hidden
            seen = facts.nvidia.gpu_names()
            return (
                "devices-hidden",
                f'{var}="{val}" hides every GPU from this process'
                + (f" (nvidia-smi sees {len(seen)}: {seen[0]})" if seen else ""),
                f"unset {var} or set it to the GPUs this run may use, e.g. {var}=0",
            )
    if kind in ("cuda", "rocm") and build not in (None, "cpu") and build != kind:
        return (
            "wrong-build",
            f"torch is a {describe_build(build, t.cuda, t.hip)} build, the platform needs {kind}",
            "install the locked torch build",
        )
    if kind == "mps":
        why = (
            "MPS is not built into this torch"
            if not t.mps_built
            else "MPS is built but not available (macOS < 12.3 or no Metal device)"
        )
        return ("no-mps", why, "use an arm64 macOS >= 12.3 and the default-index torch")
    extra = f": {t.warnings[0]}" if t.warnings else (f": {t.devices_error}" if t.devices_error else "")
    return (
        "no-device",
        f"torch sees no usable {kind} device{extra}",
        "check the driver and the device permissions",
    )


def _arch_ok(dev: TorchDevice, kind: str, arch_list: list[str]) -> tuple[bool, str]:
    """Whether the build has code for the device: an exact or same-major lower sm_ cubin, or PTX to JIT."""
    if kind == "rocm" or (dev.gcn_arch and not dev.capability_str):
        base = (dev.gcn_arch or "").split(":")[0]
        return base in arch_list, base
    if not dev.capability:
        return True, "unknown"
    major, minor = dev.capability
    sm = f"sm_{major}{minor}"
    for a in arch_list:
        if not a.startswith(("sm_", "compute_")):
            continue
        digits = a.split("_", 1)[1].rstrip("af")
        if not digits.isdigit() or len(digits) < 2:
            continue
        am, an = int(digits[:-1]), int(digits[-1])
        if a.startswith("sm_") and am == major and an <= minor:
            return True, sm
        if a.startswith("compute_") and (am, an) <= (major, minor):
            return True, sm
    return False, sm


def check(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    kind = needed_kind(manifest, facts, ctx)
    if kind is None and not torch_relevant(manifest, facts, ctx):
        return []
    t = facts.torch
    if not t.imported:
        return _not_imported_steps(t.status, t.error)
    build = facts.torch_build_kind()
    devices = [d for d in t.devices if d.error is None]
    usable = False
    if kind is None:
        steps = [_cpu_step(t, devices)]
    else:
        usable = _usable(kind, t, build)
        steps = [_accelerator_step(kind, usable, manifest, facts, ctx, devices)]
    if usable and kind in ("cuda", "rocm", "any") and t.cuda_available:
        steps += _gpu_expectations(manifest, devices, ctx)
        arch_steps = [_arch_step(d, build, t) for d in devices]
        if any(s.status is Status.FAILED for s in arch_steps):
            usable = False
        steps += arch_steps
    steps.append(_compute(kind, usable, facts, ctx, steps))
    return steps


def _not_imported_steps(status: str, error: str | None) -> list[Step]:
    """`accelerator` and `compute` skipped: torch did not import (or its probe did not run)."""
    why = f"torch did not import: {error}" if status != "not-run" else "the torch probe did not run"
    cause = "torch-import-failed" if status != "not-run" else "not-run"
    return [
        Step.skipped(LAYER, "accelerator", why, details={"cause": cause}),
        Step.skipped(LAYER, "compute", why, details={"cause": cause}),
    ]


def _cpu_step(t: TorchFacts, devices: list[TorchDevice]) -> Step:
    """`accelerator` when the run needs none: what there is, passed."""
    label = (
        f"{len(devices)} × {devices[0].name}"
        if devices and t.cuda_available
        else ("mps" if t.mps_available else "cpu (no accelerator required)")
    )
    return Step.passed(LAYER, "accelerator", expected="cpu", observed=label)


def _usable(kind: str, t: TorchFacts, build: str | None) -> bool:
    """Whether torch can use a device of the needed kind."""
    if kind == "mps":
        return t.mps_available
    if kind == "xpu":
        return t.xpu_available and t.xpu_device_count > 0
    if kind == "any":
        return (t.cuda_available and t.device_count > 0) or t.mps_available or t.xpu_available
    return t.cuda_available and t.device_count > 0 and build == kind


def _accelerator_step(
    kind: str, usable: bool, manifest: Manifest, facts: Facts, ctx: Context, devices: list[TorchDevice]
) -> Step:
    """`accelerator` when the run needs one: the usable devices, or the broken link."""
    t = facts.torch
    build = facts.torch_build_kind()
    if not usable:
        cause, msg, hint = diagnose(kind, manifest, facts, ctx)
        return Step.failed(
            LAYER,
            "accelerator",
            msg,
            expected=kind,
            observed="no usable device",
            hint=hint,
            details={"cause": cause},
        )
    if kind in ("cuda", "rocm") or (kind == "any" and t.cuda_available):
        names = sorted({d.name or "?" for d in devices})
        label = f"{len(devices)} × {', '.join(names)}" + (
            " (ROCm; torch device type 'cuda')" if build == "rocm" else ""
        )
    else:
        label = kind if kind != "any" else ("mps" if t.mps_available else "xpu")
    return Step.passed(
        LAYER,
        "accelerator",
        expected=kind,
        observed=label,
        details={
            "devices": [d.model_dump() for d in devices],
            "torch.version.cuda": t.cuda,
            "torch.version.hip": t.hip,
        },
    )


def _arch_step(d: TorchDevice, build: str | None, t: TorchFacts) -> Step:
    """`arch:N`: whether the torch build carries code for device N."""
    ok, code = _arch_ok(d, build or "cuda", t.arch_list)
    name = f"arch:{d.index}"
    if ok:
        return Step.passed(
            LAYER, name, expected=code, observed=" ".join(t.arch_list), details={"device": d.name}
        )
    return Step.failed(
        LAYER,
        name,
        f"{d.name} ({code}, capability {d.capability_str or d.gcn_arch}) is not in this torch build's arch list: {' '.join(t.arch_list)}",
        expected=code,
        observed=t.arch_list,
        hint="install a torch build compiled for this GPU (a newer CUDA backend), or build torch with TORCH_CUDA_ARCH_LIST",
        details={"cause": "arch-missing", "device": d.name, "capability": d.capability_str},
    )


#: The `[system.gpu]` key each expectation step checks.
_GPU_KEYS = {
    "gpu-count": "count",
    "gpu-name": "name",
    "compute-capability": "compute-capability",
    "gpu-memory": "memory-gib",
}


def _gpu_expectations(manifest: Manifest, devices: list[TorchDevice], ctx: Context) -> list[Step]:
    """The `[system.gpu]` expectations, each pointing at its key in the manifest."""
    steps = _gpu_steps(manifest, devices)
    for step in steps:
        step.where = ctx.lines.where("system", "gpu", _GPU_KEYS[step.name])
    return steps


def _gpu_steps(manifest: Manifest, devices: list[TorchDevice]) -> list[Step]:
    g = manifest.system.gpu
    if g is None:
        return []
    steps = []
    if g.count:
        ok = SpecifierSet(g.count).contains(str(len(devices)), prereleases=True)
        steps.append(
            Step.passed(LAYER, "gpu-count", expected=g.count, observed=len(devices))
            if ok
            else Step.failed(
                LAYER,
                "gpu-count",
                f"{len(devices)} GPUs visible, expected {g.count}",
                expected=g.count,
                observed=len(devices),
                details={"cause": "gpu-count"},
            )
        )
    if g.name:
        names = [d.name or "" for d in devices]
        bad = [n for n in names if g.name.lower() not in n.lower()]
        msg = f"{bad[0]} is not a {g.name}" if bad else ""
        steps.append(_expectation("gpu-name", g.name, names, msg, "gpu-name"))
    if g.compute_capability:
        caps = [d.capability_str for d in devices if d.capability_str]
        bad = [c for c in caps if not SpecifierSet(g.compute_capability).contains(c, prereleases=True)]
        msg = f"capability {bad[0]} does not satisfy {g.compute_capability}" if bad else ""
        steps.append(_expectation("compute-capability", g.compute_capability, caps, msg, "capability"))
    if g.memory_gib:
        mems = [round((d.total_memory or 0) / 2**30, 1) for d in devices]
        bad_m = [m for m in mems if not SpecifierSet(g.memory_gib).contains(str(m), prereleases=True)]
        msg = f"{bad_m[0]} GiB does not satisfy {g.memory_gib}" if bad_m else ""
        steps.append(_expectation("gpu-memory", g.memory_gib, mems, msg, "memory"))
    return steps


def _expectation(name: str, expected: str, observed: list[Any], error: str, cause: str) -> Step:
    """A `[system] gpu` expectation: passed, or failed with `error` (empty when it holds)."""
    if not error:
        return Step.passed(LAYER, name, expected=expected, observed=observed)
    return Step.failed(LAYER, name, error, expected=expected, observed=observed, details={"cause": cause})


def compute_measurements(c: TorchCompute) -> dict[str, float]:
    """What the control computation measured (its milliseconds, its errors against float64):
    shown beside the verdict, never compared as facts."""
    values = {
        "ms": round(c.seconds * 1000, 3) if c.seconds is not None else None,
        "rel_err": c.rel_err,
        "max_abs_err": c.max_abs_err,
    }
    return {k: v for k, v in values.items() if v is not None}


def _compute(kind: str | None, usable: bool, facts: Facts, ctx: Context, steps: list[Step]) -> Step:
    if not ctx.compute:
        return Step.skipped(LAYER, "compute", "--no-compute", details={"cause": "no-compute"})
    if kind is not None and not usable:
        first = next((s for s in steps if s.status.value == "failed"), None)
        cause = first.details.get("cause") if first is not None else "no-device"
        return Step.skipped(
            LAYER,
            "compute",
            f"no usable {kind} device ({cause}); never computed on the CPU instead",
            details={"cause": cause},
        )
    c = facts.torch.compute
    measured = compute_measurements(c)
    expected = f"rel. error <= {c.tolerance:g} vs float64 CPU" if c.tolerance is not None else None
    details = {"device": c.device, "n": c.n, "dtype": c.dtype} | (
        {"reused": "the verdict of an earlier run: same verified torch files and devices"} if c.reused else {}
    )
    if c.status == "ok":
        if kind is not None and (c.device or "cpu") == "cpu":
            return Step.failed(
                LAYER,
                "compute",
                "the control computation ran on the CPU, not the accelerator",
                expected=kind,
                observed="cpu",
                details={**details, "cause": "cpu-fallback"},
                measurements=measured,
            )
        within = f"within {c.tolerance:g}" if c.tolerance is not None else "finite"
        return Step.passed(
            LAYER,
            "compute",
            expected=expected,
            observed=f"{c.n}×{c.n} {c.dtype} matmul on {c.device}: rel. error {within}",
            details=details,
            measurements=measured,
        )
    if c.status == "mismatch":
        return Step.failed(
            LAYER,
            "compute",
            f"the matrix product on {c.device} is off: rel. error {c.rel_err} > {c.tolerance}"
            + ("" if c.finite else " (non-finite values)"),
            expected=expected,
            observed=c.rel_err,
            hint="a faulty device or a broken math library; try another GPU",
            details={**details, "cause": "wrong-result"},
            measurements=measured,
        )
    if c.status == "failed":
        return Step.failed(
            LAYER,
            "compute",
            c.error or "the control computation failed",
            expected=expected,
            observed=c.device,
            hint="the first error names the failing operator",
            details={**details, "cause": "compute-failed"},
        )
    return Step.skipped(LAYER, "compute", c.error or "not run", details={"cause": "not-run"})
