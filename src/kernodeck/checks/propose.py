"""What the evidence of a variance run says: the effects, the margins, and a proposed criterion.

A proposal is the largest deviation observed between runs times a stated safety factor, rounded
up to one significant digit, for the comparisons the output already declares (`atol` where it
declares none). It is never applied: `kernodeck check --repeat N --propose` writes it into
repro.toml as a comment block beside the criterion (tomlkit: layout and other comments kept),
replacing the block an earlier proposal wrote, with the date, the conditions and the counts.
Zero spread proposes nothing: bit-identical runs say nothing about the size of rebuild noise.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tomlkit.items import Comment, Null, Table

from kernodeck.checks import criteria
from kernodeck.checks.variance import (
    DATA,
    Evidence,
    OutputVariance,
    Progress,
    Request,
    Spread,
    measure,
    run_all,
    variance_folder,
)
from kernodeck.errors import UsageError
from kernodeck.manifest.edit import load_document, save_document
from kernodeck.manifest.schema import Manifest
from kernodeck.support.fsio import atomic_write_text

DEFAULT_SAFETY = 10.0
COSINE_RESOLUTION = 1e-12
"""Below this, 1 - cosine is float64 rounding of the dot product, not a difference between runs."""
MARK = "# variance"
_CRITERIA_KEYS = (
    "atol",
    "rtol",
    "cosine-min",
    "exact",
    "equals",
    "ids-from",
    "ids-key",
    "min",
    "max",
    "metric",
    "reference",
)


def round_up(x: float) -> float:
    """`x` rounded up to one significant digit (3.2e-7 -> 4e-7)."""
    if x <= 0 or not math.isfinite(x):
        return x
    e = math.floor(math.log10(x))
    m = x / 10.0**e
    digit = math.ceil(m - 1e-9)
    if digit >= 10:
        digit, e = 1, e + 1
    return float(f"{digit}e{e}")


def fmt_cosine(x: float) -> str:
    return f"{x:.15g}" if math.isfinite(x) else str(x)


def fmt(x: float | None) -> str:
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return str(x)
    return "0" if x == 0 else f"{x:.2g}"


@dataclass
class Proposal:
    values: dict[str, float] = field(default_factory=dict)
    basis: str = ""
    note: str | None = None


def propose(ov: OutputVariance, safety: float = DEFAULT_SAFETY) -> Proposal:
    noise = ov.noise()
    if noise.unreadable:
        return Proposal(note=f"{noise.unreadable} comparison(s) without a readable output on one side")
    if noise.runs == 0:
        return Proposal(note="one run only: repeat it (--repeat 2 or more) to measure a spread")
    if ov.kind == "exact":
        if noise.moved:
            return Proposal(
                note=f"differs in {noise.runs - noise.identical} of {noise.runs} comparisons: equality is the criterion here, not a tolerance"
            )
        return Proposal(note=f"equal in all {noise.runs} comparisons: exact equality holds")
    if not noise.moved:
        return Proposal(
            note=f"bit-identical in all {noise.runs} comparisons: zero spread supports no tolerance "
            "(exact equality holds under these conditions only)"
        )
    return _numeric(ov, noise, safety)


def _numeric(ov: OutputVariance, noise: Spread, safety: float) -> Proposal:
    o = ov.output
    wanted = [
        k for k, v in (("atol", o.atol), ("rtol", o.rtol), ("cosine-min", o.cosine_min)) if v is not None
    ]
    if ov.kind != "array" and "cosine-min" in wanted:
        wanted.remove("cosine-min")
    p = Proposal(basis=f"largest deviation between runs ({largest_from(ov)}) x {safety:g}, rounded up")
    for key in wanted or ["atol"]:
        _one(p, key, noise, safety)
    return p


def largest_from(ov: OutputVariance) -> str:
    """Which comparison saw the largest absolute deviation: a condition, or a condition's repeats."""
    named = [
        (s.max_abs or 0.0, f"repeats of {label.split(' (', 1)[0]}")
        for s, label in zip(ov.repeats, ov.conditions, strict=True)
    ]
    named += [
        (s.max_abs or 0.0, label) for s, label in zip(ov.across, ov.conditions, strict=True) if s is not None
    ]
    return max(named, key=lambda pair: pair[0])[1]


