"""`kernodeck check --repeat N [--vary NAME=V1,V2,...]`: how much each output moves, and why.

Every selected `[[check]]` runs N times in fresh processes under every condition (see
`kernodeck.checks.conditions`), in parallel up to the cores available. Each run keeps its outputs
under one folder, `<manifest folder>/.kernodeck/variance/<id>/` (the id is a digest of what was
asked: the same request replaces its own folder), with `variance.json` beside them, which
`kernodeck report` renders.

Each output is then measured with the criteria's own metrics (`kernodeck.checks.criteria`): the
repeats of a condition against its first run, every run of a condition against the baseline's
first run, and every run against the declared reference, where the current criterion's margin is
read (the worst run's share of the tolerance). Every run is also judged by `criteria.evaluate`,
so a criterion that failed in any run is counted, never hidden. A proposal (`propose.py`) comes
from the spread between runs, never from the difference to the reference.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kernodeck.checks import criteria
from kernodeck.checks.conditions import Axis, Condition, condition_env, conditions, expand_placeholders
from kernodeck.checks.readers import Loaded, read_output
from kernodeck.checks.runner import LOG_DIR, MARKER, expand_argv, fresh_out, run_command, target_env
from kernodeck.errors import UsageError
from kernodeck.manifest.paths import escapes
from kernodeck.manifest.schema import Check, CheckOutput, Manifest
from kernodeck.report import Status
from kernodeck.support.fsio import atomic_write_text

FOLDER = Path(".kernodeck") / "variance"
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
"""The per-element distribution of |run - anchor| kept for an array output."""
DATA = "variance.json"


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Request:
    checks: list[Check]
    axes: list[Axis]
    repeats: int
    jobs: int

    @property
    def conditions(self) -> list[Condition]:
        return conditions(self.axes)

    def digest(self) -> str:
        what = {
            "checks": [c.name for c in self.checks],
            "axes": [[a.name, list(a.values)] for a in self.axes],
            "repeats": self.repeats,
        }
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class Run:
    check: str
    condition: int
    repeat: int
    out: Path
    ok: bool = False
    seconds: float = 0.0
    failure: str | None = None
    failed: list[str] = field(default_factory=list)  # criteria names that failed in this run


class Progress(Protocol):
    def start(self, total: int, jobs: int) -> None: ...
    def done(self, run: Run, estimate: float | None) -> None: ...
    def close(self) -> None: ...


def variance_folder(root: Path, request: Request, out_dir: Path | None) -> Path:
    folder = out_dir if out_dir is not None else root / FOLDER / request.digest()
    if folder.exists() and any(folder.iterdir()) and not (folder / LOG_DIR / MARKER).is_file():
        raise UsageError(
            f"folder {folder} already exists and was not made by kernodeck",
            hint="pass another --out folder, or remove that one",
        )
    (folder / LOG_DIR).mkdir(parents=True, exist_ok=True)
    (folder / LOG_DIR / MARKER).write_text("this folder is replaced on the next run\n", encoding="utf-8")
    if out_dir is None:  # the runs stay out of version control
        atomic_write_text(root / FOLDER / ".gitignore", "*\n")
    return folder


def run_all(
    manifest: Manifest,
    root: Path,
    python: str,
    request: Request,
    folder: Path,
    *,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> list[Run]:
    """Every check x condition x repeat, in parallel on `request.jobs` workers."""
    conds = request.conditions
    runs = [
        Run(c.name, ci, k, folder / c.name / f"c{ci}" / f"r{k}")
        for c in request.checks
        for ci in range(len(conds))
        for k in range(request.repeats)
    ]
    by_name = {c.name: c for c in request.checks}
    jobs = max(1, min(request.jobs, len(runs)))
    if progress is not None:
        progress.start(len(runs), jobs)

    def one(run: Run) -> Run:
        _run_one(manifest, root, python, by_name[run.check], conds[run.condition], request.axes, run, env)
        return run

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            first: float | None = None  # the first run to finish times the estimate
            for finished, fut in enumerate(as_completed([pool.submit(one, r) for r in runs]), start=1):
                run = fut.result()
                first = run.seconds if first is None else first
                if progress is not None:
                    progress.done(run, math.ceil((len(runs) - finished) / jobs) * first)
    finally:
        if progress is not None:
            progress.close()
    return runs


def _run_one(
    manifest: Manifest,
    root: Path,
    python: str,
    check: Check,
    cond: Condition,
    axes: Sequence[Axis],
    run: Run,
    env: Mapping[str, str] | None,
) -> None:
    out = fresh_out(run.out.parent, run.out.name)
    extra = {**check.env, **condition_env(cond, axes)}
    full_env, added = target_env(python, base=env, determinism=manifest.determinism, extra=extra, out=out)
    argv = expand_argv(expand_placeholders(check.run, cond, axes), python, out)
    result = run_command(argv, cwd=root, env=full_env, timeout=check.timeout, out=out, env_set=added)
    run.ok, run.seconds = result.ok, result.seconds
    if not result.ok:
        run.failure = result.describe_failure()
        return
    for o in check.output:
        for step in criteria.evaluate(check.name, o, out, root):
            if step.status is Status.FAILED and step.required:
                run.failed.append(step.name)


# --- measuring ----------------------------------------------------------------------------------


@dataclass
class Spread:
    """Runs of one group against one anchor, with the criteria's metrics."""

    runs: int = 0
    identical: int = 0
    unreadable: int = 0
    max_abs: float | None = None
    max_rel: float | None = None
    min_cosine: float | None = None
    rows: int | None = None
    rows_changed: int | None = None
    per_row: Any = None  # per row, the largest |run - anchor| over the runs (numeric arrays)
    quantiles: dict[str, float] = field(default_factory=dict)  # p50/p90/p99 of |run - anchor|, worst run

    @property
    def moved(self) -> bool:
        return self.identical < self.runs or self.unreadable > 0

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"runs": self.runs, "identical": self.identical}
        if self.unreadable:
            d["unreadable"] = self.unreadable
        for key, v in (
            ("max-abs", self.max_abs),
            ("max-rel", self.max_rel),
            ("min-cosine", self.min_cosine),
            ("rows", self.rows),
            ("rows-changed", self.rows_changed),
        ):
            if v is not None:
                d[key] = _finite_or_text(v)
        d.update({f"{q}-abs": _finite_or_text(v) for q, v in self.quantiles.items()})
        return d


