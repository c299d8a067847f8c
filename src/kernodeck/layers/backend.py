"""Layer `backend`: torch imports; its build kind (cuda and hip recorded apart: a ROCm build also
says device type "cuda", it is labelled ROCm) against the platform backend and `[system] cuda/rocm`."""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernodeck.layers.context import Context
from kernodeck.lockfile.read import lockfile_path, read_lockfile
from kernodeck.manifest.schema import Manifest
from kernodeck.probe.facts import Facts
from kernodeck.report import Step

LAYER = "backend"


def torch_relevant(manifest: Manifest, facts: Facts, ctx: Context) -> bool:
    """Whether this manifest is about torch at all."""
    return facts.torch_files.installed or torch_declared(manifest, ctx)


def torch_declared(manifest: Manifest, ctx: Context) -> bool:
    """Whether the manifest, its platform or its lock names torch or an accelerator."""
    s = manifest.system
    if ctx.backend is not None or s.cuda or s.rocm or s.require_accelerator or s.gpu is not None:
        return True
    for req in manifest.packages.requirements:
        if canonicalize_name(Requirement(req).name) == "torch":
            return True
    return locks_torch(ctx)


def locks_torch(ctx: Context) -> bool:
    """Whether the platform's lock file pins torch (False when it cannot be read)."""
    if ctx.platform is None:
        return False
    try:
        return any(
            p.key == "torch"
            for p in read_lockfile(lockfile_path(ctx.manifest_file.parent, ctx.platform.name)).pins
        )
    except Exception:
        return False


def describe_build(kind: str | None, cuda: str | None, hip: str | None) -> str:
    if kind == "rocm":
        return f"ROCm (HIP {hip}; torch names the device 'cuda')"
    if kind == "cuda":
        return f"CUDA {cuda}"
    return kind or "unknown"


def expected_kind(manifest: Manifest, ctx: Context) -> str | None:
    if ctx.backend is not None:
        return ctx.backend.kind
    if manifest.system.rocm:
        return "rocm"
    if manifest.system.cuda:
        return "cuda"
    return None


def _mm(v: str | None) -> str | None:
    if not v:
        return None
    return ".".join(v.split("-")[0].split("+")[0].split(".")[:2])