def _one(p: Proposal, key: str, noise: Spread, safety: float) -> None:
    if key == "atol" and noise.max_abs is not None:
        p.values["atol"] = round_up(safety * noise.max_abs)
    elif key == "rtol" and noise.max_rel is not None:
        if math.isfinite(noise.max_rel):
            p.values["rtol"] = round_up(safety * noise.max_rel)
        else:
            _note(p, "a value moved where the baseline has 0: no finite rtol; use atol")
    elif key == "cosine-min" and noise.min_cosine is not None:
        gap = 1.0 - noise.min_cosine
        if gap > COSINE_RESOLUTION:
            p.values["cosine-min"] = max(-1.0, float(f"{1.0 - round_up(safety * gap):.12g}"))
        else:
            _note(
                p,
                f"every row's cosine is within {COSINE_RESOLUTION:g} of 1 (float64 rounding): "
                "cosine-min cannot tell these runs apart; keep the declared one",
            )


def _note(p: Proposal, text: str) -> None:
    p.note = text if p.note is None else f"{p.note}; {text}"


# --- sentences ------------------------------------------------------------------------------------


def repeats_text(s: Spread, kind: str) -> str:
    if s.runs == 0:
        return "one run, no repeats"
    if s.unreadable:
        return f"{s.unreadable} of {s.runs} comparisons without a readable output on one side"
    if not s.moved:
        return f"repeats {'equal' if kind == 'exact' else 'bit-identical'} ({s.runs + 1} runs)"
    if kind == "exact":
        return f"repeats differ in {s.runs - s.identical} of {s.runs + 1} runs"
    return f"repeats differ by up to {fmt(s.max_abs)} ({s.runs - s.identical} of {s.runs} runs moved)"


def effect_text(s: Spread, baseline: Spread, kind: str) -> str:
    """What one condition did to the output, against the baseline's first run."""
    if s.unreadable:
        return f"{s.unreadable} of {s.runs} comparisons without a readable output on one side"
    if not s.moved:
        return f"changes nothing ({s.runs} runs {'equal' if kind == 'exact' else 'bit-identical'} to the baseline)"
    if kind == "exact":
        return f"changes it in {s.runs - s.identical} of {s.runs} runs"
    rows = ""
    if s.rows and s.rows > 1 and s.rows_changed is not None:
        rows = f" in {s.rows_changed} of {s.rows} rows ({100 * s.rows_changed / s.rows:.0f} %)"
    text = f"changes it by up to {fmt(s.max_abs)}{rows} (max rel {fmt(s.max_rel)}"
    text += f", min cosine {fmt_cosine(s.min_cosine)})" if s.min_cosine is not None else ")"
    if baseline.moved and (baseline.max_abs or 0.0) >= (s.max_abs or 0.0):
        text += f", within the baseline's own repeat spread ({fmt(baseline.max_abs)})"
    return text


def margin_lines(ov: OutputVariance) -> list[str]:
    o = ov.output
    lines = []
    ref = ov.against_reference()
    if ref is not None and ov.kind != "exact":
        lines.append(f"vs reference {o.reference}: up to {fmt(ref.max_abs)} (max rel {fmt(ref.max_rel)})")
    elif ref is not None:
        lines.append(f"vs reference {o.reference}: equal in {ref.identical} of {ref.runs} runs")
    for crit, used in sorted(ov.used.items()):
        name = _criterion_name(o, crit)
        if math.isnan(used):
            continue
        verdict = "FAILS" if used > 1 else "passes"
        lines.append(
            f"{name}: worst run at {used * 100:.3g} % of it ({verdict}; margin {max(0.0, 1 - used) * 100:.3g} %)"
        )
    if ov.closest is not None:
        c = ov.closest
        lines.append(
            f"{o.metric}: closest run {c['value']:.6g}, {fmt(c['distance'])} from the bound {c['bound']:g}"
        )
    for crit, n in sorted(ov.failed_runs.items()):
        lines.append(f"criterion {crit!r} failed in {n} run(s)")
    return lines