def _finite_or_text(v: float | int) -> float | int | str:
    return v if math.isfinite(v) else str(v)


def kind_of(output: CheckOutput, sample: Any) -> str:
    """How an output's runs are compared: 'metric', 'array' (numeric) or 'exact'."""
    if output.metric is not None:
        return "metric"
    return "array" if criteria.numeric_array(sample) is not None else "exact"


UNREAD: Any = object()
"""The value of a run whose output could not be read (a JSON `null` is a value)."""


def value_of(output: CheckOutput, loaded: Loaded | None, kind: str) -> Any:
    """What is compared: a metric's number, a numeric array, or plain values; `UNREAD` when the
    run wrote nothing readable (or no number, or no numeric array, where one is compared)."""
    if loaded is None:
        return UNREAD
    if kind == "metric":
        assert output.metric is not None
        got = criteria.metric_of(loaded.value, output.metric)
    elif kind == "array":
        got = criteria.numeric_array(loaded.value)
    else:
        return criteria.plain(loaded.value)
    return UNREAD if got is None else got


def spread(values: Sequence[Any], anchor: Any, kind: str) -> Spread:
    """The runs' `values` against `anchor` (`UNREAD`: nothing to compare)."""
    s = Spread(runs=len(values))
    if kind == "exact":
        s.unreadable = s.runs if anchor is UNREAD else sum(v is UNREAD for v in values)
        s.identical = 0 if anchor is UNREAD else sum(v is not UNREAD and v == anchor for v in values)
        return s
    s.max_abs = s.max_rel = 0.0
    if kind == "array" and anchor is not UNREAD:
        s.min_cosine, s.rows, s.rows_changed = 1.0, _rows(anchor), 0
    for v in values:
        _add(s, v, anchor, kind)
    return s


def _rows(arr: Any) -> int:
    return int(arr.shape[0]) if arr.ndim > 1 else 1


