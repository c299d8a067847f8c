"""The HTML diagnosis: one self-contained file (`--html FILE`, `kernodeck report`).

No network request of any kind: styles, the small search script and the charts (SVG) are inline,
and a Content-Security-Policy forbids anything else, so the file reads the same offline, attached
to an issue or inside a bundle.

First screen: the verdict, the first failure with its hint, the layers as a row of status badges,
then the charts (the resume trajectory against the reference with its tolerance band and the
first step outside it; per-row absolute error and cosine of array outputs against their
thresholds). Then every layer with its steps (failures first) and the observed inventory as a
searchable table. `diff_html` draws two reports side by side by layer.

Charts come from matplotlib (the `report` extra), imported only here and only when a page is
written: a missing matplotlib is a UsageError naming the extra.
"""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernodeck.errors import UsageError
from kernodeck.layers.causes import StepKind
from kernodeck.render.terminal import first_failure, layer_counts, layers_of
from kernodeck.render.visible import one_line, visible
from kernodeck.report import Report, Status, Step, counts_text, short_hashes
from kernodeck.support.fsio import atomic_write_text

if TYPE_CHECKING:
    from kernodeck.diff import DiffResult


def extra_hint() -> str:
    """How to add the `[report]` extra (matplotlib) for the way Kernodeck was installed."""
    from kernodeck.interpreters import add_extra_hint

    return add_extra_hint("report")


_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_CSS = """
:root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --skip: #6e7781; --line: #d0d7de;
        --bg: #ffffff; --soft: #f6f8fa; --ink: #1f2328; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); background: var(--bg); }
main { max-width: 1200px; margin: 0 auto; padding: 12px 20px 40px; }
h1 { font-size: 22px; margin: 0; }
h2 { font-size: 17px; margin: 22px 0 8px; }
h3 { font-size: 14px; margin: 10px 0 4px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.verdict { display: flex; gap: 14px; align-items: baseline; flex-wrap: wrap; padding: 10px 14px;
           border-radius: 6px; color: #fff; }
.verdict.ok { background: var(--ok); } .verdict.failed { background: var(--bad); }
.verdict .meta { opacity: .92; }
.first { border: 2px solid var(--bad); border-radius: 6px; padding: 8px 12px; margin: 10px 0;
         background: #fff5f5; }
.first .where { font-weight: 600; }
.first .hint { color: #333; margin-top: 4px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 6px 0 0; }
dt { color: #57606a; } dd { margin: 0; overflow-wrap: anywhere; }
.badges { display: flex; flex-wrap: wrap; gap: 6px; margin: 10px 0; padding: 0; list-style: none; }
.badge { display: inline-block; padding: 3px 10px; border-radius: 999px; color: #fff;
         text-decoration: none; font-weight: 600; font-size: 13px; }
.badge.passed { background: var(--ok); } .badge.failed { background: var(--bad); }
.badge.warning { background: var(--warn); } .badge.skipped { background: var(--skip); }
.badge.changed { background: var(--bad); } .badge.same { background: var(--ok); }
.charts { display: flex; flex-wrap: wrap; gap: 10px; }
figure.chart { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 4px; background: #fff; }
figure.chart svg { display: block; width: 560px; max-width: 100%; height: auto; }
figure.chart figcaption { font-size: 12px; color: #57606a; padding: 0 6px 4px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 4px 8px; border-bottom: 1px solid var(--line); }
th { background: var(--soft); position: sticky; top: 0; }
td.status { white-space: nowrap; font-weight: 600; }
tr.failed td.status { color: var(--bad); } tr.passed td.status { color: var(--ok); }
tr.warning td.status { color: var(--warn); } tr.skipped td.status { color: var(--skip); }
tr.failed { background: #fff5f5; }
td { overflow-wrap: anywhere; }
table.steps { table-layout: fixed; }
table.steps col.status { width: 110px; } table.steps col.step { width: 30%; }
table.steps td dl { margin: 0; }
details > summary { cursor: pointer; color: #57606a; }
input[type=search] { width: 320px; max-width: 100%; padding: 5px 8px; margin: 4px 0 8px;
                     border: 1px solid var(--line); border-radius: 6px; font: inherit; }
.side { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
section.layer.changed > h2 { color: var(--bad); }
.muted { color: #57606a; }
/* the A/B page (diff_html): fixed columns, wrapping between words and at separators only */
.ab td, .ab th { overflow-wrap: normal; word-break: normal; hyphens: none; }
.ab .hash { overflow-wrap: anywhere; }
.ab table.differences, .ab table.ab-steps { table-layout: fixed; width: 100%; }
.ab table.differences col.item { width: 30%; } .ab table.differences col.what { width: 12%; }
.ab table.differences col.a, .ab table.differences col.b { width: 29%; }
.ab table.ab-steps col.status { width: 92px; } .ab table.ab-steps col.step { width: 42%; }
.ab .side > div { min-width: 0; }
.ab figure.chart svg { width: 560px; }
.ab details.folded > summary { font-size: 15px; margin: 18px 0 6px; }
"""

