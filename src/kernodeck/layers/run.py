"""Run the verify layers in order: code → data → interpreter → packages → contract → system →
backend → device → application → resume.

A failed step makes the steps that need it skipped, with the reason: nothing that needs facts runs
when the probe failed, the device layer needs torch to import, and the application checks and the
resume check run only when every earlier layer passed. When most of the lock is missing (the
packages layer's `wrong-environment` step), the report says once at the top that this is probably
not the project's environment, and the layers after packages are not run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kernodeck.determinism import declared_settings
from kernodeck.errors import KernodeckError, UsageError
from kernodeck.fingerprint import FingerprintCache
from kernodeck.interpreters import Interpreter
from kernodeck.layers import (
    FACT_LAYERS,
    NEEDS,
    Layer,
    backend,
    code,
    contract,
    data,
    determinism,
    device,
    interpreter,
    packages,
    parse_layers,
    selected,
    system,
)
from kernodeck.layers.context import Context
from kernodeck.manifest.schema import Manifest, Platform
from kernodeck.platforms import PlatformChoice, choose, probe_facts
from kernodeck.probe.facts import Facts
from kernodeck.probe.runner import Probe, ProbeRequest
from kernodeck.report import CheckedInterpreter, Report, Status, Step

#: The cause of the layers not run after the packages layer found most of the lock missing.
SKIPPED_WRONG_ENVIRONMENT = "not-the-project-environment"

FactLayer = Callable[[Manifest, Facts, Context], list[Step]]

#: The checks of each layer that works on the probe's facts, in order.
_FACT_LAYERS: dict[Layer, tuple[FactLayer, ...]] = {
    Layer.INTERPRETER: (interpreter.check,),
    Layer.PACKAGES: (packages.check,),
    Layer.CONTRACT: (contract.check,),
    Layer.SYSTEM: (system.check, lambda m, f, c: determinism.env_steps(m, f, c.lines)),
    Layer.BACKEND: (backend.check, lambda m, f, c: determinism.torch_steps(m, c)),
    Layer.DEVICE: (device.check,),
}


def choose_platform(manifest: Manifest, facts: Facts | None, name: str | None) -> PlatformChoice:
    """The platform named by --platform, or the one the live facts match (`platforms.choose`, a
    manifest's only platform taken as is), with the reason; UsageError otherwise."""
    live = probe_facts(facts) if facts is not None else None
    return choose(manifest.platform, live, name, lone=True)


def select_platform(manifest: Manifest, facts: Facts | None, name: str | None) -> Platform:
    """`choose_platform` without its reason."""
    return choose_platform(manifest, facts, name).platform


def _probe_request(manifest: Manifest, layers: list[Layer], compute: bool, device_kind: str) -> ProbeRequest:
    locate = tuple(f"{w.package}:{w.path}" for w in manifest.weights if w.package and w.path)
    env = tuple(sorted((manifest.determinism.env if manifest.determinism else {}).keys()))
    access = tuple(
        sorted({a for d in manifest.data for a in d.access} | {a for w in manifest.weights for a in w.access})
    )
    return ProbeRequest(
        records="packages" in layers,
        locate=locate,
        env=env,
        env_present=access,
        torch=bool({"backend", "device"} & set(layers)),
        compute=compute and "device" in layers,
        device=device_kind,
    )


def select_checks(manifest: Manifest, checks: bool | tuple[str, ...]) -> tuple[Manifest, list[str]]:
    """(the manifest with only the application and resume checks asked for, a notice naming the
    declared checks left out). `checks`: True for all, False for none, else their names
    ("resume" for the `[resume]` check); UsageError naming an unknown one."""
    declared = [c.name for c in manifest.check] + (["resume"] if manifest.resume else [])
    if checks is True:
        return manifest, []
    names = () if checks is False else checks
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise UsageError(
            f"checks: {unknown[0]!r} is not a check of the manifest",
            hint="declared: " + (", ".join(declared) or "none"),
        )
    left = [n for n in declared if n not in names]
    if not left:
        return manifest, []
    kept = manifest.model_copy(
        update={
            "check": [c for c in manifest.check if c.name in names],
            "resume": manifest.resume if "resume" in names else None,
        }
    )
    notice = (
        f"not run: {', '.join(left)} (the application checks run only when asked: "
        "checks=True, or a list of their names)"
    )
    return kept, [notice]


def run_verify(
    manifest: Manifest,
    manifest_file: Path,
    probe: Probe,
    *,
    platform: str | None = None,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    strict: bool = False,
    compute: bool = True,
    checks: bool | tuple[str, ...] = True,
    cache: FingerprintCache | None = None,
    checked: Interpreter | None = None,
    application: bool = False,
) -> Report:
    """The verify report. `checked`: the interpreter choice behind `probe.python` (named on the report's
    first line; None for recorded facts). `checks`: which application and resume checks run
    (`select_checks`). `application`: this process is the application's (require())."""
    run_started = time.perf_counter()
    layers = selected(only, skip)
    manifest, left_out = select_checks(manifest, checks)
    ctx = Context(
        root=manifest_file.parent,
        manifest_file=manifest_file,
        python=probe.python,
        strict=strict,
        compute=compute,
        cache=cache if cache is not None else FingerprintCache(),
        application=application,
    )
    report = Report(
        kind="verify",
        manifest=manifest_file.name,
        reference_id=manifest.reference.id,
        notices=left_out,
        settings={
            "only": [layer.value for layer in parse_layers(only, option="--only")],
            "skip": [layer.value for layer in parse_layers(skip, option="--skip")],
            "strict": strict,
            "compute": compute,
            "platform": platform,
            "checks": checks if isinstance(checks, bool) else list(checks),
        },
    )
    if checked is not None:
        report.interpreter = CheckedInterpreter(**checked.as_dict())

    probe_seconds: dict[Layer, float] = {}
    facts: Facts | None = None
    probe_error: str | None = None
    if _needs_facts(manifest, layers):
        base = _probe_request(manifest, layers, compute, "auto")
        started = time.perf_counter()
        try:
            facts = probe.collect(dataclasses.replace(base, torch=False))
        except KernodeckError as e:
            if isinstance(e, UsageError):
                raise
            probe_error = e.message
        probe_seconds[Layer.INTERPRETER] = time.perf_counter() - started
    chosen = (
        choose_platform(manifest, facts, platform) if (facts is not None or platform is not None) else None
    )
    ctx.platform = chosen.platform if chosen is not None else None
    report.platform = chosen.platform.name if chosen is not None else None
    report.platform_reason = chosen.reason if chosen is not None else None

    if facts is not None:
        request = _probe_request(
            manifest, layers, compute, device.torch_device_kind(device.needed_kind(manifest, facts, ctx))
        )
        # in the wrong environment the layers that need torch are not run: no `import torch` there
        if request.torch and not (Layer.PACKAGES in layers and packages.wrong_environment(facts, ctx)):
            started = time.perf_counter()
            facts.torch = probe.collect_torch(request)
            # the compute stage's own time goes to device/compute (`stage_seconds`), the rest to backend
            compute_seconds = facts.torch.compute.seconds or 0.0
            probe_seconds[Layer.BACKEND] = max(time.perf_counter() - started - compute_seconds, 0.0)
        report.inventory = inventory(facts)
    _run_layers(report, layers, manifest, ctx, facts, probe_error, checked, probe_seconds)
    ctx.cache.save()
    report.seconds = round(time.perf_counter() - run_started, 3)
    return report


def _needs_facts(manifest: Manifest, layers: list[Layer]) -> bool:
    return bool(set(layers) & FACT_LAYERS) or any(w.package for w in manifest.weights if Layer.DATA in layers)


def stage_seconds(facts: Facts | None) -> dict[tuple[str, str], float]:
    """The torch probe's stages timed by the probe itself, by the step that reports each."""
    if facts is None:
        return {}
    t = facts.torch
    stages = {("backend", "torch-import"): t.import_seconds, ("device", "compute"): t.compute.seconds}
    return {k: round(v, 6) for k, v in stages.items() if v is not None}


def timed(steps: list[Step], seconds: float) -> list[Step]:
    """`steps`, each without a time of its own given an equal share of `seconds` (what the layer
    took, its probe stage included): a JUnit dashboard sees every step with a time."""
    untimed = [s for s in steps if s.seconds is None]
    if untimed:
        own = sum(s.seconds or 0.0 for s in steps)
        share = round(max(seconds - own, 0.0) / len(untimed), 6)
        for s in untimed:
            s.seconds = share
    return steps


def _run_layers(
    report: Report,
    layers: list[Layer],
    manifest: Manifest,
    ctx: Context,
    facts: Facts | None,
    probe_error: str | None,
    checked: Interpreter | None,
    probe_seconds: dict[Layer, float],
) -> None:
    """Every selected layer in order, each step timed (see `timed`)."""
    wrong_env: list[str] = []
    own = stage_seconds(facts)
    for layer in layers:
        started = time.perf_counter()
        steps = _layer_steps(layer, manifest, ctx, facts, probe_error, bool(wrong_env))
        for s in steps:
            if s.seconds is None and s.status is not Status.SKIPPED:
                s.seconds = own.get((layer.value, s.name))
        steps = timed(steps, time.perf_counter() - started + probe_seconds.get(layer, 0.0))
        ctx.steps.extend(steps)
        report.add(*steps)
        if layer == Layer.PACKAGES and facts is not None and not wrong_env:
            wrong_env = _wrong_environment_notice(ctx, checked)
            report.notices += wrong_env


def _layer_steps(
    layer: Layer,
    manifest: Manifest,
    ctx: Context,
    facts: Facts | None,
    probe_error: str | None,
    wrong_env: bool,
) -> list[Step]:
    """The steps of one layer."""
    if wrong_env:
        # The layers after packages describe what is installed: in the wrong environment they
        # would only repeat that it is the wrong one.
        why = "not run: the packages layer found another environment (see the note at the top)"
        return _all_skipped(layer, manifest, ctx, why, SKIPPED_WRONG_ENVIRONMENT)
    if layer == "code":
        return code.check(manifest, facts, ctx)
    if layer == "data":
        return data.check(manifest, facts, ctx)
    if layer not in _FACT_LAYERS:
        return _application(layer, manifest, ctx)
    if facts is not None:
        return [step for check in _FACT_LAYERS[layer] for step in check(manifest, facts, ctx)]
    why = f"the environment probe failed: {probe_error}" if probe_error else "no facts"
    skipped = _all_skipped(layer, manifest, ctx, why, "probe-failed")
    if layer == "interpreter":
        failed = Step.failed(
            layer,
            "probe",
            probe_error or "no facts",
            hint=f"check that {ctx.python} starts, or pass --python PATH",
            details={"cause": "probe-failed"},
        )
        return [failed, *(s for s in skipped if s.name != "probe")]
    return skipped


def planned_names(layer: Layer, manifest: Manifest, ctx: Context) -> list[str]:
    """The steps a layer reports when it runs and passes, as far as the manifest, its platform and
    its lock say before any probe: a layer skipped as a whole lists these, each skipped, so that a
    JUnit dashboard counts the same test cases whatever the outcome. Steps that need the probe's
    facts to be named (one `arch:N` per visible device) are not among them."""
    if layer in (Layer.APPLICATION, Layer.RESUME):
        return _check_names(layer, manifest)
    cuda = system.needs_cuda(manifest, ctx)
    torch = backend.torch_declared(manifest, ctx)
    gpu = manifest.system.gpu
    declared_gpu = [
        name
        for name, spec in (
            ("gpu-count", gpu.count if gpu else None),
            ("compute-capability", gpu.compute_capability if gpu else None),
            ("gpu-memory", gpu.memory_gib if gpu else None),
        )
        if spec
    ]
    pk = manifest.packages
    declares = bool(pk.requirements or pk.from_)
    det = manifest.determinism
    env_steps = [f"determinism:env:{name}" for name in sorted(det.env)] if det is not None else []
    torch_steps = [f"determinism:{key}" for key in declared_settings(det)]
    planned: dict[Layer, list[str]] = {
        Layer.INTERPRETER: ["probe", "implementation", "version", "platform-tags"],
        Layer.PACKAGES: ["lockfile", *(["requirements"] if declares else []), "pins", "records"],
        Layer.CONTRACT: ["requirements"],
        Layer.SYSTEM: ["os", "arch", "libc"]
        + (["nvidia-driver", "driver-for-cuda"] if cuda else [])
        + env_steps,
        Layer.BACKEND: (
            (["torch-import", "build-kind"] + (["cuda-version"] if cuda else []) if torch else [])
            + torch_steps
        ),
        Layer.DEVICE: ["accelerator", *declared_gpu, "compute"] if torch else [],
    }
    return planned.get(layer, [])


def _all_skipped(layer: Layer, manifest: Manifest, ctx: Context, why: str, cause: str) -> list[Step]:
    """Every planned step of a layer that is not run, skipped with the reason (one step named
    after the layer when none is planned: the skip is still said)."""
    names = planned_names(layer, manifest, ctx)
    if not names and layer not in _FACT_LAYERS:
        return []
    return [Step.skipped(layer, n, why, details={"cause": cause}) for n in names or [layer.value]]


def _wrong_environment_notice(ctx: Context, checked: Interpreter | None) -> list[str]:
    """Said once at the top when the packages layer found most of the lock missing."""
    if not any(s.details.get("cause") == packages.WRONG_ENVIRONMENT for s in ctx.steps):
        return []
    where = f"{checked.path}, {checked.reason}" if checked is not None else ctx.python
    return [
        f"this is probably not the project's environment ({where}); "
        "activate the project's venv or pass --python PATH"
    ]


def _check_names(layer: str, manifest: Manifest) -> list[str]:
    """The application checks (layer `application`) or the resume check (layer `resume`) declared."""
    if layer == Layer.APPLICATION:
        return [c.name for c in manifest.check]
    return ["resume"] if layer == Layer.RESUME and manifest.resume else []


def _application(layer: Layer, manifest: Manifest, ctx: Context) -> list[Step]:
    names = _check_names(layer, manifest)
    if not names:
        return []
    failed = [s for s in ctx.steps if s.status is Status.FAILED and s.required and s.layer in NEEDS[layer]]
    blocking = list(dict.fromkeys(s.layer for s in failed))
    if blocking:
        first = failed[0]
        why = f"an earlier layer failed ({', '.join(blocking)}; first: {first.layer}/{first.name})"
        return [
            Step.skipped(layer, n, why, details={"cause": "earlier-failure", "layers": blocking})
            for n in names
        ]
    from kernodeck import checks  # imported when a check runs: verify without checks stays light

    if layer == "application":
        return checks.steps(manifest, ctx.root, ctx.python, lines=ctx.lines)
    return checks.resume_steps(manifest, ctx.root, ctx.python, lines=ctx.lines)


def inventory(facts: Facts) -> dict[str, Any]:
    """The observed inventory kept in a report: no host paths, sorted, comparable between reports."""
    it, pf, t = facts.interpreter, facts.platform, facts.torch
    drv = facts.nvidia.driver()
    return {
        "interpreter": {
            "implementation": it.implementation,
            "version": it.version,
            "in_venv": it.in_venv,
            "soabi": it.soabi,
            "pointer_bits": it.pointer_bits,
        },
        "platform": {
            "os": pf.os,
            "machine": pf.machine,
            "glibc": pf.glibc,
            "musl": pf.musl,
            "macos": pf.macos,
            "distro": pf.os_release.get("PRETTY_NAME"),
        },
        "distributions": [
            {
                "name": d.name,
                "version": d.version,
                "installer": d.installer,
                "requested": d.requested,
                "editable": d.editable,
            }
            for d in sorted(facts.dists().values(), key=lambda d: d.key)
        ],
        "system": {
            "nvidia_driver": {"version": drv[0], "source": drv[1]} if drv else None,
            "gpus": facts.nvidia.gpu_names(),
            "rocm": facts.rocm.info_version,
            "amdgpu": facts.rocm.driver_present,
        },
        "torch": {
            "status": t.status,
            "mode": t.mode,
            "version": t.version or facts.torch_files.version,
            "build_kind": facts.torch_build_kind(),
            "cuda": facts.torch_cuda(),
            "hip": facts.torch_hip(),
            "cudnn": t.cudnn,
            "devices": [
                {
                    "name": d.name,
                    "capability": d.capability_str,
                    "gcn_arch": d.gcn_arch,
                    "memory_gib": round((d.total_memory or 0) / 2**30, 1),
                }
                for d in t.devices
            ],
            "arch_list": t.arch_list,
            "compute": {
                "status": t.compute.status,
                "device": t.compute.device,
                "rel_err": t.compute.rel_err,
                "tolerance": t.compute.tolerance,
            },
        },
        "env": {
            k: v
            for k, v in sorted(facts.env.items())
            if v is not None
            and k.endswith(("VISIBLE_DEVICES", "DEVICE_ORDER", "AFFINITY_MASK", "DEVICE_SELECTOR"))
        },
    }