def _add(s: Spread, v: Any, anchor: Any, kind: str) -> None:
    if v is UNREAD or anchor is UNREAD or (kind == "array" and v.shape != anchor.shape):
        s.unreadable += 1
        s.max_abs = s.max_rel = math.inf
        return
    diff, rel = criteria.abs_rel_errors(v, anchor)
    same = not diff.any()
    s.identical += same
    s.max_abs = max(s.max_abs or 0.0, float(diff.max()) if diff.size else 0.0)
    s.max_rel = max(s.max_rel or 0.0, float(rel.max()) if rel.size else 0.0)
    if kind == "array":
        _add_rows(s, v, anchor, diff, same)


def _add_rows(s: Spread, v: Any, anchor: Any, diff: Any, same: bool) -> None:
    import numpy as np

    if not same:  # an identical run's cosine is 1, whatever float64 rounding of the dot product says
        cos = criteria.row_cosines(v, anchor)
        s.min_cosine = min(s.min_cosine if s.min_cosine is not None else 1.0, float(cos.min()))
    if diff.size:
        for q, at in QUANTILES:
            s.quantiles[q] = max(s.quantiles.get(q, 0.0), float(np.quantile(diff, at)))
    row_max = diff.reshape(_rows(anchor), -1).max(axis=1)
    s.per_row = row_max if s.per_row is None else np.maximum(s.per_row, row_max)
    s.rows_changed = int((s.per_row > 0).sum())


# --- one output's evidence ------------------------------------------------------------------------


@dataclass
class OutputVariance:
    check: str
    output: CheckOutput
    kind: str
    conditions: list[str]
    repeats: list[Spread]  # per condition: its runs against its own first run
    across: list[Spread | None]  # per condition: its runs against the baseline's first run (None: baseline)
    reference: list[Spread] | None  # per condition: its runs against the declared reference
    used: dict[str, float]  # criterion -> the worst run's share of it (1: at the limit)
    closest: dict[str, Any] | None = None  # a metric's range: the value nearest a bound
    failed_runs: dict[str, int] = field(default_factory=dict)  # criterion -> runs that failed it

    @property
    def label(self) -> str:
        return f"{self.check}/{criteria.output_label(self.output)}"

    @property
    def runs(self) -> int:
        return sum(s.runs for s in self.repeats) + len(self.repeats)

    def noise(self) -> Spread:
        """Every comparison between runs pooled: the evidence a proposal stands on."""
        return pool([*self.repeats, *(a for a in self.across if a is not None)])

    def against_reference(self) -> Spread | None:
        return None if self.reference is None else pool(self.reference)


def pool(spreads: Sequence[Spread]) -> Spread:
    """Several groups' spreads as one (per-row series are not pooled)."""
    pooled = Spread()
    for s in spreads:
        pooled.runs += s.runs
        pooled.identical += s.identical
        pooled.unreadable += s.unreadable
        pooled.max_abs = _max(pooled.max_abs, s.max_abs)
        pooled.max_rel = _max(pooled.max_rel, s.max_rel)
        pooled.min_cosine = _min(pooled.min_cosine, s.min_cosine)
        if s.rows is not None:
            pooled.rows = s.rows
            pooled.rows_changed = max(pooled.rows_changed or 0, s.rows_changed or 0)
    return pooled


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def measure_output(
    check: Check, output: CheckOutput, runs: Sequence[Run], labels: Sequence[str], root: Path
) -> OutputVariance | None:
    """The evidence for one output from the runs of its check (None: it must not exist, or no run
    wrote it readably)."""
    if not output.exists:
        return None
    mine = [r for r in runs if r.check == check.name]
    loaded = {id(r): _load(r, output) for r in mine}
    readable = [v for v in loaded.values() if v is not None]
    if not readable:
        return None
    kind = kind_of(output, readable[0].value)
    values = {id(r): value_of(output, loaded[id(r)], kind) for r in mine}
    groups = [[r for r in mine if r.condition == ci] for ci in range(len(labels))]
    anchor = values[id(groups[0][0])]  # the baseline's first run
    ov = OutputVariance(
        check.name,
        output,
        kind,
        list(labels),
        repeats=[spread([values[id(r)] for r in g[1:]], values[id(g[0])], kind) for g in groups],
        across=[None] + [spread([values[id(r)] for r in g], anchor, kind) for g in groups[1:]],
        reference=None,
        used={},
    )
    _against_reference(ov, [[values[id(r)] for r in g] for g in groups], root)
    ov.failed_runs = _failed_criteria(ov.label, mine)
    return ov


