"""Layer `system`: OS, architecture, libc; the NVIDIA driver (and which source said so) against
`[system] nvidia-driver` and against the minimum driver of the installed torch's CUDA; ROCm."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from kernodeck.backends import min_driver_for_cuda
from kernodeck.layers.context import Context
from kernodeck.manifest.schema import Manifest, Platform
from kernodeck.platforms import norm_arch
from kernodeck.probe.facts import Facts
from kernodeck.report import Status, Step, Where

LAYER = "system"

DEFAULT_GLIBC = "2.28"
DEFAULT_MACOS = "14.0"


def _v(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def libc_problem(p: Platform, facts: Facts) -> str | None:
    """Why the live libc / macOS cannot run the platform's wheels; None when it can."""
    pf = facts.platform
    if p.os == "linux":
        if p.musl:
            have = _v(pf.musl)
            if have is None:
                return f"the platform targets musl {p.musl}, the machine has " + (
                    f"glibc {pf.glibc}" if pf.glibc else "no musl"
                )
            if have < Version(p.musl):
                return f"musl {pf.musl} is older than the platform's musl {p.musl}"
            return None
        want = p.glibc or DEFAULT_GLIBC
        have = _v(pf.glibc)
        if have is None:
            return f"the platform targets glibc {want}, the machine has " + (
                f"musl {pf.musl}" if pf.musl else "no glibc"
            )
        if have < Version(want):
            return f"glibc {pf.glibc} is older than the platform's glibc {want} (manylinux_{want.replace('.', '_')} wheels)"
    if p.os == "macos":
        want = p.macos or DEFAULT_MACOS
        have = _v(pf.macos)
        if have is not None and have < Version(want):
            return f"macOS {pf.macos} is older than the platform's macOS {want}"
    return None


def needs_cuda(manifest: Manifest, ctx: Context) -> bool:
    b = ctx.backend
    return (
        (b is not None and b.kind == "cuda")
        or manifest.system.nvidia_driver is not None
        or manifest.system.cuda is not None
    )


def needs_rocm(manifest: Manifest, ctx: Context) -> bool:
    b = ctx.backend
    return (b is not None and b.kind == "rocm") or manifest.system.rocm is not None


