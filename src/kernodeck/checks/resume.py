"""Check that a training run can be continued, not only that the packages match.

In order, each a Step of layer "resume": the checkpoint's sha256; that it holds every declared
state key (loaded by the *target* interpreter's torch with `weights_only=True`; dotted keys such
as `rng.python` walk nested dicts); the resume command, run like a check; and the logged metric
trajectory against the reference under the declared tolerance, naming the first step that
diverges. A failure skips what comes after it and says why.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernodeck.checks.runner import expand_argv, fresh_out, make_base, resolve_python, run_command, target_env
from kernodeck.fingerprint import sha256_file
from kernodeck.layers.causes import StepKind
from kernodeck.manifest.paths import OUTSIDE_HINT, escapes, outside_message
from kernodeck.manifest.schema import Manifest, Resume, Trajectory
from kernodeck.manifest.where import ManifestLines
from kernodeck.probe import launch
from kernodeck.report import Step

LAYER = "resume"
STATE_TIMEOUT = 300.0

_STATE_SCRIPT = r"""
import json, sys
path, keys = sys.argv[1], json.loads(sys.argv[2])
def emit(**kw):
    sys.stdout.write("KERNODECK-STATE " + json.dumps(kw) + "\n")
try:
    import torch
except Exception as e:
    emit(error="cannot import torch: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    sys.exit(0)
try:
    obj = torch.load(path, map_location="cpu", weights_only=True)
except Exception as e:
    text = str(e).strip().splitlines()
    emit(error="torch.load(weights_only=True) failed: %s: %s" % (type(e).__name__, text[0] if text else ""))
    sys.exit(0)
def lookup(o, key):
    if isinstance(o, dict) and key in o:
        return True
    if isinstance(o, (list, tuple)) and key.isdigit():
        return int(key) < len(o)
    parts = key.split(".")
    for i in range(1, len(parts)):
        head, rest = ".".join(parts[:i]), ".".join(parts[i:])
        if isinstance(o, dict) and head in o and lookup(o[head], rest):
            return True
        if isinstance(o, (list, tuple)) and head.isdigit() and int(head) < len(o) and lookup(o[int(head)], rest):
            return True
    return False
top = sorted(str(k) for k in obj) if isinstance(obj, dict) else []
emit(present=[k for k in keys if lookup(obj, k)], missing=[k for k in keys if not lookup(obj, k)], top=top,
     torch=str(torch.__version__))
"""


def resume_steps(
    manifest: Manifest,
    root: Path,
    python: str,
    *,
    out_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    record: bool = False,
    lines: ManifestLines | None = None,
) -> list[Step]:
    """The `[resume]` checks, in order (layer "resume"), each pointing at what it checks in
    `lines` (the manifest's): `[resume.checkpoint]`, `run`, `[resume.trajectory]`."""
    steps = _resume_steps(manifest, root, python, out_dir=out_dir, env=env, record=record)
    if lines is not None and manifest.resume is not None:
        for step in steps:
            key = next((k for k in ("checkpoint", "trajectory") if step.name.startswith(k)), "run")
            step.where = lines.where("resume", key)
    return steps


def _resume_steps(
    manifest: Manifest,
    root: Path,
    python: str,
    *,
    out_dir: Path | None,
    env: Mapping[str, str] | None,
    record: bool,
) -> list[Step]:
    r = manifest.resume
    python = resolve_python(python)
    root = root.resolve()
    if r is None:
        return [Step.skipped(LAYER, "resume", "no [resume] declared", required=False)]

    # 1. the checkpoint is the one the reference continued from
    ckpt = root / r.checkpoint.path
    first, stop = _checkpoint_step(r, root, ckpt)
    if stop is not None:
        return [first, *_skip_rest(r, stop)]
    steps = [first]

    # 2. the checkpoint holds the whole computation state
    if r.required_state:
        state = _state_step(r, ckpt, root, python, env)
        steps.append(state)
        if state.status.value == "failed":
            return [*steps, *_skip_rest(r, "the checkpoint lacks required state", state_done=True)]

    # 3. continue the run for a few steps
    run, out = _run_step(manifest, r, root, python, out_dir=out_dir, env=env)
    steps.append(run)
    if run.status.value == "failed":
        if r.trajectory is not None:
            steps.append(_skipped_trajectory(r.trajectory, "skipped: the resume run failed"))
        return steps

    # 4. the continuation follows the reference trajectory
    if r.trajectory is not None and not record:
        steps.append(trajectory_step(r.trajectory, out, root))
    return steps


def _checkpoint_step(r: Resume, root: Path, ckpt: Path) -> tuple[Step, str | None]:
    """The checkpoint's sha256 step, and why the rest is skipped (None: the checks go on)."""
    name = f"checkpoint {r.checkpoint.path}"
    real = None if r.checkpoint.external else escapes(root, ckpt)
    if real is not None:
        outside = Step.failed(
            LAYER,
            f"{name}: sha256",
            outside_message(r.checkpoint.path, real),
            expected=r.checkpoint.sha256,
            hint=OUTSIDE_HINT,
            details={"cause": "outside-project"},
        )
        return outside, "the checkpoint leads outside the project"
    if not ckpt.is_file():
        missing = Step.failed(
            LAYER,
            f"{name}: sha256",
            f"{r.checkpoint.path}: file not found",
            expected=r.checkpoint.sha256,
            observed="missing",
        )
        return missing, "the checkpoint is missing"
    digest = sha256_file(ckpt)
    if r.checkpoint.sha256 is None:
        undeclared = Step.warning(
            LAYER,
            f"{name}: sha256",
            "no sha256 declared for the checkpoint",
            observed=digest,
            required=False,
            hint=f'add sha256 = "{digest}" to [resume].checkpoint',
        )
        return undeclared, None
    if digest != r.checkpoint.sha256:
        differs = Step.failed(
            LAYER,
            f"{name}: sha256",
            f"{r.checkpoint.path}: sha256: expected {r.checkpoint.sha256}, observed {digest}",
            expected=r.checkpoint.sha256,
            observed=digest,
        )
        return differs, "the checkpoint is not the declared one"
    return Step.passed(LAYER, f"{name}: sha256", expected=r.checkpoint.sha256, observed=digest), None


def _run_step(
    manifest: Manifest,
    r: Resume,
    root: Path,
    python: str,
    *,
    out_dir: Path | None,
    env: Mapping[str, str] | None,
) -> tuple[Step, Path]:
    """The resume command run like a check (passed or failed), and its output folder."""
    base = make_base(out_dir)
    out = fresh_out(base, "resume" if all(c.name != "resume" for c in manifest.check) else "resume-run")
    full_env, added = target_env(python, base=env, determinism=manifest.determinism, out=out)
    argv = expand_argv(r.run, python, out)
    result = run_command(argv, cwd=root, env=full_env, timeout=r.timeout, out=out, env_set=added)
    details: dict[str, Any] = {"out": str(out), "stderr-log": str(result.stderr_log), "env": added}
    det = out / ".kernodeck" / "determinism.json"
    if det.is_file():
        details["determinism"] = json.loads(det.read_text(encoding="utf-8"))
    if not result.ok:
        failed = Step.failed(
            LAYER,
            "resume run",
            f"resume: {result.describe_failure()}",
            expected="exit code 0",
            observed=result.describe_failure(),
            hint=f"full log: {result.stderr_log}",
            details=details,
            seconds=round(result.seconds, 3),
        )
        return failed, out
    passed = Step.passed(
        LAYER,
        "resume run",
        expected="exit code 0",
        observed="exit code 0",
        details=details,
        seconds=round(result.seconds, 3),
    )
    return passed, out


def resume_out(steps: list[Step]) -> Path | None:
    """The output folder of the resume run, from its step."""
    for s in steps:
        if s.name == "resume run" and "out" in s.details:
            return Path(s.details["out"])
    return None


def _skipped_trajectory(t: Trajectory, why: str) -> Step:
    return Step.skipped(LAYER, f"trajectory {t.metric}", why).tagged(StepKind.TRAJECTORY, metric=t.metric)


def trajectory_step(t: Trajectory, out: Path, root: Path) -> Step:
    """The trajectory's step, its metric declared (the HTML chart's axis)."""
    return _trajectory_step(t, out, root).tagged(StepKind.TRAJECTORY, metric=t.metric)


def _trajectory_step(t: Trajectory, out: Path, root: Path) -> Step:
    name = f"trajectory {t.metric}"
    log_path, ref_path = out / t.log, root / t.reference
    got = _read_log(log_path, t.metric)
    if isinstance(got, str):
        return Step.failed(LAYER, name, f"{t.log}: {got}", expected=f"{t.metric} per step", observed=got)
    ref = _read_log(ref_path, t.metric)
    if isinstance(ref, str):
        return Step.failed(
            LAYER,
            name,
            f"reference {t.reference}: {ref}",
            expected=f"{t.metric} per step",
            observed=ref,
            hint="run `kernodeck check --record` in the reference environment",
        )
    if t.atol is None and t.rtol is None:
        return Step.failed(
            LAYER,
            name,
            f"{t.log}: trajectory: no tolerance declared",
            expected="a declared tolerance",
            observed="none",
            hint="add `rtol` and/or `atol` to [resume].trajectory",
        )
    atol, rtol = t.atol or 0.0, t.rtol or 0.0
    expected = f"{len(ref)} steps of {t.metric}, |log - ref| <= {atol:g} + {rtol:g}·|ref|"
    chart = trajectory_series(got, ref, atol, rtol)
    max_abs = max_rel = 0.0
    for i, ((gstep, g), (rstep, rv)) in enumerate(zip(got, ref, strict=False)):
        if gstep != rstep:
            return Step.failed(
                LAYER,
                name,
                f"{t.log}: entry {i} is step {gstep}, the reference's is step {rstep}",
                expected=expected,
                observed=f"step {gstep} at entry {i}",
            )
        err = abs(g - rv) if math.isfinite(g) else math.inf
        rel = err / abs(rv) if rv else (0.0 if err == 0 else math.inf)
        max_abs, max_rel = max(max_abs, err), max(max_rel, rel)
        if not err <= atol + rtol * abs(rv):
            observed = f"first divergence at step {gstep}: {t.metric} {g!r} vs reference {rv!r} (abs {err:.3g}, rel {rel:.3g})"
            return Step.failed(
                LAYER,
                name,
                f"{t.log}: {t.metric}: {observed}",
                expected=expected,
                observed=observed,
                details={"step": gstep, "value": g, "reference": rv, **chart},
            )
    if len(got) != len(ref):
        observed = f"{len(got)} steps logged, the reference has {len(ref)}"
        return Step.failed(
            LAYER, name, f"{t.log}: {observed}", expected=expected, observed=observed, details=chart
        )
    observed = f"{len(got)} steps, max abs error {max_abs:.3g}, max rel error {max_rel:.3g}"
    return Step.passed(
        LAYER,
        name,
        expected=expected,
        observed=observed,
        details={"max-abs-error": max_abs, "max-rel-error": max_rel, **chart},
    )


#: At most this many points of a trajectory are kept in the report (evenly spaced, the first
#: point outside the tolerance always among them).
SERIES_POINTS = 400


def trajectory_series(
    got: list[tuple[Any, float]], ref: list[tuple[Any, float]], atol: float, rtol: float
) -> dict[str, Any]:
    """The compact series the HTML report draws: per logged step the value and the reference's,
    the tolerance, and the first step outside it (None when none is)."""
    n = min(len(got), len(ref))
    first: Any = None
    first_i: int | None = None
    for i in range(n):
        g, rv = got[i][1], ref[i][1]
        err = abs(g - rv) if math.isfinite(g) else math.inf
        if not err <= atol + rtol * abs(rv):
            first, first_i = got[i][0], i
            break
    keep = list(range(n))
    if n > SERIES_POINTS:
        stride = math.ceil(n / SERIES_POINTS)
        keep = sorted({*range(0, n, stride), n - 1, *([first_i] if first_i is not None else [])})

    def num(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return {
        "series": {
            "step": [got[i][0] for i in keep],
            "value": [num(got[i][1]) for i in keep],
            "reference": [num(ref[i][1]) for i in keep],
        },
        "atol": atol,
        "rtol": rtol,
        "first-outside": first,
    }


def _read_log(path: Path, metric: str) -> list[tuple[Any, float]] | str:
    """[(step, value)] from a JSON Lines log; the step is the record's `step`, else its position."""
    if not path.is_file():
        return "file not found"
    out: list[tuple[Any, float]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            return f"line {n} is not JSON: {e.msg}"
        if not isinstance(rec, dict) or metric not in rec:
            return f"line {n} has no {metric!r}"
        v = rec[metric]
        if not isinstance(v, int | float) or isinstance(v, bool):
            return f"line {n}: {metric} is {v!r}, not a number"
        out.append((rec.get("step", len(out)), float(v)))
    if not out:
        return "no entries"
    return out


def _state_step(r: Resume, ckpt: Path, root: Path, python: str, env: Mapping[str, str] | None) -> Step:
    name = f"checkpoint {r.checkpoint.path}: state"
    expected = list(r.required_state)
    try:
        # its own process group, killed whole at the end: torch may leave helpers holding the pipes
        started = launch.spawn(
            [python, "-c", _STATE_SCRIPT, str(ckpt), json.dumps(expected)],
            dict(os.environ) if env is None else dict(env),
            cwd=root,
        )
    except OSError as e:
        return Step.failed(LAYER, name, f"cannot run {python}: {e.strerror or e}", expected=expected)
    done = launch.finish(started, None, STATE_TIMEOUT)
    if done.timed_out:
        return Step.failed(
            LAYER, name, f"reading the checkpoint timed out after {STATE_TIMEOUT:g} s", expected=expected
        )
    stdout = done.out.decode("utf-8", "replace")
    stderr = done.err.decode("utf-8", "replace")
    line = next((ln for ln in stdout.splitlines() if ln.startswith("KERNODECK-STATE ")), None)
    if line is None:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return Step.failed(LAYER, name, f"reading the checkpoint failed: {tail}", expected=expected)
    data = json.loads(line[len("KERNODECK-STATE ") :])
    if "error" in data:
        return Step.failed(
            LAYER, name, f"{r.checkpoint.path}: {data['error']}", expected=expected, observed=data["error"]
        )
    missing = data["missing"]
    if missing:
        observed = f"missing {', '.join(missing)} (top-level keys: {', '.join(data['top'])})"
        return Step.failed(
            LAYER,
            name,
            f"{r.checkpoint.path}: state: {observed}",
            expected=expected,
            observed=observed,
            hint="save the full computation state in the checkpoint, RNG states included",
        )
    return Step.passed(
        LAYER,
        name,
        expected=expected,
        observed=f"all {len(expected)} keys present",
        details={"torch": data.get("torch")},
    )


def _skip_rest(r: Resume, why: str, *, state_done: bool = False) -> list[Step]:
    out = []
    if r.required_state and not state_done:
        out.append(Step.skipped(LAYER, f"checkpoint {r.checkpoint.path}: state", f"skipped: {why}"))
    out.append(Step.skipped(LAYER, "resume run", f"skipped: {why}"))
    if r.trajectory is not None:
        out.append(_skipped_trajectory(r.trajectory, f"skipped: {why}"))
    return out