_SEARCH_JS = """
(function () {
  var box = document.getElementById("package-search");
  if (!box) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll("#packages tbody tr"));
  var count = document.getElementById("package-count");
  function apply() {
    var q = box.value.trim().toLowerCase(), shown = 0;
    rows.forEach(function (r) {
      var hit = !q || r.textContent.toLowerCase().indexOf(q) !== -1;
      r.hidden = !hit;
      if (hit) shown += 1;
    });
    if (count) count.textContent = shown + " of " + rows.length;
  }
  box.addEventListener("input", apply);
  apply();
})();
"""

_STATUS_WORD = {
    Status.FAILED: "✗ failed",
    Status.WARNING: "! warning",
    Status.PASSED: "✓ passed",
    Status.SKIPPED: "- skipped",
}
_STATUS_ORDER = {Status.FAILED: 0, Status.WARNING: 1, Status.PASSED: 2, Status.SKIPPED: 3}


def _e(text: Any) -> str:
    """Text for the page: control characters visible, HTML's characters escaped."""
    return html.escape(visible("" if text is None else str(text)), quote=True)


def _value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join("none" if v is None else str(v) for v in value)
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def _short(value: Any) -> str:
    return short_hashes(_value(value))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def layer_status(steps: Iterable[Step]) -> str:
    c = layer_counts(steps)
    if c["failed"]:
        return "failed"
    if c["warning"]:
        return "warning"
    if c["passed"]:
        return "passed"
    return "skipped"


# --- charts -----------------------------------------------------------------------------------