def _criterion_name(o: Any, crit: str) -> str:
    if crit == "tolerance":
        parts = [
            f"atol {o.atol:g}" if o.atol is not None else "",
            f"rtol {o.rtol:g}" if o.rtol is not None else "",
        ]
        return " + ".join(p for p in parts if p)
    return f"cosine-min {o.cosine_min}"


def proposal_text(p: Proposal) -> str:
    shown = ", ".join(f"{k} = {_toml_number(v)}" for k, v in p.values.items())
    if shown:
        return f"proposed ({p.basis}): {shown}" + (f"; {p.note}" if p.note else "")
    return f"nothing proposed: {p.note}"


def uncovered(ov: OutputVariance, p: Proposal) -> str | None:
    """A warning when the reference differs from the runs by more than the proposal allows."""
    ref = ov.against_reference()
    atol = p.values.get("atol")
    if ref is None or atol is None or ref.max_abs is None or ref.max_abs <= atol:
        return None
    return (
        f"the reference differs from these runs by up to {fmt(ref.max_abs)}, more than the proposed atol: "
        "it was made elsewhere or something changed; the proposal does not cover that"
    )


def _toml_number(v: float) -> str:
    return f"{v:.15g}"


def output_lines(ov: OutputVariance, safety: float) -> list[str]:
    head = f"{ov.label} ({ov.kind})"
    lines = [head]
    base = ov.repeats[0]
    for i, label in enumerate(ov.conditions):
        across = ov.across[i]
        what = repeats_text(ov.repeats[i], ov.kind)
        if across is not None:
            what = f"{effect_text(across, base, ov.kind)}; {what}"
        lines.append(f"  {label}: {what}")
    lines.extend(f"  {line}" for line in margin_lines(ov))
    p = propose(ov, safety)
    lines.append(f"  {proposal_text(p)}")
    warn = uncovered(ov, p)
    if warn:
        lines.append(f"  ! {warn}")
    return lines


def report_text(evidence: Evidence, safety: float, folder_shown: str) -> str:
    r = evidence.request
    n_cond = len(r.conditions)
    lines = [
        f"variance: {len(r.checks)} check(s) x {n_cond} condition(s) x {r.repeats} repeat(s) = "
        f"{len(evidence.runs)} runs; outputs in {folder_shown}"
    ]
    for run in evidence.failed_runs:
        lines.append(
            f"  ! {run.check} {r.conditions[run.condition].label} run {run.repeat + 1}: {run.failure}"
        )
    for ov in evidence.outputs:
        lines.extend(output_lines(ov, safety))
    lines.extend(conditions_summary(evidence))
    lines.append(criteria_summary(evidence))
    return "\n".join(lines) + "\n"


def conditions_summary(evidence: Evidence) -> list[str]:
    """Which condition moved which outputs (against the baseline), and which moved nothing."""
    labels = [c.label for c in evidence.request.conditions]
    lines, still = [], []
    for i, label in enumerate(labels):
        moved = []
        for ov in evidence.outputs:
            s = ov.repeats[0] if i == 0 else ov.across[i]
            if s is not None and s.moved:
                moved.append(ov.label + (f" (up to {fmt(s.max_abs)})" if s.max_abs is not None else ""))
        name = "repeats of the baseline" if i == 0 else label
        if moved:
            lines.append(f"{name} moved: {', '.join(moved)}")
        else:
            still.append(name)
    if still:
        lines.append(f"moved nothing: {', '.join(still)}")
    return lines


