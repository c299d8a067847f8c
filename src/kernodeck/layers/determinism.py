"""`[determinism]` in the process verify or require() looks at.

- `env`: each declared variable against its value in the checked process (the environment probe
  runs under the target interpreter with the environment verify was started in; require()'s
  probe with the calling process's). Steps of the `system` layer: execution conditions.
- seed, deterministic algorithms, cuDNN benchmark and deterministic, float32 matmul precision:
  against this process's torch when it is the application's (require(), torch imported), steps of
  the `backend` layer. verify looks at a fresh process, where only the application could have set
  them (`kernodeck.determinism.apply()`): they are "not observed" there, skipped, not compared.

The steps' observed values are facts: `kernodeck diff` and the fleet comparison see a rank started
with PYTHONHASHSEED=7 as different from one with 0.
"""

from __future__ import annotations

from typing import Any

from kernodeck.determinism import declared_settings, torch_settings
from kernodeck.layers import Layer
from kernodeck.layers.causes import StepCause
from kernodeck.layers.context import Context
from kernodeck.manifest.schema import Manifest
from kernodeck.manifest.where import ManifestLines
from kernodeck.probe.facts import Facts
from kernodeck.report import Step

APPLY_HINT = (
    'call kernodeck.determinism.apply("repro.toml") first thing in the script, before '
    "kernodeck.require(); it sets what [determinism] declares"
)


def env_steps(manifest: Manifest, facts: Facts, lines: ManifestLines | None = None) -> list[Step]:
    """One step per `[determinism] env` variable, against the checked process's environment,
    each pointing at the variable's line in `lines` (the manifest's)."""
    declared = manifest.determinism.env if manifest.determinism else {}
    steps = [_env_step(name, want, facts.env.get(name)) for name, want in sorted(declared.items())]
    if lines is not None:
        for step, name in zip(steps, sorted(declared), strict=True):
            step.where = lines.where("determinism", "env", name)
    return steps


def _env_step(name: str, want: str, have: str | None) -> Step:
    step = f"determinism:env:{name}"
    if have == want:
        return Step.passed(Layer.SYSTEM, step, expected=f"{name}={want}", observed=f"{name}={have}")
    said = f"{name} is not set" if have is None else f"{name}={have}"
    return Step.failed(
        Layer.SYSTEM,
        step,
        f"{said} in the checked process; [determinism] env declares {name}={want}",
        expected=f"{name}={want}",
        observed=None if have is None else f"{name}={have}",
        hint=f"start the run with {name}={want} in its environment (a variable set inside the script is too late for some, e.g. PYTHONHASHSEED)",
        details={"cause": StepCause.DETERMINISM_ENV},
    )


def torch_steps(manifest: Manifest, ctx: Context) -> list[Step]:
    """One step per torch-level setting declared, against this process's torch when it is the
    application's; skipped (not observed) otherwise."""
    declared = declared_settings(manifest.determinism)
    if not declared:
        return []
    observed = torch_settings() if ctx.application else None
    if observed is None:
        why = (
            "not observed: torch is not imported in this process yet"
            if ctx.application
            else "not observed: verify looks at a fresh process; the application sets these (kernodeck.determinism.apply)"
        )
        cause = StepCause.NOT_RUN if ctx.application else StepCause.NOT_THE_APPLICATION_PROCESS
        return [
            Step.skipped(Layer.BACKEND, f"determinism:{key}", why, expected=value, details={"cause": cause})
            for key, value in declared.items()
        ]
    steps = [_torch_step(key, value, observed.get(key)) for key, value in declared.items()]
    for step, key in zip(steps, declared, strict=True):
        step.where = ctx.lines.where("determinism", key)
    return steps


def _torch_step(key: str, want: Any, have: Any) -> Step:
    step = f"determinism:{key}"
    if have == want:
        return Step.passed(Layer.BACKEND, step, expected=want, observed=have)
    return Step.failed(
        Layer.BACKEND,
        step,
        f"{key} is {have} in this process; [determinism] declares {want}",
        expected=want,
        observed=have,
        hint=APPLY_HINT,
        details={"cause": StepCause.DETERMINISM_TORCH},
    )