def require_matplotlib() -> None:
    """UsageError naming the extra when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise UsageError(f"HTML reports need matplotlib for their charts ({e})", hint=extra_hint()) from None


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:].strip() if start >= 0 else text


def _figure(width: float = 7.2, height: float = 3.0) -> Any:
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=96)
    return fig


def _rc() -> Any:
    import matplotlib

    return matplotlib.rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "kernodeck",
            "font.size": 9,
            "axes.grid": True,
            "grid.alpha": 0.3,
        }
    )


class Unusable(ValueError):
    """A step's chart data that cannot be drawn (a hand-edited or foreign report): the chart is
    left out with this reason."""


def _plain(text: str) -> str:
    """Text for a chart as plain text: one line, control characters visible, and `$` escaped so
    matplotlib never reads it as math."""
    return one_line(text).replace("$", r"\$")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _numbers(values: Any, where: str, length: int | None = None) -> list[float]:
    """A list of numbers for a chart (None, NaN and infinities as gaps); Unusable otherwise."""
    if not isinstance(values, list):
        raise Unusable(f"{where} is not a list")
    if length is not None and len(values) != length:
        raise Unusable(f"{where} has {len(values)} values for {length} points")
    out = []
    for i, v in enumerate(values):
        if v is not None and not _is_number(v):
            raise Unusable(f"{where}[{i}] is not a number")
        f = math.nan if v is None else float(v)
        out.append(f if math.isfinite(f) else math.nan)
    return out


def _scalar(value: Any, where: str) -> float:
    """A tolerance or threshold: a finite number (absent: 0); Unusable otherwise."""
    if value is None:
        return 0.0
    if not _is_number(value) or not math.isfinite(float(value)):
        raise Unusable(f"{where} is not a finite number")
    return float(value)


def _finite(values: Iterable[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


@dataclass(frozen=True)
class _Trajectory:
    xs: list[Any]
    pos: list[float]
    numeric_x: bool
    got: list[float]
    ref: list[float]
    atol: float
    rtol: float


def _trajectory(step: Step) -> _Trajectory | None:
    d = step.details
    series = d.get("series")
    if not isinstance(series, dict) or not series.get("step"):
        return None
    xs = series["step"]
    if not isinstance(xs, list) or not all(_is_number(x) or isinstance(x, str) for x in xs):
        raise Unusable("series.step is not a list of numbers or labels")
    numeric_x = all(_is_number(x) and math.isfinite(x) for x in xs)
    pos = [float(x) for x in xs] if numeric_x else [float(i) for i in range(len(xs))]
    got = _numbers(series.get("value"), "series.value", len(xs))
    ref = _numbers(series.get("reference"), "series.reference", len(xs))
    return _Trajectory(
        xs, pos, numeric_x, got, ref, _scalar(d.get("atol"), "atol"), _scalar(d.get("rtol"), "rtol")
    )


def _metric(step: Step) -> str:
    """The metric a trajectory step declares ("metric" for a step that names none)."""
    return (step.subject if step.what() is StepKind.TRAJECTORY else "") or "metric"


def trajectory_svg(step: Step) -> str | None:
    """The resume trajectory against the reference, with the tolerance band and the first step
    outside it marked; None when the step holds no series, Unusable when it cannot be drawn."""
    t = _trajectory(step)
    if t is None:
        return None
    pos, got, ref = t.pos, t.got, t.ref
    tol = [t.atol + t.rtol * abs(r) for r in ref]
    metric = _plain(_metric(step))
    with _rc():
        fig = _figure(height=3.7)
        ax, low = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
        err = [abs(g - r) for g, r in zip(got, ref, strict=True)]
        _error_panel(low, pos, tol, err, t.numeric_x)
        ax.fill_between(
            pos,
            [r - w for r, w in zip(ref, tol, strict=True)],
            [r + w for r, w in zip(ref, tol, strict=True)],
            color="#2da44e",
            alpha=0.25,
            linewidth=0,
            label=f"tolerance (atol {t.atol:g} + rtol {t.rtol:g}·|ref|)",
        )
        ax.plot(pos, ref, color="#1a7f37", linewidth=1.2, label="reference")
        ax.plot(pos, got, color="#0969da", linewidth=1.4, marker="o", markersize=2.5, label="this run")
        first = step.details.get("first-outside")
        if first is not None and first in t.xs:
            _mark_first(ax, low, t.xs.index(first), pos, got, first)
        ax.set_ylabel(metric)
        ax.set_title(f"resume: {metric} vs reference", fontsize=10)
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
        return _svg(fig)


def _error_panel(low: Any, pos: list[float], tol: list[float], err: list[float], numeric_x: bool) -> None:
    low.fill_between(pos, 0, tol, color="#2da44e", alpha=0.25, linewidth=0, step="mid")
    low.plot(pos, tol, color="#1a7f37", linewidth=1, drawstyle="steps-mid", label="tolerance")
    low.plot(pos, err, color="#0969da", linewidth=1.2, marker="o", markersize=2, label="|run - ref|")
    positive_tol = [t for t in _finite(tol) if t > 0]
    finite_err = _finite(err)
    if positive_tol and finite_err and max(finite_err) > 100 * min(positive_tol):
        low.set_yscale("symlog", linthresh=min(positive_tol))  # a tiny band stays visible
    low.set_ylabel("abs error")
    low.set_xlabel("step")
    if numeric_x:
        from matplotlib.ticker import MaxNLocator

        low.xaxis.set_major_locator(MaxNLocator(integer=True))
    low.legend(loc="upper left", fontsize=8, framealpha=0.85)


def _mark_first(ax: Any, low: Any, i: int, pos: list[float], got: list[float], first: Any) -> None:
    ax.axvline(pos[i], color="#cf222e", linestyle="--", linewidth=1)
    low.axvline(pos[i], color="#cf222e", linestyle="--", linewidth=1)
    ax.plot([pos[i]], [got[i]], marker="x", color="#cf222e", markersize=9, mew=2)
    if math.isfinite(got[i]):
        ax.annotate(
            _plain(f"first outside: step {first}"),
            (pos[i], got[i]),
            xytext=(8, 10),
            textcoords="offset points",
            color="#cf222e",
            fontsize=9,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
        )


def rows_svg(step: Step) -> str | None:
    """Per-row absolute error (with each row's tolerance) or cosine (with the declared minimum)
    of an array output against its reference; None when the step holds no rows, Unusable when
    they cannot be drawn."""
    d = step.details
    rows = d.get("rows")
    if not isinstance(rows, dict) or not rows.get("row"):
        return None
    x = _numbers(rows["row"], "rows.row")
    if "abs-error" not in rows and "cosine" not in rows:
        return None
    with _rc():
        fig = _figure(height=2.6)
        ax = fig.subplots()
        draw = _abs_error_rows if "abs-error" in rows else _cosine_rows
        title = draw(ax, x, rows, d)
        ax.set_xlabel("row")
        ax.set_title(_plain(f"{step.name}: {title}"), fontsize=10)
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
        return _svg(fig)


def _abs_error_rows(ax: Any, x: list[float], rows: dict[str, Any], d: dict[str, Any]) -> str:
    err = _numbers(rows["abs-error"], "rows.abs-error", len(x))
    lim = _numbers(rows.get("limit", []), "rows.limit") or [_scalar(d.get("atol"), "atol")] * len(err)
    if len(lim) != len(err):
        raise Unusable(f"rows.limit has {len(lim)} values for {len(err)} rows")
    bad = [e > m for e, m in zip(err, lim, strict=True)]
    ax.step(x, lim, where="mid", color="#9a6700", linewidth=1.2, label="tolerance")
    ax.scatter(
        x, err, s=12, c=["#cf222e" if b else "#0969da" for b in bad], zorder=3, label="max |out - ref| in row"
    )
    positive = [e for e in _finite(err) if e > 0]
    if positive and max(positive) / max(min(positive), 1e-300) > 1e3:
        ax.set_yscale("symlog", linthresh=max(min(_finite(lim) or [0.0]) / 10, 1e-12))
    ax.set_ylabel("abs error")
    return "absolute error per row"


def _cosine_rows(ax: Any, x: list[float], rows: dict[str, Any], d: dict[str, Any]) -> str:
    cos = _numbers(rows["cosine"], "rows.cosine", len(x))
    floor = _scalar(d.get("cosine-min"), "cosine-min")
    ax.axhline(floor, color="#9a6700", linewidth=1.2, label=f"cosine-min {floor:g}")
    ax.scatter(
        x,
        cos,
        s=12,
        c=["#cf222e" if v < floor else "#0969da" for v in cos],
        zorder=3,
        label="cosine to reference",
    )
    ax.set_ylabel("cosine")
    return "cosine per row"


@dataclass
class Charts:
    """The charts of a report as (id, caption, svg), the trajectories first, and a note for each
    chart left out."""

    figures: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def charts(report: Report) -> Charts:
    """Every chart the report's steps hold; one whose data cannot be drawn is left out with a note."""
    out = Charts()
    for kind, draw in ((StepKind.TRAJECTORY.value, trajectory_svg), ("rows", rows_svg)):
        for s in report.steps:
            where = f"{s.layer}/{s.name}"
            try:
                svg = draw(s)
            except Unusable as e:
                out.notes.append(f"the chart of {where} was left out: {e}")
                continue
            except (ValueError, TypeError, OverflowError) as e:  # matplotlib refused the data
                out.notes.append(
                    f"the chart of {where} was left out: {type(e).__name__}: {one_line(str(e))[:200]}"
                )
                continue
            if svg is not None:
                out.figures.append((f"chart-{kind}-{len(out.figures)}", f"{where}: {s.status.value}", svg))
    return out


# --- the page ---------------------------------------------------------------------------------


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="kernodeck">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        f"{body}\n</main>\n<script>{_SEARCH_JS}</script>\n</body>\n</html>\n"
    )


