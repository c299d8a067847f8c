"""Application checks: run the user's small sample, read its outputs back, judge them.

`steps()` runs the `[[check]]`s (layer "application"), `resume_steps()` the `[resume]` checks
(layer "resume"); `kernodeck verify` ends with both, `kernodeck check` runs them alone.
`kernodeck check --repeat N` measures how much the outputs vary instead (`variance.py`, its
conditions in `conditions.py`, what the evidence says and proposes in `propose.py`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernodeck.checks.criteria import LAYER, evaluate
from kernodeck.checks.resume import resume_steps
from kernodeck.checks.runner import RunResult, expand_argv, fresh_out, make_base, run_command, target_env
from kernodeck.errors import UsageError
from kernodeck.manifest.schema import Check, Manifest
from kernodeck.manifest.where import ManifestLines
from kernodeck.report import Step

__all__ = ["LAYER", "resume_steps", "run_check", "select_checks", "steps"]


def select_checks(manifest: Manifest, names: Sequence[str] | None) -> list[Check]:
    """The checks named (in manifest order), all of them for None; an unknown name is a UsageError."""
    if not names:
        return list(manifest.check)
    known = {c.name for c in manifest.check}
    unknown = [n for n in names if n not in known]
    if unknown:
        listing = ", ".join(sorted(known)) or "none declared"
        raise UsageError(
            f"no check named {', '.join(map(repr, unknown))}", hint=f"checks in the manifest: {listing}"
        )
    wanted = set(names)
    return [c for c in manifest.check if c.name in wanted]


def run_check(
    check: Check,
    manifest: Manifest,
    root: Path,
    python: str,
    *,
    base: Path,
    env: Mapping[str, str] | None = None,
    layer: str = LAYER,
) -> tuple[RunResult, Step]:
    """Run one check's command into a fresh `<base>/<name>`; the Step says how the run went."""
    out = fresh_out(base, check.name)
    full_env, added = target_env(python, base=env, determinism=manifest.determinism, extra=check.env, out=out)
    argv = expand_argv(check.run, python, out)
    result = run_command(argv, cwd=root, env=full_env, timeout=check.timeout, out=out, env_set=added)
    details: dict[str, Any] = {
        "argv": list(check.run),
        "out": str(out),
        "stdout-log": str(result.stdout_log),
        "stderr-log": str(result.stderr_log),
        "env": added,
    }
    det = out / ".kernodeck" / "determinism.json"
    if det.is_file():
        with contextlib.suppress(json.JSONDecodeError):
            details["determinism"] = json.loads(det.read_text(encoding="utf-8"))
    seconds = round(result.seconds, 3)
    if result.ok:
        step = Step.passed(
            layer,
            f"{check.name}: run",
            expected="exit code 0",
            observed="exit code 0",
            details=details,
            seconds=seconds,
        )
    else:
        failure = result.describe_failure()
        step = Step.failed(
            layer,
            f"{check.name}: run",
            f"{check.name}: {failure}",
            expected=f"exit code 0 within {check.timeout:g} s",
            observed=failure,
            hint=f"full log: {result.stderr_log}",
            details=details,
            seconds=seconds,
        )
    return result, step


def steps(
    manifest: Manifest,
    root: Path,
    python: str,
    *,
    names: Sequence[str] | None = None,
    out_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    lines: ManifestLines | None = None,
) -> list[Step]:
    """Run the selected checks with the target interpreter `python` in the manifest folder `root`
    and judge every declared output; one Step per run and per criterion (layer "application"),
    each pointing at its `[[check]]` (or `[[check.output]]`) entry in `lines`, the manifest's."""
    selected = select_checks(manifest, names)
    root = root.resolve()
    if not selected:
        return [Step.skipped(LAYER, "checks", "no [[check]] declared", required=False)]
    base = make_base(out_dir)
    out: list[Step] = []
    for check in selected:
        index = next(i for i, c in enumerate(manifest.check) if c.name == check.name)
        result, run_step = run_check(check, manifest, root, python, base=base, env=env)
        out.append(_located(run_step, lines, "check", index))
        if not result.ok:
            out.extend(
                Step.skipped(LAYER, f"{check.name}/{o.path}", f"skipped: {check.name} did not run to the end")
                for o in check.output
            )
            continue
        for n, o in enumerate(check.output):
            out.extend(
                _located(s, lines, "check", index, "output", n)
                for s in evaluate(check.name, o, result.out, root)
            )
    return out


def _located(step: Step, lines: ManifestLines | None, *loc: str | int) -> Step:
    """The step, pointing at the manifest entry at `loc` when `lines` are given."""
    if lines is not None:
        step.where = lines.where(*loc)
    return step
