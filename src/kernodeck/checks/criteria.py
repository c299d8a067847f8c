"""Judge one declared output against the criteria written before the run.

Structure first (exists, count, shape, dtype), then values (finite, range or metric, ids, equals),
then the comparison with the reference artifact (atol/rtol with the observed maximum absolute and
relative errors, exact equality, cosine per row). Every criterion is its own Step named
`<check>/<output>: <criterion>` with expected, observed and a verdict; a failure's error names
the output, the criterion and the observed value.

`sha256` on an output is the fingerprint `kernodeck check --record` wrote: of the reference file
when the output has a `reference` (so the comparison target itself is pinned), otherwise of the
output bytes of the reference run (a difference is a warning unless `exact = true`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from kernodeck.checks.readers import Loaded, Unreadable, dtype_name, lookup, read_output
from kernodeck.fingerprint import sha256_file
from kernodeck.manifest.paths import OUTSIDE_HINT, escapes, outside_message
from kernodeck.manifest.schema import CheckOutput
from kernodeck.report import Step

LAYER = "application"
Mode = Literal["check", "record"]

NO_TOLERANCE_HINT = "add `atol` and/or `rtol` (or `cosine-min`, or `exact = true`) to this [[check.output]]"


def output_label(output: CheckOutput) -> str:
    return f"{output.path}[{output.key}]" if output.key else output.path


def has_tolerance(output: CheckOutput) -> bool:
    return output.atol is not None or output.rtol is not None or output.cosine_min is not None or output.exact


class _Judge:
    def __init__(self, check: str, output: CheckOutput, layer: str) -> None:
        self.check_name = check
        self.output = output
        self.label = output_label(output)
        self.layer = layer
        self.steps: list[Step] = []

    def name(self, criterion: str) -> str:
        return f"{self.check_name}/{self.label}: {criterion}"

    def ok(self, criterion: str, expected: Any, observed: Any, details: dict[str, Any] | None = None) -> None:
        self.steps.append(
            Step.passed(
                self.layer, self.name(criterion), expected=expected, observed=observed, details=details or {}
            )
        )

    def fail(
        self,
        criterion: str,
        expected: Any,
        observed: Any,
        why: str | None = None,
        hint: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        error = f"{self.label}: {criterion}: expected {_text(expected)}, observed {_text(observed)}"
        if why:
            error += f" ({why})"
        self.steps.append(
            Step.failed(
                self.layer,
                self.name(criterion),
                error,
                expected=expected,
                observed=observed,
                hint=hint,
                details=details or {},
            )
        )

    def warn(
        self, criterion: str, expected: Any, observed: Any, why: str, details: dict[str, Any] | None = None
    ) -> None:
        self.steps.append(
            Step.warning(
                self.layer,
                self.name(criterion),
                f"{self.label}: {criterion}: {why}",
                expected=expected,
                observed=observed,
                required=False,
                details=details or {},
            )
        )

    def skip(self, criterion: str, why: str) -> None:
        self.steps.append(Step.skipped(self.layer, self.name(criterion), why))

    def check(
        self,
        criterion: str,
        passed: bool,
        expected: Any,
        observed: Any,
        why: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> bool:
        if passed:
            self.ok(criterion, expected, observed, details)
        else:
            self.fail(criterion, expected, observed, why, details=details)
        return passed


def evaluate(
    check: str,
    output: CheckOutput,
    out: Path,
    root: Path,
    *,
    mode: Mode = "check",
    layer: str = LAYER,
) -> list[Step]:
    """Every criterion of `output` (read from `out`) as Steps. In record mode the comparisons with
    the reference and the recorded sha256 are left out: the run being recorded becomes them."""
    j = _Judge(check, output, layer)
    o = output
    path = out / o.path
    loaded = read_output(path, o.key)

    if not o.exists:
        present = path.exists()
        j.check("exists", not present, "absent", "present" if present else "absent")
        return j.steps
    if isinstance(loaded, Unreadable):
        observed = "missing" if loaded.missing_file else f"present, {loaded.reason}"
        j.fail(
            "exists",
            "present and readable",
            observed,
            hint=_missing_hint(out, o) if loaded.missing_file else None,
        )
        return j.steps
    j.ok("exists", "present and readable", f"{loaded.format}" + (f" {loaded.dtype}" if loaded.dtype else ""))

    value = loaded.value
    structure_ok = True
    if o.metric is not None:
        _metric(j, loaded, root, mode)
    else:
        if o.count is not None:
            n = _count(value)
            j.check(
                "count", n == o.count, o.count, n if n is not None else f"not a collection ({_kind(value)})"
            )
        if o.shape is not None:
            shape = _shape(value)
            structure_ok = j.check(
                "shape",
                shape is not None and _shape_matches(shape, o.shape),
                o.shape,
                list(shape) if shape is not None else f"not an array ({_kind(value)})",
            )
        if o.dtype is not None:
            want = dtype_name(o.dtype)
            got = loaded.dtype
            j.check(
                "dtype", got == want, want, got if got is not None else f"not a typed array ({loaded.format})"
            )
        if o.finite:
            _finite(j, value)
        if o.min is not None or o.max is not None:
            _range(j, value)
        if o.ids_from is not None:
            _ids(j, value, root)
        if o.equals is not None:
            got = plain(value)
            items = got if isinstance(got, list) else [got]  # a scalar output equals a one-item list
            shown = repr(got) if isinstance(got, str) else got
            j.check("equals", items == o.equals, o.equals, shown, why=_first_difference(items, o.equals))

    if mode == "record":
        return j.steps
    if o.reference is not None and o.metric is None:
        _reference(j, loaded, root, structure_ok)
    elif o.sha256 is not None:
        digest = sha256_file(path)
        if digest == o.sha256:
            j.ok("sha256", o.sha256, digest)
        elif o.exact:
            j.fail("sha256", o.sha256, digest, why="the bytes differ from the recorded reference run")
        else:
            j.warn(
                "sha256",
                o.sha256,
                digest,
                "the bytes differ from the recorded reference run (values judged above)",
            )
    return j.steps


# --- criteria ----------------------------------------------------------------------------------


def _metric(j: _Judge, loaded: Loaded, root: Path, mode: Mode) -> None:
    o = j.output
    assert o.metric is not None
    crit = f"metric {o.metric}"
    found, v = lookup(loaded.value, o.metric)
    if not found or not _is_number(v):
        j.fail(
            crit,
            "a number",
            "missing" if not found else _show(v),
            hint=f"{o.path} has no numeric {o.metric!r}",
        )
        return
    value = float(v)
    if o.min is not None or o.max is not None:
        lo = -math.inf if o.min is None else o.min
        hi = math.inf if o.max is None else o.max
        j.check(crit, lo <= value <= hi, _bounds(o.min, o.max), value)
    else:
        j.ok(crit, "recorded", value)
    if mode == "check" and o.reference is not None:
        real = None if o.external else escapes(root, root / o.reference)
        if real is not None:
            j.fail(f"{crit} vs reference", "a file inside the project", outside_message(o.reference, real))
            return
        ref = read_output(root / o.reference, o.key)
        if isinstance(ref, Unreadable):
            j.fail(f"{crit} vs reference", o.reference, ref.reason)
            return
        rfound, rv = lookup(ref.value, o.metric)
        if not rfound or not _is_number(rv):
            j.fail(f"{crit} vs reference", "a number in the reference", _show(rv))
            return
        atol, rtol = o.atol or 0.0, o.rtol or 0.0
        if not (o.atol is not None or o.rtol is not None or o.exact):
            j.fail(f"{crit} vs reference", "a declared tolerance", "none", hint=NO_TOLERANCE_HINT)
            return
        err = abs(value - float(rv))
        j.check(
            f"{crit} vs reference",
            err <= atol + rtol * abs(float(rv)),
            f"{float(rv)} ± {atol} + {rtol}·|ref|",
            value,
            why=f"abs error {err:.3g}",
        )
    return


def _finite(j: _Judge, value: Any) -> None:
    arr = _array(value)
    if arr is None or arr.dtype.kind not in "biufc":
        j.fail("finite", "all finite", f"not numeric ({_kind(value)})")
        return
    np = _np()
    bad = ~np.isfinite(arr)
    n_bad = int(bad.sum())
    if n_bad == 0:
        j.ok("finite", "all finite", f"all {arr.size} values finite")
        return
    n_nan = int(np.isnan(arr).sum())
    first = [int(i) for i in np.argwhere(bad)[0]] if arr.ndim else []
    j.fail(
        "finite",
        "all finite",
        f"{n_nan} NaN, {n_bad - n_nan} Inf (first at {first})",
        details={"first": first},
    )


def _range(j: _Judge, value: Any) -> None:
    o = j.output
    arr = _array(value)
    crit = "range"
    if arr is None or arr.dtype.kind not in "biuf" or arr.size == 0:
        j.fail(crit, _bounds(o.min, o.max), f"not a non-empty real array ({_kind(value)})")
        return
    np = _np()
    finite = arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr
    if finite.size == 0:
        j.fail(crit, _bounds(o.min, o.max), "no finite values")
        return
    lo, hi = float(finite.min()), float(finite.max())
    ok = (o.min is None or lo >= o.min) and (o.max is None or hi <= o.max)
    j.check(crit, ok, _bounds(o.min, o.max), [lo, hi])


def _ids(j: _Judge, value: Any, root: Path) -> None:
    o = j.output
    assert o.ids_from is not None
    file, _, field = o.ids_from.partition("#")
    src = read_output(root / file, field)
    crit = "ids"
    if isinstance(src, Unreadable):
        j.fail(crit, f"the ids of {o.ids_from}", f"input unreadable: {src.reason}")
        return
    expected = plain(src.value)
    if file.lower().endswith(".csv"):
        expected = [str(v) for v in expected]
    got = _output_ids(value, o.ids_key or field)
    if got is None:
        j.fail(crit, f"{len(expected)} ids of {o.ids_from}", f"no ids found ({_kind(value)})")
        return
    if file.lower().endswith(".csv"):
        got = [str(v) for v in got]
    if got == expected:
        j.ok(crit, f"{len(expected)} ids of {o.ids_from}, in order", f"{len(got)} ids, in order")
        return
    why = _first_difference(got, expected)
    if len(got) == len(expected) and sorted(map(str, got)) == sorted(map(str, expected)):
        observed = f"same {len(got)} ids in a different order; {why}"
    else:
        observed = f"{len(got)} ids; {why}"
    j.fail(crit, f"{len(expected)} ids of {o.ids_from}, in order", observed)


def _reference(j: _Judge, loaded: Loaded, root: Path, structure_ok: bool) -> None:
    o = j.output
    assert o.reference is not None
    ref_path = root / o.reference
    real = None if o.external else escapes(root, ref_path)
    if real is not None:
        j.fail(
            "reference", "a file inside the project", outside_message(o.reference, real), hint=OUTSIDE_HINT
        )
        return
    if o.sha256 is not None and ref_path.is_file():
        digest = sha256_file(ref_path)
        if not j.check(
            "reference sha256", digest == o.sha256, o.sha256, digest, why=f"{o.reference} changed"
        ):
            return
    ref = read_output(ref_path, o.key)
    if isinstance(ref, Unreadable):
        j.fail(
            "reference",
            f"{o.reference} readable",
            ref.reason,
            hint="run `kernodeck check --record` in the reference environment",
        )
        return
    comparisons = []
    if o.exact:
        comparisons.append("exact")
    if o.atol is not None or o.rtol is not None:
        comparisons.append("tolerance")
    if o.cosine_min is not None:
        comparisons.append("cosine")
    got_arr, ref_arr = _array(loaded.value), _array(ref.value)
    numeric = (
        got_arr is not None
        and ref_arr is not None
        and got_arr.dtype.kind in "biufc"
        and ref_arr.dtype.kind in "biufc"
    )
    if not comparisons:
        if numeric:
            j.fail("reference", "a declared tolerance", "none", hint=NO_TOLERANCE_HINT)
            return
        comparisons.append("exact")  # labels, categories, text: equality is the only comparison
    if not structure_ok:
        for c in comparisons:
            j.skip(_REF_NAMES[c], "skipped: the shape criterion failed")
        return
    for c in comparisons:
        if c == "exact":
            a, b = plain(loaded.value), plain(ref.value)
            j.check("equals reference", a == b, o.reference, "equal" if a == b else _first_difference(a, b))
        elif not numeric or got_arr is None or ref_arr is None:
            j.fail(_REF_NAMES[c], f"numeric, like {o.reference}", f"not numeric ({_kind(loaded.value)})")
        elif got_arr.shape != ref_arr.shape:
            j.fail(
                _REF_NAMES[c], f"shape {list(ref_arr.shape)} of {o.reference}", f"shape {list(got_arr.shape)}"
            )
        elif c == "tolerance":
            _allclose(j, got_arr, ref_arr)
        else:
            _cosine(j, got_arr, ref_arr)


_REF_NAMES = {"exact": "equals reference", "tolerance": "vs reference", "cosine": "cosine-min"}


def _allclose(j: _Judge, got: Any, ref: Any) -> None:
    np = _np()
    o = j.output
    atol, rtol = o.atol or 0.0, o.rtol or 0.0
    diff, rel = abs_rel_errors(got, ref)
    limit = allowed(ref, atol, rtol)
    bad = diff > limit
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    expected = f"|out - ref| <= {atol:g} + {rtol:g}·|ref|"
    observed = f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}"
    details: dict[str, Any] = {"max-abs-error": max_abs, "max-rel-error": max_rel}
    if diff.size:
        details.update(_abs_rows(diff, limit))
        details.update({"atol": atol, "rtol": rtol})
    n_bad = int(bad.sum())
    if n_bad == 0:
        j.ok("vs reference", expected, observed, details=details)
        return
    worst = (
        [int(i) for i in np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), diff.shape)]
        if diff.ndim
        else []
    )
    observed += f"; {n_bad} of {diff.size} values outside (worst at {worst})"
    j.fail("vs reference", expected, observed, details={**details, "worst": worst})


def _cosine(j: _Judge, got: Any, ref: Any) -> None:
    np = _np()
    o = j.output
    assert o.cosine_min is not None
    cos = row_cosines(got, ref)
    worst = int(np.argmin(cos))
    min_cos = float(cos[worst])
    expected = f"cosine >= {o.cosine_min} on every row"
    observed = f"min cosine {_fmt_cos(min_cos)} (row {worst})"
    details: dict[str, Any] = {"min-cosine": min_cos if math.isfinite(min_cos) else None, "row": worst}
    rows, values = compact_rows(np.where(np.isfinite(cos), cos, -1.0), "min")
    details["rows"] = {"row": rows, "cosine": values}
    details["cosine-min"] = o.cosine_min
    if min_cos >= o.cosine_min:
        j.ok("cosine-min", expected, observed, details=details)
    else:
        n_bad = int((cos < o.cosine_min).sum())
        j.fail("cosine-min", expected, f"{observed}; {n_bad} of {len(cos)} rows below", details=details)


# --- the metrics, shared with kernodeck.checks.variance ----------------------------------------


def abs_rel_errors(got: Any, ref: Any) -> tuple[Any, Any]:
    """Element-wise (|got - ref|, |got - ref| / |ref|) in float64, arrays of the same shape: NaN
    where both are NaN counts as equal, NaN on one side as an infinite error; a non-zero error
    against a zero reference is an infinite relative error."""
    np = _np()
    a, b = np.asarray(got).astype(np.float64), np.asarray(ref).astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.where(both_nan, 0.0, np.abs(a - b))
        diff = np.where(np.isnan(diff), np.inf, diff)
        rel = np.where(np.abs(b) > 0, diff / np.abs(b), np.where(diff == 0, 0.0, np.inf))
    return diff, rel


def allowed(ref: Any, atol: float, rtol: float) -> Any:
    """The largest |out - ref| each element may have: atol + rtol·|ref| (a NaN reference: atol)."""
    np = _np()
    b = np.asarray(ref).astype(np.float64)
    return atol + rtol * np.abs(np.where(np.isnan(b), 0.0, b))


def tolerance_used(diff: Any, limit: Any) -> Any:
    """Element-wise |out - ref| / allowed: above 1 fails (a zero allowance: 0 or infinite)."""
    np = _np()
    lim = np.broadcast_to(limit, np.shape(diff))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(lim > 0, diff / lim, np.where(diff > 0, np.inf, 0.0))


def row_cosines(got: Any, ref: Any) -> Any:
    """The cosine of each row (first axis; a 1-D array is one row) of `got` with `ref`'s: two zero
    rows count as 1, a NaN as -inf."""
    np = _np()
    got = np.asarray(got)
    a = got.astype(np.float64).reshape(got.shape[0] if got.ndim > 1 else 1, -1)
    b = np.asarray(ref).astype(np.float64).reshape(a.shape[0], -1)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (a * b).sum(axis=1) / (na * nb)
    cos = np.where((na == 0) & (nb == 0), 1.0, cos)
    return np.where(np.isnan(cos), -math.inf, cos)


def metric_of(value: Any, metric: str) -> float | None:
    """The numeric `metric` (a dotted path) inside an output's value; None when it is missing or
    not a number."""
    found, v = lookup(value, metric)
    return float(v) if found and _is_number(v) else None


def numeric_array(value: Any) -> Any:
    """`value` as a numeric numpy array, or None (labels, text, records, ragged lists)."""
    arr = _array(value)
    return arr if arr is not None and arr.dtype.kind in "biufc" else None


# --- compact per-row series for the HTML report ------------------------------------------------

#: At most this many rows per output are kept in the report; beyond it consecutive rows are
#: pooled (the worst of each group kept, labelled by its first row).
SERIES_ROWS = 400


def compact_rows(per_row: Any, worst: Literal["max", "min"]) -> tuple[list[int], list[float]]:
    np = _np()
    n = int(per_row.shape[0])
    if n <= SERIES_ROWS:
        return list(range(n)), [float(v) for v in per_row]
    size = math.ceil(n / SERIES_ROWS)
    starts = list(range(0, n, size))
    pick = np.max if worst == "max" else np.min
    return starts, [float(pick(per_row[i : i + size])) for i in starts]


def _abs_rows(diff: Any, allowed: Any) -> dict[str, Any]:
    """Per row (first axis; each value of a 1-D array is a row): the absolute error of the value
    that is furthest outside its tolerance, and that tolerance."""
    np = _np()
    d = diff.reshape(diff.shape[0] if diff.ndim else 1, -1)
    lim = np.broadcast_to(allowed, diff.shape).reshape(d.shape)
    ratio = tolerance_used(d, lim)
    at = np.argmax(ratio, axis=1)
    idx = np.arange(d.shape[0])
    err_row, lim_row = d[idx, at], lim[idx, at]
    err_row = np.where(np.isfinite(err_row), err_row, np.finfo(np.float64).max)
    rows, errs = compact_rows(err_row, "max")
    if len(rows) == d.shape[0]:
        limits = [float(v) for v in lim_row]
    else:
        size = math.ceil(d.shape[0] / SERIES_ROWS)
        limits = [float(np.min(lim_row[i : i + size])) for i in rows]
    return {"rows": {"row": rows, "abs-error": errs, "limit": limits}}


# --- helpers -----------------------------------------------------------------------------------


def _np() -> Any:
    import numpy as np

    return np


def _array(value: Any) -> Any:
    """`value` as a numpy array, or None when it is not array-like (ragged, objects)."""
    try:
        np = _np()
    except ImportError:
        return None
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, dict) or value is None or isinstance(value, str):
        return None
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        return None
    return None if arr.dtype == object else arr


def _shape(value: Any) -> tuple[int, ...] | None:
    arr = _array(value)
    return None if arr is None else tuple(int(d) for d in arr.shape)


def _shape_matches(shape: Sequence[int], want: Sequence[int]) -> bool:
    return len(shape) == len(want) and all(w == -1 or s == w for s, w in zip(shape, want, strict=True))


def _count(value: Any) -> int | None:
    arr = _array(value)
    if arr is not None and not isinstance(value, list | tuple):
        return int(arr.shape[0]) if arr.ndim else None
    if isinstance(value, list | tuple | dict):
        return len(value)
    return None


def plain(value: Any) -> Any:
    """JSON-comparable Python values (arrays become lists)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _output_ids(value: Any, field: str) -> list[Any] | None:
    v = plain(value)
    if isinstance(v, dict):
        found, inner = lookup(v, field)
        if not found:
            found, inner = lookup(v, "ids")
        v = inner if found else None
    if not isinstance(v, list):
        return None
    if v and all(isinstance(x, dict) for x in v):
        out = []
        for rec in v:
            found, x = lookup(rec, field)
            if not found:
                return None
            out.append(x)
        return out
    return v