def check(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    if not torch_relevant(manifest, facts, ctx):
        return []
    steps = [_import_step(facts, ctx)]
    kind = facts.torch_build_kind()
    if kind is None:
        steps.append(_unknown_build_step(facts))
        return steps
    steps.append(_build_kind_step(kind, manifest, facts, ctx))
    steps += _version_steps(kind, manifest, facts, ctx)
    return steps


def _import_step(facts: Facts, ctx: Context) -> Step:
    """`torch-import`: whether torch imports, and when not, the cause and its hint."""
    t = facts.torch
    if t.status == "ok":
        return Step.passed(
            LAYER,
            "torch-import",
            observed=f"torch {t.version}",
            details={"git_version": t.git_version}
            # in-process (on the torch this interpreter imports) or isolated (its own process)
            | ({"mode": t.mode} if t.mode else {}),
            measurements={"import_seconds": t.import_seconds} if t.import_seconds is not None else {},
        )
    if t.status == "not-run":
        return Step.skipped(
            LAYER, "torch-import", "the torch probe did not run", details={"cause": "not-run"}
        )
    cause = {
        "not-installed": "torch-missing",
        "timeout": "torch-import-hung",
        "crashed": "torch-import-crashed",
    }.get(t.status, "torch-import-failed")
    return Step.failed(
        LAYER,
        "torch-import",
        t.error or t.status,
        observed=t.status,
        hint=_import_hint(cause, ctx),
        details={"cause": cause, "stderr_tail": t.stderr_tail},
    )


def _import_hint(cause: str, ctx: Context) -> str:
    if cause == "torch-missing":
        if locks_torch(ctx):
            return "install the locked torch build"
        return (
            "the lock has no torch to install: add torch to [packages] requirements (the "
            "platform's backend picks its build) and run `kernodeck lock`"
        )
    if cause == "torch-import-hung":
        return "import torch did not finish; check for a stuck driver or a network file system"
    return "the first error names the broken piece; a missing shared library usually means a partly installed or mixed torch build"


def _unknown_build_step(facts: Facts) -> Step:
    """`build-kind` skipped: no torch distribution tells the build."""
    status = facts.torch.status
    if status in ("crashed", "timeout", "import-failed"):
        # a `torch` module exists (its import went wrong) but no torch distribution names it
        why = f"the torch build cannot be told: import torch {status} and no torch distribution is installed"
        return Step.skipped(LAYER, "build-kind", why, details={"cause": "torch-build-unknown"})
    return Step.skipped(LAYER, "build-kind", "torch is not installed", details={"cause": "torch-missing"})


def _build_kind_step(kind: str, manifest: Manifest, facts: Facts, ctx: Context) -> Step:
    """`build-kind`: the torch build (cuda, rocm, cpu, ...) against the one the platform needs."""
    cuda, hip = facts.torch_cuda(), facts.torch_hip()
    source = "import" if facts.torch.imported else "torch/version.py"
    want = expected_kind(manifest, ctx)
    observed = describe_build(kind, cuda, hip)
    details = {"torch.version.cuda": cuda, "torch.version.hip": hip, "source": source, "kind": kind}
    if want is None or want == kind:
        return Step.passed(LAYER, "build-kind", expected=want, observed=observed, details=details)
    cause = "cpu-only-build" if kind == "cpu" else "wrong-build"
    b = ctx.backend
    return Step.failed(
        LAYER,
        "build-kind",
        f"torch {facts.torch.version or facts.torch_files.version} is a {observed} build, the platform needs {want}"
        + (f" ({b.name})" if b is not None else ""),
        expected=want,
        observed=observed,
        hint=f"install the locked torch build from the {b.name} index"
        if b is not None
        else "install the torch build for this backend",
        details={**details, "cause": cause},
    )


def _wanted_version(manifest_value: str | None, kind: str, ctx: Context) -> str | None:
    """The `[system]` version, else the platform backend's version when it is of this kind."""
    return manifest_value or (
        ctx.backend.version if ctx.backend is not None and ctx.backend.kind == kind else None
    )


def _version_steps(kind: str, manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    """`cuda-version` / `rocm-version`: the build's toolkit version against the one wanted."""
    want_cuda = _wanted_version(manifest.system.cuda, "cuda", ctx)
    if want_cuda and kind == "cuda":
        return [_cuda_version_step(want_cuda, facts.torch_cuda())]
    want_rocm = _wanted_version(manifest.system.rocm, "rocm", ctx)
    if want_rocm and kind == "rocm":
        return [_rocm_version_step(want_rocm, facts.torch_hip())]
    return []


def _cuda_version_step(want_cuda: str, cuda: str | None) -> Step:
    if _mm(cuda) == _mm(want_cuda):
        return Step.passed(LAYER, "cuda-version", expected=want_cuda, observed=cuda)
    return Step.failed(
        LAYER,
        "cuda-version",
        f"torch.version.cuda is {cuda}, expected {want_cuda}",
        expected=want_cuda,
        observed=cuda,
        hint="install the torch build for this CUDA version",
        details={"cause": "wrong-cuda"},
    )


def _rocm_version_step(want_rocm: str, hip: str | None) -> Step:
    if _mm(hip) == _mm(want_rocm):
        return Step.passed(
            LAYER,
            "rocm-version",
            expected=want_rocm,
            observed=hip,
            details={"torch.version.hip": hip},
        )
    return Step.failed(
        LAYER,
        "rocm-version",
        f"torch.version.hip is {hip}, expected ROCm {want_rocm}",
        expected=want_rocm,
        observed=hip,
        hint="install the torch build for this ROCm version",
        details={"cause": "wrong-rocm"},
    )