def _meta(report: Report) -> str:
    parts = []
    if report.manifest:
        parts.append(f"manifest <code>{_e(report.manifest)}</code>")
    if report.reference_id:
        parts.append(f"reference <code>{_e(report.reference_id)}</code>")
    if report.platform:
        parts.append(f"platform <code>{_e(report.platform)}</code>")
    return " · ".join(parts)


def _fields(step: Step, *, full: bool = False) -> str:
    rows = []
    for label, value in (
        ("expected", step.expected),
        ("observed", step.observed),
        ("error", step.error),
        ("hint", step.hint),
    ):
        if value is None or value == "":
            continue
        text = _value(value) if full else _short(value)
        title = f' title="{_e(_value(value))}"' if text != _value(value) else ""
        rows.append(f'<dt>{label}</dt><dd class="mono"{title}>{_e(text)}</dd>')
    return f"<dl>{''.join(rows)}</dl>" if rows else ""


def _first_failure_html(report: Report) -> str:
    first = first_failure(report)
    if first is None:
        warn = next((s for s in report.steps if s.status is Status.WARNING), None)
        if warn is None:
            return '<section id="first-failure" class="muted">No failure.</section>'
        return (
            '<section id="first-failure" class="first" style="border-color: var(--warn); background: #fffbea">'
            f'<div class="where">First warning: {_e(warn.layer)}/{_e(warn.name)}</div>'
            f"<div>{_e(_short(warn.error))}</div>{_hint(warn)}</section>"
        )
    return (
        '<section id="first-failure" class="first">'
        f'<div class="where">First failure: <a href="#layer-{_slug(str(first.layer))}">'
        f"{_e(first.layer)}</a>/{_e(first.name)}</div>"
        f'<div class="error mono">{_e(_short(first.error))}</div>{_hint(first)}'
        f"{_fields(Step(layer=first.layer, name=first.name, status=first.status, expected=first.expected, observed=first.observed))}"
        "</section>"
    )


def _interpreter_html(report: Report) -> str:
    parts = []
    if report.interpreter is not None:
        parts.append(
            f'<p id="interpreter">python: <code>{_e(report.interpreter.path)}</code> '
            f"({_e(report.interpreter.reason)})</p>"
        )
    if report.platform and report.platform_reason:
        parts.append(
            f'<p id="platform">platform: <code>{_e(report.platform)}</code> ({_e(report.platform_reason)})</p>'
        )
    parts.extend(f'<p class="notice"><strong>! {_e(n)}</strong></p>' for n in report.notices)
    return "".join(parts)


def _hint(step: Step) -> str:
    return f'<div class="hint">hint: {_e(_short(step.hint))}</div>' if step.hint else ""


def _badges(report: Report) -> str:
    items = []
    for layer in layers_of(report):
        steps = [s for s in report.steps if str(s.layer) == layer]
        status = layer_status(steps)
        items.append(
            f'<li><a class="badge {status}" href="#layer-{_slug(layer)}" '
            f'title="{_e(counts_text(layer_counts(steps)))}">{_e(layer)}: {status}</a></li>'
        )
    return f'<ul class="badges" id="layers">{"".join(items)}</ul>'


