"""`kernodeck doctor`: the same probes with no manifest, as a plain description of the environment.

What `python -m torch.utils.collect_env` tells, structured, and without needing a working torch:
the build facts come from torch/version.py when the import fails.
"""

from __future__ import annotations

from pathlib import Path

from kernodeck.interpreters import Interpreter
from kernodeck.layers.backend import describe_build
from kernodeck.layers.context import Context, short
from kernodeck.layers.device import compute_measurements, diagnose
from kernodeck.layers.run import inventory
from kernodeck.manifest.schema import Manifest
from kernodeck.probe.facts import Facts, TorchCompute
from kernodeck.probe.runner import Probe, ProbeRequest
from kernodeck.report import CheckedInterpreter, Report, Step


def run_doctor(probe: Probe, *, compute: bool = True, checked: Interpreter | None = None) -> Report:
    """The doctor report; `checked` (the interpreter choice behind `probe.python`) heads it."""
    facts = probe.collect(ProbeRequest(records=False, torch=False))
    if facts.torch_files.installed:
        facts.torch = probe.collect_torch(
            ProbeRequest(records=False, torch=True, compute=compute, device="auto")
        )
    report = Report(kind="doctor", settings={"compute": compute})
    if checked is not None:
        report.interpreter = CheckedInterpreter(**checked.as_dict())
    report.inventory = inventory(facts)
    report.add(*describe(facts, probe.python))
    return report


def _info(layer: str, name: str, observed: object, **kw: object) -> Step:
    return Step.passed(layer, name, observed=observed, required=False, **kw)


def describe(facts: Facts, python: str) -> list[Step]:
    steps = _interpreter_steps(facts) + _system_steps(facts)
    if not facts.torch_files.installed:
        steps.append(_info("backend", "torch", "not installed"))
        return steps
    kind = facts.torch_build_kind()
    steps.append(_torch_step(facts, kind))
    if not facts.torch.imported:
        return steps
    steps += _device_steps(facts, kind, python)
    compute = _compute_step(facts.torch.compute)
    if compute is not None:
        steps.append(compute)
    return steps


def _interpreter_steps(facts: Facts) -> list[Step]:
    """The interpreter, its ABI, the installed distributions and the OS."""
    it, pf = facts.interpreter, facts.platform
    return [
        _info(
            "interpreter",
            "python",
            f"{it.implementation} {it.version}" + (" (venv)" if it.in_venv else ""),
            details={"executable": it.executable},
        ),
        _info("interpreter", "abi", f"{it.soabi or it.cache_tag}, {it.pointer_bits}-bit"),
        _info(
            "packages",
            "distributions",
            f"{len(facts.dists())} installed",
            details={"names": sorted(d.name for d in facts.dists().values())},
        ),
        _info(
            "system",
            "os",
            f"{pf.os} {pf.machine}"
            + (f" ({pf.os_release['PRETTY_NAME']})" if "PRETTY_NAME" in pf.os_release else ""),
        ),
    ]


def _libc(facts: Facts) -> str | None:
    pf = facts.platform
    if pf.glibc:
        return f"glibc {pf.glibc}"
    if pf.musl:
        return f"musl {pf.musl}"
    return f"macOS {pf.macos}" if pf.macos else None


def _system_steps(facts: Facts) -> list[Step]:
    """libc, shadowed distributions, GPU drivers and devices, and the variables that hide devices."""
    steps: list[Step] = []
    libc = _libc(facts)
    if libc:
        steps.append(_info("system", "libc", libc))
    shadowed = facts.duplicated()
    if shadowed:
        steps.append(
            Step.warning(
                "packages", "duplicates", f"more than one copy on sys.path: {short(shadowed)}", required=False
            )
        )
    drv = facts.nvidia.driver()
    gpus = facts.nvidia.gpu_names()
    if drv:
        steps.append(_info("system", "nvidia-driver", drv[0], details={"source": drv[1], "gpus": gpus}))
    if gpus:
        steps.append(_info("system", "nvidia-gpus", f"{len(gpus)} × {', '.join(sorted(set(gpus)))}"))
    if facts.rocm.driver_present or facts.rocm.info_version:
        steps.append(
            _info(
                "system",
                "rocm",
                f"ROCm {facts.rocm.info_version or '?'}" + (", /dev/kfd" if facts.rocm.kfd else ""),
            )
        )
    hidden = {k: v for k, v in facts.env.items() if v is not None and k.endswith("VISIBLE_DEVICES")}
    for k, v in sorted(hidden.items()):
        steps.append(_info("system", k, repr(v)))
    return steps


def _torch_step(facts: Facts, kind: str | None) -> Step:
    """torch and its build; a warning when it does not import (the build then from torch/version.py)."""
    t = facts.torch
    build = describe_build(kind, facts.torch_cuda(), facts.torch_hip())
    if t.imported:
        return _info(
            "backend",
            "torch",
            f"torch {t.version}: {build}",
            details={"cudnn": t.cudnn},
            measurements={"import_seconds": t.import_seconds} if t.import_seconds is not None else {},
        )
    return Step.warning(
        "backend",
        "torch",
        t.error or t.status,
        observed=f"torch {facts.torch_files.version} ({build}, from torch/version.py)",
        required=False,
        details={"cause": t.status},
    )


def _device_steps(facts: Facts, kind: str | None, python: str) -> list[Step]:
    """The devices torch sees with the build's arch list, or why a GPU build sees none."""
    t = facts.torch
    if t.cuda_available and t.devices:
        steps = []
        for d in t.devices:
            mem = f", {round((d.total_memory or 0) / 2**30, 1)} GiB" if d.total_memory else ""
            cap = f", capability {d.capability_str}" if d.capability_str else ""
            arch = f", {d.gcn_arch}" if d.gcn_arch else ""
            steps.append(_info("device", f"device:{d.index}", f"{d.name}{cap}{arch}{mem}"))
        steps.append(_info("device", "arch-list", " ".join(t.arch_list)))
        return steps
    if kind in ("cuda", "rocm"):
        ctx = Context(root=facts_root(), manifest_file=facts_root() / "repro.toml", python=python)
        cause, msg, hint = diagnose(kind, _empty_manifest(), facts, ctx)
        return [
            Step.warning("device", "accelerator", msg, hint=hint, required=False, details={"cause": cause})
        ]
    label = "mps" if t.mps_available else ("xpu" if t.xpu_available else "cpu only")
    return [_info("device", "accelerator", label)]


def _compute_step(c: TorchCompute) -> Step | None:
    """The control computation's result; None when it did not run."""
    if c.status == "ok":
        return _info(
            "device",
            "compute",
            f"{c.n}×{c.n} {c.dtype} matmul on {c.device}: rel. error within {c.tolerance:g}",
            measurements=compute_measurements(c),
        )
    if c.status in ("failed", "mismatch"):
        return Step.warning(
            "device",
            "compute",
            c.error or f"rel. error {c.rel_err}",
            observed=c.device,
            required=False,
            details={"cause": c.status},
        )
    return None


def facts_root() -> Path:
    return Path(".")


def _empty_manifest() -> Manifest:
    return Manifest.model_validate(
        {
            "schema-version": 1,
            "reference": {"name": "doctor", "id": "doctor"},
            "python": {"version": "3.11"},
            "platform": [{"name": "live", "os": "linux", "arch": "x86_64"}],
        }
    )