def _first_difference(got: Any, want: Any) -> str | None:
    if isinstance(got, list) and isinstance(want, list):
        for i, (g, w) in enumerate(zip(got, want, strict=False)):
            if g != w:
                return f"first difference at position {i}: {_show(g)} instead of {_show(w)}"
        if len(got) != len(want):
            return f"{len(got)} items instead of {len(want)}"
        return None
    if got != want:
        return f"{_show(got)} instead of {_show(want)}"
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _bounds(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"within [{lo:g}, {hi:g}]"
    if lo is not None:
        return f">= {lo:g}"
    return f"<= {hi:g}"


def _kind(value: Any) -> str:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return f"array {value.dtype}"
    return type(value).__name__


def _fmt_cos(v: float) -> str:
    return "nan" if not math.isfinite(v) else f"{v:.6f}"


def _text(v: Any) -> str:
    return v if isinstance(v, str) else _show(v)


def _show(v: Any) -> str:
    text = repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= 120 else text[:117] + "..."


def _missing_hint(out: Path, o: CheckOutput) -> str:
    try:
        names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    except OSError:
        names = []
    listing = ", ".join(names[:10]) if names else "nothing"
    return f"the command wrote {listing} into the output folder; is {o.path!r} the right path?"


__all__ = [
    "LAYER",
    "NO_TOLERANCE_HINT",
    "abs_rel_errors",
    "allowed",
    "compact_rows",
    "evaluate",
    "has_tolerance",
    "metric_of",
    "numeric_array",
    "output_label",
    "plain",
    "row_cosines",
    "tolerance_used",
]