def _layer_section(report: Report, layer: str) -> str:
    steps = [s for s in report.steps if str(s.layer) == layer]
    steps.sort(key=lambda s: _STATUS_ORDER[s.status])  # stable: failures first, report order kept
    rows = []
    for s in steps:
        more = ""
        extra = {k: v for k, v in s.details.items() if k not in ("series", "rows")}
        extra |= {f"measured {k}": v for k, v in s.measured().items()}
        if extra:
            items = "".join(
                f'<dt>{_e(k)}</dt><dd class="mono">{_e(_value(v))}</dd>' for k, v in extra.items()
            )
            more = f"<details><summary>details</summary><dl>{items}</dl></details>"
        name = _e(s.name) + ("" if s.required or s.status is not Status.FAILED else " (optional)")
        rows.append(
            f'<tr class="{s.status.value}"><td class="status">{_STATUS_WORD[s.status]}</td>'
            f"<td>{name}</td><td>{_fields(s, full=s.status is not Status.PASSED)}{more}</td></tr>"
        )
    status = layer_status(steps)
    return (
        f'<section class="layer {status}" id="layer-{_slug(layer)}">'
        f"<h2>{_e(layer)} <span class='muted'>({_e(counts_text(layer_counts(steps)))})</span></h2>"
        '<table class="steps"><colgroup><col class="status"><col class="step"><col></colgroup>'
        "<thead><tr><th>status</th><th>step</th><th>expected / observed / error / hint</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _by_package(report: Report, kind: StepKind) -> dict[str, Step]:
    """The steps of one kind (pins, RECORD steps) by the normalised name of their package."""
    return {_canon(s.subject): s for s in report.steps if s.what() is kind}


def package_rows(report: Report) -> list[dict[str, str]]:
    """The observed distributions with version, local label, installer, and what the packages
    layer said about their hashes (RECORD) and their pin."""
    dists = report.inventory.get("distributions")
    if not isinstance(dists, list):
        return []
    by_kind = {s.what(): s for s in report.steps if s.what() in (StepKind.RECORDS, StepKind.RECORDS_MISSING)}
    records, missing_record = by_kind.get(StepKind.RECORDS), by_kind.get(StepKind.RECORDS_MISSING)
    record_of = _by_package(report, StepKind.RECORD)
    pin_of = _by_package(report, StepKind.PIN)
    no_record = {_canon(str(n)) for n in (missing_record.observed or [])} if missing_record else set()
    if missing_record is not None and isinstance(missing_record.observed, str):
        no_record = {_canon(n) for n in re.split(r"[,\s]+", missing_record.observed) if n}
    out = []
    for d in dists:
        if not isinstance(d, dict) or "name" not in d:
            continue
        name = str(d["name"])
        key = _canon(name)
        version = str(d.get("version") or "")
        local = version.split("+", 1)[1] if "+" in version else ""
        rec = record_of.get(key)
        if rec is not None:
            hashes = f"{rec.status.value}: {_short(rec.error)}" if rec.error else rec.status.value
        elif key in no_record:
            hashes = "no RECORD"
        elif records is not None and records.status is Status.PASSED:
            hashes = "match RECORD"
        else:
            hashes = "not checked"
        pin = pin_of.get(key)
        lock = f"{pin.status.value}: {_short(pin.error)}" if pin is not None else ""
        out.append(
            {
                "name": name,
                "version": version,
                "local": local,
                "installer": str(d.get("installer") or ""),
                "hashes": hashes,
                "lock": lock,
                "status": "failed"
                if (rec is not None and rec.status is Status.FAILED)
                or (pin is not None and pin.status is Status.FAILED)
                else ("warning" if rec is not None else "passed"),
            }
        )
    return out


def _inventory_section(report: Report) -> str:
    rows = package_rows(report)
    parts = []
    if rows:
        body = "".join(
            f'<tr class="{r["status"]}"><td>{_e(r["name"])}</td><td class="mono">{_e(r["version"])}</td>'
            f'<td class="mono">{_e(r["local"])}</td><td>{_e(r["installer"])}</td>'
            f"<td>{_e(r['hashes'])}</td><td>{_e(r['lock'])}</td></tr>"
            for r in rows
        )
        parts.append(
            '<section id="inventory"><h2>Packages <span class="muted" id="package-count"></span></h2>'
            '<input type="search" id="package-search" placeholder="filter packages (name, version, label, status)" '
            'aria-label="filter packages">'
            '<table id="packages"><thead><tr><th>package</th><th>version</th><th>local label</th>'
            "<th>installer</th><th>hash status</th><th>lock</th></tr></thead>"
            f"<tbody>{body}</tbody></table></section>"
        )
    other = {k: v for k, v in report.inventory.items() if k != "distributions"}
    if other:
        items = "".join(f'<dt>{_e(k)}</dt><dd class="mono">{_e(_value(v))}</dd>' for k, v in other.items())
        parts.append(f'<section id="environment"><h2>Environment</h2><dl>{items}</dl></section>')
    return "".join(parts)


def _has_matplotlib() -> bool:
    try:
        require_matplotlib()
    except UsageError:
        return False
    return True


def html_report(report: Report, *, charts_optional: bool = False) -> str:
    """The report as one self-contained HTML page. Without matplotlib: a UsageError naming the
    extra, or with `charts_optional` the page without its charts and a note saying why."""
    if not charts_optional:
        require_matplotlib()
    verdict = "OK" if report.ok else "FAILED"
    cls = "ok" if report.ok else "failed"
    title = f"kernodeck {report.kind}: {verdict}"
    drawable = any(
        isinstance(s.details.get("series"), dict) or isinstance(s.details.get("rows"), dict)
        for s in report.steps
    )
    drawn = charts(report) if _has_matplotlib() else Charts()
    chart_html = ""
    if drawable and not _has_matplotlib():
        chart_html = f'<p class="muted" id="charts">The charts were left out: {_e(extra_hint())}.</p>'
    if drawn.figures or drawn.notes:
        chart_html = (
            '<section id="charts"><div class="charts">'
            + "".join(
                f'<figure class="chart" id="{cid}">{svg}<figcaption>{_e(cap)}</figcaption></figure>'
                for cid, cap, svg in drawn.figures
            )
            + "</div>"
            + "".join(f'<p class="muted chart-note">{_e(n)}.</p>' for n in drawn.notes)
            + "</section>"
        )
    body = (
        f'<header class="verdict {cls}" id="verdict"><h1>{_e(title)}</h1>'
        f'<span class="meta">{_e(counts_text(report.counts()))}</span>'
        f'<span class="meta">{_meta(report)}</span></header>'
        f"{_interpreter_html(report)}{_first_failure_html(report)}{_badges(report)}{chart_html}"
        + "".join(_layer_section(report, layer) for layer in layers_of(report))
        + _inventory_section(report)
    )
    return _page(title, body)


def write_html(report: Report, path: str | Path) -> None:
    atomic_write_text(Path(path), html_report(report))


# --- two reports side by side -----------------------------------------------------------------

#: Where a name or a value may wrap besides spaces and hyphens: after these separators (a path's
#: slash, a step's colon), never inside a word or a version.
_BREAK_AFTER = re.compile(r"([/:=,|])")
#: A hex digest (or its 12-digit prefix): the only text that may wrap anywhere.
_HASH = re.compile(r"\b[0-9a-f]{12,}\b")
_A_COLOR, _B_COLOR = "#0969da", "#bf3989"


def _breakable(text: str) -> str:
    """`text` escaped, with wrap points after separators (`<wbr>`) and hashes in `span.hash`: the
    A/B tables wrap between words and at separators, only a hash anywhere."""
    out = []
    pos = 0
    for m in _HASH.finditer(text):
        out.append(_BREAK_AFTER.sub(r"\1<wbr>", _e(text[pos : m.start()])))
        out.append(f'<span class="hash">{_e(m.group(0))}</span>')
        pos = m.end()
    out.append(_BREAK_AFTER.sub(r"\1<wbr>", _e(text[pos:])))
    return "".join(out)


def _mini_steps(report: Report, layer: str) -> str:
    steps = sorted((s for s in report.steps if str(s.layer) == layer), key=lambda s: _STATUS_ORDER[s.status])
    if not steps:
        return '<p class="muted">no steps in this layer</p>'
    rows = "".join(
        f'<tr class="{s.status.value}"><td class="status">{_STATUS_WORD[s.status]}</td>'
        f"<td>{_breakable(s.name)}</td><td class='mono'>{_breakable(_short(s.observed))}</td></tr>"
        for s in steps
    )
    cols = '<colgroup><col class="status"><col class="step"><col class="value"></colgroup>'
    return f'<table class="ab-steps">{cols}<tbody>{rows}</tbody></table>'


def _series(step: Step | None, key: str) -> list[float]:
    series = step.details.get("series") if step is not None else None
    values = series.get(key, []) if isinstance(series, dict) else []
    return [math.nan if v is None else float(v) for v in values]


def _positions(step: Step) -> list[Any]:
    xs = list(step.details["series"]["step"])
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    return xs if numeric else list(range(len(xs)))


def ab_trajectory_svg(a: Step | None, b: Step | None) -> str | None:
    """One resume trajectory of two reports on one chart: A's and B's runs over the reference
    with its tolerance band (the reference and tolerance of A, else B's); None without series."""
    ref_step = a if a is not None and trajectory_svg_data(a) else b
    if ref_step is None or not trajectory_svg_data(ref_step):
        return None
    d = ref_step.details
    atol, rtol = float(d.get("atol") or 0.0), float(d.get("rtol") or 0.0)
    pos, ref = _positions(ref_step), _series(ref_step, "reference")
    tol = [atol + rtol * abs(r) for r in ref]
    metric = _metric(ref_step)
    with _rc():
        fig = _figure(width=5.8, height=3.0)
        ax = fig.subplots()
        ax.fill_between(
            pos,
            [r - t for r, t in zip(ref, tol, strict=False)],
            [r + t for r, t in zip(ref, tol, strict=False)],
            color="#2da44e",
            alpha=0.25,
            linewidth=0,
            label=f"tolerance (atol {atol:g} + rtol {rtol:g}·|ref|)",
        )
        ax.plot(pos, ref, color="#1a7f37", linewidth=1.2, label="reference")
        for name, step, color in (("A", a, _A_COLOR), ("B", b, _B_COLOR)):
            if step is not None and trajectory_svg_data(step):
                ax.plot(_positions(step), _series(step, "value"), color=color, linewidth=1.3, label=name)
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
        ax.set_title(f"resume: {metric}, A and B vs reference", fontsize=10)
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
        return _svg(fig)


def trajectory_svg_data(step: Step) -> bool:
    series = step.details.get("series")
    return isinstance(series, dict) and bool(series.get("step"))


def _rows_of(step: Step | None) -> dict[str, Any] | None:
    rows = step.details.get("rows") if step is not None else None
    return rows if isinstance(rows, dict) and rows.get("row") else None


def ab_rows_svg(a: Step | None, b: Step | None) -> str | None:
    """An array output's per-row error (or cosine) of two reports on one chart, with the
    tolerance (or the declared minimum) of A, else B; None without rows."""
    base = a if _rows_of(a) is not None else b
    rows = _rows_of(base)
    if base is None or rows is None:
        return None
    kind = "abs-error" if "abs-error" in rows else ("cosine" if "cosine" in rows else None)
    if kind is None:
        return None
    with _rc():
        fig = _figure(width=5.8, height=2.6)
        ax = fig.subplots()
        if kind == "abs-error":
            lim = [float(v) for v in rows.get("limit", [])] or [float(base.details.get("atol") or 0.0)] * len(
                rows["row"]
            )
            ax.step(list(rows["row"]), lim, where="mid", color="#9a6700", linewidth=1.2, label="tolerance")
        else:
            floor = float(base.details.get("cosine-min") or 0.0)
            ax.axhline(floor, color="#9a6700", linewidth=1.2, label=f"cosine-min {floor:g}")
        for name, step, color, marker in (("A", a, _A_COLOR, "o"), ("B", b, _B_COLOR, "s")):
            got = _rows_of(step)
            if got is not None and kind in got:
                ys = [float(v) for v in got[kind]]
                ax.scatter(list(got["row"]), ys, s=12, color=color, marker=marker, zorder=3, label=name)
        ax.set_xlabel("row")
        ax.set_ylabel("abs error" if kind == "abs-error" else "cosine")
        ax.set_title(f"{base.name}: {kind} per row, A and B", fontsize=10)
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
        return _svg(fig)


def ab_charts(a: Report, b: Report) -> list[tuple[str, str, str]]:
    """(id, caption, svg) of every chart either report holds, A and B overlaid, trajectories first."""
    keys = list(dict.fromkeys((str(s.layer), s.name) for s in [*a.steps, *b.steps]))
    steps_a = {(str(s.layer), s.name): s for s in a.steps}
    steps_b = {(str(s.layer), s.name): s for s in b.steps}
    out: list[tuple[str, str, str]] = []
    for kind, draw in ((StepKind.TRAJECTORY.value, ab_trajectory_svg), ("rows", ab_rows_svg)):
        for key in keys:
            sa, sb = steps_a.get(key), steps_b.get(key)
            svg = draw(sa, sb)
            if svg is not None:
                states = ", ".join(
                    f"{n} {s.status.value if s is not None else 'absent'}" for n, s in (("A", sa), ("B", sb))
                )
                out.append((f"chart-{kind}-{len(out)}", f"{key[0]}/{key[1]}: {states}", svg))
    return out


def _differences_table(diffs: list[Any]) -> str:
    if not diffs:
        return ""
    rows = "".join(
        f"<tr><td>{_breakable(d.item)}</td><td>{_e(d.what)}</td><td class='mono'>{_breakable(_short(d.a))}</td>"
        f"<td class='mono'>{_breakable(_short(d.b))}</td></tr>"
        for d in diffs
    )
    cols = '<colgroup><col class="item"><col class="what"><col class="a"><col class="b"></colgroup>'
    return (
        f"<table class='differences'>{cols}<thead><tr><th>item</th><th>what</th><th>A</th><th>B</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
    )


def _ab_section(a: Report, b: Report, layer: str, diffs: list[Any], failed: bool) -> str:
    from kernodeck.layers import layer_info

    cause = diffs[0].cause if diffs else layer_info(layer)[1]
    head = (
        f"<h2>{_e(layer)} <span class='muted'>({_e(cause)}; "
        f"{len(diffs)} difference{'s' if len(diffs) != 1 else ''})</span></h2>"
    )
    side = (
        f"<div class='side'><div><h3>A</h3>{_mini_steps(a, layer)}</div>"
        f"<div><h3>B</h3>{_mini_steps(b, layer)}</div></div>"
    )
    classes = " ".join(["layer", "changed" if diffs else "same", *(["failed"] if failed else [])])
    return (
        f'<section class="{classes}" id="layer-{_slug(layer)}" data-layer="{_e(layer)}">'
        f"{head}{_differences_table(diffs)}{side}</section>"
    )


def _ab_order(
    layers: list[str], failed: set[str], by_layer: dict[str, list[Any]]
) -> tuple[list[str], list[str]]:
    """(layers shown open: failed in A or B first, then those that differ; layers collapsed:
    passed in both and the same)."""
    shown = [x for x in layers if x in failed] + [x for x in layers if x not in failed and x in by_layer]
    return shown, [x for x in layers if x not in shown]


def _charts_html(a: Report, b: Report) -> str:
    figures = "".join(
        f'<figure class="chart" id="{cid}"><figcaption>{_e(cap)}</figcaption>{svg}</figure>'
        for cid, cap, svg in ab_charts(a, b)
    )
    return (
        f'<section id="charts"><h2>Charts: A and B</h2><div class="charts">{figures}</div></section>'
        if figures
        else ""
    )


def diff_html(a: Report, b: Report, result: DiffResult) -> str:
    """Two reports side by side by layer: the layers that failed in either first, then those that
    differ, then the rest collapsed with a count; the charts of both overlaid above them."""
    from kernodeck.layers import LAYER_ORDER

    by_layer: dict[str, list[Any]] = {}
    for group in result.groups.values():
        for d in group:
            by_layer.setdefault(d.layer, []).append(d)
    layers = list(dict.fromkeys([*layers_of(a), *layers_of(b), *by_layer]))
    layers.sort(key=lambda x: LAYER_ORDER.index(x) if x in LAYER_ORDER else len(LAYER_ORDER))
    failed = {str(s.layer) for r in (a, b) for s in r.steps if s.status is Status.FAILED}
    shown, folded = _ab_order(layers, failed, by_layer)
    badges = "".join(
        f'<li><a class="badge {"changed" if x in by_layer else "same"}" href="#layer-{_slug(x)}">'
        f"{_e(x)}: {'differs' if x in by_layer else 'same'}</a></li>"
        for x in layers
    )
    sections = [_ab_section(a, b, x, by_layer.get(x, []), x in failed) for x in shown]
    if folded:
        inner = "".join(_ab_section(a, b, x, [], False) for x in folded)
        sections.append(
            f'<details class="folded" id="same-layers"><summary>{len(folded)} layer'
            f"{'s' if len(folded) != 1 else ''} passed in A and B and the same: {_e(', '.join(folded))}"
            f"</summary>{inner}</details>"
        )
    notes = "".join(f"<p class='muted'>note: {_e(n)}</p>" for n in result.notes)
    if result.not_compared:
        notes += (
            f"<p class='muted'>not compared (skipped in A or B): {_e(', '.join(result.not_compared))}</p>"
        )
    if result.measurements:
        rows = "".join(
            f"<tr><td>{_e(m.layer)}/{_e(m.step)}</td><td>{_e(m.key)}</td>"
            f"<td class='mono'>{_e(_value(m.a))}</td><td class='mono'>{_e(_value(m.b))}</td></tr>"
            for m in result.measurements
        )
        notes += (
            "<details id='measurements'><summary>measurements (shown, never compared)</summary>"
            "<table><thead><tr><th>step</th><th>measured</th><th>A</th><th>B</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></details>"
        )
    cls = "ok" if result.identical else "failed"
    title = "kernodeck diff: identical" if result.identical else "kernodeck diff: differs"
    body = (
        f'<div class="ab"><header class="verdict {cls}" id="verdict"><h1>{_e(title)}</h1>'
        f'<span class="meta">{_e(result.summary)}</span></header>'
        f"<p>A: <code>{_e(result.a)}</code> ({_e(a.kind)}, {_e(counts_text(a.counts()))})<br>"
        f"B: <code>{_e(result.b)}</code> ({_e(b.kind)}, {_e(counts_text(b.counts()))})</p>"
        f'<ul class="badges" id="layers">{badges}</ul>{notes}{_charts_html(a, b)}'
        + "".join(sections)
        + "</div>"
    )
    return _page(title, body)


__all__ = [
    "Charts",
    "Unusable",
    "ab_charts",
    "charts",
    "diff_html",
    "extra_hint",
    "html_report",
    "package_rows",
    "require_matplotlib",
    "rows_svg",
    "trajectory_svg",
    "write_html",
]