def _failed_criteria(label: str, runs: Sequence[Run]) -> dict[str, int]:
    """criterion -> how many runs failed it, from the steps criteria.evaluate named `<label>: <criterion>`."""
    counts: dict[str, int] = {}
    for r in runs:
        for name in r.failed:
            if name.startswith(f"{label}: "):
                crit = name.removeprefix(f"{label}: ")
                counts[crit] = counts.get(crit, 0) + 1
    return counts


def _load(run: Run, output: CheckOutput) -> Loaded | None:
    if not run.ok:
        return None
    got = read_output(run.out / output.path, output.key)
    return got if isinstance(got, Loaded) else None


def _against_reference(ov: OutputVariance, grouped: Sequence[Sequence[Any]], root: Path) -> None:
    o = ov.output
    values = [v for g in grouped for v in g]
    if o.metric is not None and o.reference is None:
        ov.closest = _closest_bound(o, values)
        return
    if o.reference is None or (not o.external and escapes(root, root / o.reference) is not None):
        return  # outside the project: criteria.evaluate reports it in every run
    ref = read_output(root / o.reference, o.key)
    if not isinstance(ref, Loaded):
        return
    anchor = value_of(o, ref, ov.kind)
    ov.reference = [spread(g, anchor, ov.kind) for g in grouped]
    if anchor is UNREAD or ov.kind == "exact":
        return
    readable = [v for v in values if v is not UNREAD and (ov.kind != "array" or v.shape == anchor.shape)]
    if o.atol is not None or o.rtol is not None:
        ov.used["tolerance"] = max((_tolerance_share(v, anchor, o) for v in readable), default=math.nan)
    if o.cosine_min is not None and ov.kind == "array":
        ov.used["cosine-min"] = max(
            (_cosine_share(v, anchor, o.cosine_min) for v in readable), default=math.nan
        )


def _tolerance_share(v: Any, ref: Any, o: CheckOutput) -> float:
    diff, _ = criteria.abs_rel_errors(v, ref)
    used = criteria.tolerance_used(diff, criteria.allowed(ref, o.atol or 0.0, o.rtol or 0.0))
    return float(used.max()) if used.size else 0.0


def _cosine_share(v: Any, ref: Any, floor: float) -> float:
    gap = 1.0 - float(criteria.row_cosines(v, ref).min())
    room = 1.0 - floor
    if room <= 0:
        return 0.0 if gap <= 0 else math.inf
    return max(gap, 0.0) / room


def _closest_bound(o: CheckOutput, values: Sequence[Any]) -> dict[str, Any] | None:
    seen = [float(v) for v in values if v is not UNREAD]
    if not seen or (o.min is None and o.max is None):
        return None
    candidates = []
    for bound in (o.min, o.max):
        if bound is not None:
            v = min(seen, key=lambda x: abs(x - bound))
            candidates.append({"value": v, "bound": bound, "distance": abs(v - bound)})
    return min(candidates, key=lambda c: float(c["distance"]))


# --- the whole run --------------------------------------------------------------------------------


@dataclass
class Evidence:
    request: Request
    folder: Path
    runs: list[Run]
    outputs: list[OutputVariance]

    @property
    def failed_runs(self) -> list[Run]:
        return [r for r in self.runs if not r.ok]

    @property
    def criteria_failed(self) -> bool:
        return any(r.failed for r in self.runs)


def measure(request: Request, runs: Sequence[Run], root: Path) -> list[OutputVariance]:
    labels = [c.describe() if c.axis is None else c.label for c in request.conditions]
    found = []
    for check in request.checks:
        for o in check.output:
            ov = measure_output(check, o, runs, labels, root)
            if ov is not None:
                found.append(ov)
    return found


__all__ = [
    "DATA",
    "FOLDER",
    "Evidence",
    "OutputVariance",
    "Progress",
    "Request",
    "Run",
    "Spread",
    "cores",
    "measure",
    "run_all",
    "spread",
]