def criteria_summary(evidence: Evidence) -> str:
    """The current criteria over every run that ran to the end, as `kernodeck check` judges them."""
    ran = [r for r in evidence.runs if r.ok]
    counts: dict[str, int] = {}
    for r in ran:
        for name in r.failed:
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return f"current criteria: passed in all {len(ran)} run(s) that ran to the end"
    shown = "; ".join(f"{name} in {n} of {len(ran)} runs" for name, n in sorted(counts.items()))
    return f"current criteria FAILED: {shown}"


# --- variance.json --------------------------------------------------------------------------------


def evidence_json(evidence: Evidence, *, seconds: float, safety: float = DEFAULT_SAFETY) -> dict[str, Any]:
    r = evidence.request
    return {
        "kind": "variance",
        "id": r.digest(),
        "repeats": r.repeats,
        "jobs": r.jobs,
        "seconds": round(seconds, 1),
        "safety": safety,
        "axes": [{"name": a.name, "values": list(a.values), "kind": a.kind} for a in r.axes],
        "conditions": [c.describe() if c.axis is None else c.label for c in r.conditions],
        "runs": [_run_json(run, evidence.folder) for run in evidence.runs],
        "outputs": [_output_json(ov, safety) for ov in evidence.outputs],
    }


def _run_json(run: Any, folder: Path) -> dict[str, Any]:
    d: dict[str, Any] = {
        "check": run.check,
        "condition": run.condition,
        "repeat": run.repeat,
        "out": run.out.relative_to(folder).as_posix(),
        "ok": run.ok,
        "seconds": round(run.seconds, 3),
    }
    if run.failure:
        d["failure"] = run.failure
    if run.failed:
        d["failed"] = run.failed
    return d


def _output_json(ov: OutputVariance, safety: float) -> dict[str, Any]:
    o = ov.output
    p = propose(ov, safety)
    base = ov.repeats[0]
    conds = []
    for i, label in enumerate(ov.conditions):
        across = ov.across[i]
        entry: dict[str, Any] = {"condition": label, "repeats": ov.repeats[i].as_dict()}
        entry["effect"] = repeats_text(ov.repeats[i], ov.kind)
        if across is not None:
            entry["vs-baseline"] = across.as_dict()
            entry["effect"] = f"{effect_text(across, base, ov.kind)}; {entry['effect']}"
        conds.append(entry)
    ref = ov.against_reference()
    return {
        "check": ov.check,
        "output": criteria.output_label(o),
        "kind": ov.kind,
        "criteria": {k: v for k, v in _declared(o).items() if v is not None},
        "conditions": conds,
        "reference": ref.as_dict() if ref is not None else None,
        "used": {k: (v if math.isfinite(v) else str(v)) for k, v in sorted(ov.used.items())},
        "closest": ov.closest,
        "failed-runs": dict(sorted(ov.failed_runs.items())),
        "margins": margin_lines(ov),
        "proposal": {"values": p.values, "basis": p.basis, "note": p.note, "text": proposal_text(p)},
        "uncovered": uncovered(ov, p),
        "chart": _chart(ov),
    }


def _declared(o: Any) -> dict[str, Any]:
    return {
        "reference": o.reference,
        "atol": o.atol,
        "rtol": o.rtol,
        "cosine-min": o.cosine_min,
        "exact": o.exact or None,
        "metric": o.metric,
        "min": o.min,
        "max": o.max,
    }


def _chart(ov: OutputVariance) -> dict[str, Any] | None:
    """Per condition, the largest |run - anchor| of each row: against the reference when there is
    one (what the tolerance judges), else against the baseline's first run."""
    if ov.kind != "array":
        return None
    against = "reference" if ov.reference is not None else "baseline run 1"
    groups = ov.reference if ov.reference is not None else [ov.repeats[0], *ov.across[1:]]
    series = []
    for label, s in zip(ov.conditions, groups, strict=True):
        if s is None or s.per_row is None:
            continue
        rows, values = criteria.compact_rows(s.per_row, "max")
        shown = [v if math.isfinite(v) else sys.float_info.max for v in values]
        series.append({"condition": label, "row": rows, "abs": shown})
    return {"against": against, "series": series} if series else None