def check(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    steps: list[Step] = []
    pf = facts.platform
    p = ctx.platform
    distro = pf.os_release.get("PRETTY_NAME")
    os_obs = pf.os + (f" ({distro})" if distro else "") + (f", kernel {pf.release}" if pf.release else "")
    if p is None:
        steps.append(Step.passed(LAYER, "os", observed=os_obs))
        steps.append(Step.passed(LAYER, "arch", observed=pf.machine))
    else:
        if pf.os == p.os:
            steps.append(Step.passed(LAYER, "os", expected=p.os, observed=os_obs))
        else:
            steps.append(
                Step.failed(
                    LAYER,
                    "os",
                    f"the machine runs {pf.os}, the platform is {p.os}",
                    expected=p.os,
                    observed=os_obs,
                    details={"cause": "wrong-os"},
                )
            )
        if norm_arch(pf.machine) == norm_arch(p.arch):
            steps.append(Step.passed(LAYER, "arch", expected=p.arch, observed=pf.machine))
        else:
            steps.append(
                Step.failed(
                    LAYER,
                    "arch",
                    f"the machine is {pf.machine}, the platform is {p.arch}",
                    expected=p.arch,
                    observed=pf.machine,
                    details={"cause": "wrong-arch"},
                )
            )
        libc_obs = (
            f"glibc {pf.glibc}"
            if pf.glibc
            else (f"musl {pf.musl}" if pf.musl else (f"macOS {pf.macos}" if pf.macos else None))
        )
        libc_exp = (
            f"musl >= {p.musl}"
            if p.musl
            else (
                f"glibc >= {p.glibc or DEFAULT_GLIBC}"
                if p.os == "linux"
                else (f"macOS >= {p.macos or DEFAULT_MACOS}" if p.os == "macos" else None)
            )
        )
        if libc_exp is not None and pf.os == p.os:
            problem = libc_problem(p, facts)
            if problem:
                steps.append(
                    Step.failed(
                        LAYER,
                        "libc",
                        problem,
                        expected=libc_exp,
                        observed=libc_obs,
                        details={"cause": "old-libc"},
                    )
                )
            else:
                steps.append(Step.passed(LAYER, "libc", expected=libc_exp, observed=libc_obs))
    steps += _nvidia(manifest, facts, ctx)
    steps += _rocm(manifest, facts, ctx)
    for step in steps:
        if step.status in (Status.FAILED, Status.WARNING):
            step.where = _where(step.name, manifest, ctx)
    return steps


#: The `[system]` key each driver step checks.
_SYSTEM_KEYS = {"nvidia-driver": "nvidia-driver", "driver-for-cuda": "cuda", "amdgpu-driver": "rocm"}


def _where(name: str, manifest: Manifest, ctx: Context) -> Where | None:
    """The key of the chosen `[[platform]]` entry a step checks (os, arch, and for libc the one of
    glibc, musl, macos it declares, else the entry), or its `[system]` key; a driver the
    platform's backend asks for, where `[system]` does not name it: the entry."""
    p = ctx.platform
    index = next((i for i, q in enumerate(manifest.platform) if p is not None and q.name == p.name), None)
    if p is None or index is None:
        return ctx.lines.where("system", _SYSTEM_KEYS[name]) if name in _SYSTEM_KEYS else None
    if name == "libc":
        name = "musl" if p.musl else "glibc" if p.glibc else "macos" if p.macos else name
    if name not in _SYSTEM_KEYS:
        return ctx.lines.where("platform", index, name)
    return ctx.lines.where("system", _SYSTEM_KEYS[name]) or ctx.lines.where("platform", index)


def _nvidia(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    cuda = facts.torch_cuda()
    relevant = needs_cuda(manifest, ctx) or cuda is not None
    if not relevant:
        return []
    required = needs_cuda(manifest, ctx) or manifest.system.require_accelerator
    drv = facts.nvidia.driver()
    steps: list[Step] = []
    if drv is None:
        msg = "no NVIDIA driver: /proc/driver/nvidia/version and /sys/module/nvidia/version are absent" + (
            ", nvidia-smi failed" if facts.nvidia.smi is not None else ", nvidia-smi is not on PATH"
        )
        hint = "install the NVIDIA driver on the host (a container also needs the NVIDIA container toolkit and --gpus)"
        if required:
            steps.append(
                Step.failed(
                    LAYER,
                    "nvidia-driver",
                    msg,
                    expected=manifest.system.nvidia_driver or "an NVIDIA driver",
                    hint=hint,
                    details={"cause": "no-driver"},
                )
            )
            steps.append(
                Step.skipped(LAYER, "driver-for-cuda", "no NVIDIA driver", details={"cause": "no-driver"})
            )
        else:
            steps.append(
                Step.warning(
                    LAYER,
                    "nvidia-driver",
                    msg + f" (torch is a CUDA {cuda} build)",
                    hint=hint,
                    required=False,
                    details={"cause": "no-driver"},
                )
            )
        return steps
    version, source = drv
    have = _v(version)
    spec = manifest.system.nvidia_driver
    details = {"source": source, "gpus": facts.nvidia.gpu_names()}
    if spec:
        if have is not None and SpecifierSet(spec).contains(have, prereleases=True):
            steps.append(
                Step.passed(LAYER, "nvidia-driver", expected=spec, observed=version, details=details)
            )
        else:
            steps.append(
                Step.failed(
                    LAYER,
                    "nvidia-driver",
                    f"NVIDIA driver {version} (from {source}) does not satisfy {spec}",
                    expected=spec,
                    observed=version,
                    hint=f"install a driver {spec}",
                    details={**details, "cause": "driver-spec"},
                )
            )
    else:
        steps.append(Step.passed(LAYER, "nvidia-driver", observed=version, details=details))
    want_cuda = (
        cuda
        or (ctx.backend.version if ctx.backend is not None and ctx.backend.kind == "cuda" else None)
        or manifest.system.cuda
    )
    if want_cuda:
        floor, why = min_driver_for_cuda(want_cuda)
        label = f"driver >= {floor} for CUDA {want_cuda}"
        if have is not None and have >= Version(floor):
            steps.append(
                Step.passed(LAYER, "driver-for-cuda", expected=label, observed=version, details={"why": why})
            )
        else:
            steps.append(
                Step.failed(
                    LAYER,
                    "driver-for-cuda",
                    f"NVIDIA driver {version} is too old for the CUDA {want_cuda} build of torch: {why}",
                    expected=label,
                    observed=version,
                    hint=f"upgrade the driver to >= {floor}, or lock a torch build for an older CUDA (a platform with backend cu118 needs >= 450.80.02)",
                    details={"cause": "driver-too-old", "why": why, "source": source},
                )
            )
    return steps


def _rocm(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    hip = facts.torch_hip()
    if not (needs_rocm(manifest, ctx) or hip is not None):
        return []
    r = facts.rocm
    required = needs_rocm(manifest, ctx) or manifest.system.require_accelerator
    observed = ", ".join(
        x
        for x in (
            "/dev/kfd" if r.kfd else None,
            "amdgpu module" + (f" {r.amdgpu_version}" if r.amdgpu_version else "")
            if r.amdgpu_module
            else None,
            f"ROCm {r.info_version} in /opt/rocm" if r.info_version else None,
        )
        if x
    )
    if r.driver_present:
        return [
            Step.passed(
                LAYER,
                "amdgpu-driver",
                expected="amdgpu kernel driver (/dev/kfd)",
                observed=observed,
                details={"rocm": r.info_version},
            )
        ]
    msg = "no AMD GPU driver: /dev/kfd and /sys/module/amdgpu are absent"
    hint = "install the amdgpu kernel driver (a container also needs --device=/dev/kfd --device=/dev/dri)"
    if required:
        return [
            Step.failed(
                LAYER,
                "amdgpu-driver",
                msg,
                expected="amdgpu kernel driver (/dev/kfd)",
                hint=hint,
                details={"cause": "no-driver"},
            )
        ]
    return [
        Step.warning(
            LAYER,
            "amdgpu-driver",
            msg + f" (torch is a ROCm {hip} build)",
            hint=hint,
            required=False,
            details={"cause": "no-driver"},
        )
    ]
