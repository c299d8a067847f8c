"""Layer `interpreter`: implementation and version against `[python]`, and whether the live
interpreter's platform (os, arch, bits, libc) can run the wheels locked for the platform."""

from __future__ import annotations

from kernodeck.layers.context import Context
from kernodeck.layers.system import libc_problem
from kernodeck.manifest.schema import Manifest
from kernodeck.platforms import norm_arch, os_of_sys_platform
from kernodeck.probe.facts import Facts
from kernodeck.report import Step
from kernodeck.targets import Target

LAYER = "interpreter"

_COMPARED_MARKERS = ("sys_platform", "platform_machine", "implementation_name", "os_name")


def expected_python(manifest: Manifest, ctx: Context) -> str:
    return (
        ctx.platform.python if ctx.platform is not None and ctx.platform.python else None
    ) or manifest.python.version


def _target_markers(manifest: Manifest, ctx: Context) -> dict[str, str] | None:
    """Marker environment of the selected platform, as kernodeck.targets computes it for the lock
    (None for a platform the lock could not target either: that is reported by `lock`)."""
    if ctx.platform is None:
        return None
    try:
        target = Target.from_platform(ctx.platform, manifest.python)
    except ValueError:  # packaging.version.InvalidVersion included
        return None
    return {str(k): str(v) for k, v in target.markers.items()}


def check(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    it = facts.interpreter
    steps = [
        Step.passed(
            LAYER,
            "probe",
            observed=f"{it.implementation} {it.version}" + (" (venv)" if it.in_venv else ""),
            details={"executable": it.executable},
        )
    ]
    impl = manifest.python.implementation
    if it.implementation == impl:
        steps.append(Step.passed(LAYER, "implementation", expected=impl, observed=it.implementation))
    else:
        steps.append(
            Step.failed(
                LAYER,
                "implementation",
                f"the interpreter is {it.implementation}, the manifest asks for {impl}",
                expected=impl,
                observed=it.implementation,
                hint="pass --python with the right interpreter",
                details={"cause": "wrong-implementation"},
            )
        )
    want = expected_python(manifest, ctx)
    have = it.version
    ok = have == want if want.count(".") == 2 else ".".join(have.split(".")[:2]) == want
    if ok:
        steps.append(Step.passed(LAYER, "version", expected=want, observed=have))
    else:
        steps.append(
            Step.failed(
                LAYER,
                "version",
                f"Python {have} where the manifest asks for {want}" + ("" if want.count(".") == 2 else ".x"),
                expected=want,
                observed=have,
                hint=f"recreate the environment with Python {want}: python{'.'.join(want.split('.')[:2])} -m venv .venv-rebuild",
                details={"cause": "wrong-python"},
            )
        )
    if ctx.platform is None:
        steps.append(
            Step.skipped(LAYER, "platform-tags", "no platform selected", details={"cause": "no-platform"})
        )
        return steps
    p = ctx.platform
    problems: list[str] = []
    live_os = os_of_sys_platform(facts.markers.get("sys_platform", ""))
    if live_os != p.os:
        problems.append(f"sys_platform {facts.markers.get('sys_platform')!r} is not {p.os}")
    live_arch = norm_arch(facts.markers.get("platform_machine", ""))
    if live_arch != norm_arch(p.arch):
        problems.append(f"platform_machine {facts.markers.get('platform_machine')!r} is not {p.arch}")
    if it.pointer_bits != 64 and p.arch in ("x86_64", "aarch64", "arm64", "ppc64le", "s390x"):
        problems.append(f"a {it.pointer_bits}-bit interpreter cannot load {p.arch} wheels")
    libc = libc_problem(p, facts)
    if libc:
        problems.append(libc)
    target = _target_markers(manifest, ctx)
    if target is not None:
        for key in _COMPARED_MARKERS:
            if key in target and key in facts.markers and target[key] != facts.markers[key]:
                msg = f"marker {key} is {facts.markers[key]!r}, the platform has {target[key]!r}"
                if msg not in problems:
                    problems.append(msg)
    observed = f"{it.sysconfig_platform or facts.platform.os + '-' + facts.platform.machine}" + (
        f", glibc {facts.platform.glibc}" if facts.platform.glibc else ""
    )
    if problems:
        steps.append(
            Step.failed(
                LAYER,
                "platform-tags",
                "; ".join(problems),
                expected=p.name,
                observed=observed,
                hint="run on a machine that matches the platform, or pass --platform with the one this machine is",
                details={"cause": "incompatible-platform"},
            )
        )
    else:
        steps.append(Step.passed(LAYER, "platform-tags", expected=p.name, observed=observed))
    return steps