# --- the comment block in repro.toml -------------------------------------------------------------


def comment_lines(ov: OutputVariance, p: Proposal, evidence: Evidence, today: str) -> list[str]:
    r = evidence.request
    conds = "; ".join(c.describe() if c.axis is None else c.label for c in r.conditions)
    noise = ov.noise()
    lines = [
        f"{MARK} {today}: {len(r.conditions) * r.repeats} runs of {ov.check} "
        f"({r.repeats} repeat(s) x {len(r.conditions)} condition(s): {conds})"
    ]
    if ov.kind != "exact":
        lines.append(
            f"{MARK}: between runs max abs {fmt(noise.max_abs)}, max rel {fmt(noise.max_rel)}"
            + (f", min cosine {fmt_cosine(noise.min_cosine)}" if noise.min_cosine is not None else "")
        )
    lines.extend(f"{MARK}: {m}" for m in margin_lines(ov))
    lines.append(f"{MARK}: {proposal_text(p)} (not applied)")
    return lines


def write_proposals(
    manifest_path: Path, evidence: Evidence, safety: float = DEFAULT_SAFETY, today: str | None = None
) -> list[str]:
    """Write each output's evidence and proposal as a comment block beside its criterion; the labels of
    the outputs that got a proposed criterion (an output with evidence only gets the block, not a label)."""
    doc = load_document(manifest_path)
    day = today or datetime.now(timezone.utc).date().isoformat()
    written: list[str] = []
    changed = False
    names = [c.get("name") for c in doc.get("check", [])]
    for ov in evidence.outputs:
        ci = names.index(ov.check)
        oi = next(i for i, o in enumerate(evidence_check(evidence, ov.check).output) if o is ov.output)
        table = doc["check"][ci]["output"][oi]
        proposal = propose(ov, safety)
        put_block(table, comment_lines(ov, proposal, evidence, day))
        changed = True
        if proposal.values:
            written.append(ov.label)
    if changed:
        save_document(doc, manifest_path)
    return written


def evidence_check(evidence: Evidence, name: str) -> Any:
    return next(c for c in evidence.request.checks if c.name == name)


def put_block(table: Table, lines: list[str]) -> None:
    """Replace the table's earlier variance block with `lines`, after its last criterion key."""
    body = table.value.body
    for i, (key, item) in enumerate(body):
        if key is None and isinstance(item, Comment) and item.as_string().strip().startswith(MARK):
            body[i] = (None, Null())
    keyed = [(i, k.key) for i, (k, _) in enumerate(body) if k is not None]
    if not keyed:
        return
    at = max((i for i, k in keyed if k in _CRITERIA_KEYS), default=keyed[-1][0])
    item = body[at][1]
    trail = item.trivia.trail
    item.trivia.trail = (trail if trail.endswith("\n") else trail + "\n") + "".join(
        f"{line}\n" for line in lines
    )


__all__ = [
    "DEFAULT_SAFETY",
    "Proposal",
    "evidence_json",
    "propose",
    "put_block",
    "report_text",
    "round_up",
    "write_proposals",
]


def variance(
    manifest: Manifest,
    root: Path,
    python: str,
    request: Request,
    *,
    out_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    safety: float | None = None,
) -> Evidence:
    """Run, measure, and write `variance.json` into the run's folder (proposals with `safety`)."""
    if request.repeats < 1:
        raise UsageError(f"--repeat {request.repeats}: expected 1 or more")
    folder = variance_folder(root, request, out_dir)
    started = time.monotonic()
    runs = run_all(manifest, root, python, request, folder, env=env, progress=progress)
    evidence = Evidence(request, folder, runs, measure(request, runs, root))
    seconds = time.monotonic() - started
    data = evidence_json(evidence, seconds=seconds, safety=safety or DEFAULT_SAFETY)
    atomic_write_text(folder / DATA, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return evidence
