"""The HTML page of a variance run (`kernodeck report .kernodeck/variance/<id>/`).

Per output: what each condition did, the current criterion's margin, the proposal, and a chart of
the distribution of each row's largest deviation per condition (against the reference when the
output has one, else against the baseline's first run) with the tolerance band and the proposed
tolerance. Text in charts is drawn as itself: a `$` in a name is escaped, never starts mathtext.
The page is self-contained like every Kernodeck report (`render.html`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kernodeck.errors import UsageError
from kernodeck.render.html import _e, _figure, _page, _rc, _svg, require_matplotlib

DATA = "variance.json"


def variance_file(path: Path) -> Path | None:
    """The variance.json a `kernodeck report` argument names (the folder or the file), or None
    when it is something else (a verify, check or rebuild report)."""
    if path.is_dir() and (path / DATA).is_file():
        return path / DATA
    if path.name == DATA and path.is_file():
        return path
    return None


def load_variance(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    if (
        not isinstance(data, dict)
        or data.get("kind") != "variance"
        or not isinstance(data.get("outputs"), list)
    ):
        raise UsageError(
            f"{path} is not a variance run's {DATA}", hint="run `kernodeck check --repeat N` to make one"
        )
    return data


def variance_html(data: dict[str, Any], source: str = DATA) -> str:
    require_matplotlib()
    try:
        sections = "".join(_output_section(o, i) for i, o in enumerate(data["outputs"]))
        head = _head(data)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise UsageError(f"{source} is malformed: {type(e).__name__}: {e}") from None
    title = "kernodeck variance"
    return _page(title, f'<header class="verdict" id="verdict"><h1>{_e(title)}</h1>{head}</header>{sections}')


def _head(data: dict[str, Any]) -> str:
    runs = data.get("runs", [])
    failed = [r for r in runs if isinstance(r, dict) and not r.get("ok")]
    conds = ", ".join(str(c) for c in data.get("conditions", []))
    text = f"{len(runs)} runs, {int(data.get('repeats', 0))} repeat(s) per condition; conditions: {conds}"
    if failed:
        text += f"; {len(failed)} run(s) did not run to the end"
    return f'<span class="meta">{_e(text)}</span>'


def _output_section(o: dict[str, Any], index: int) -> str:
    name = f"{o['check']}/{o['output']}"
    rows = "".join(
        f"<tr><td>{_e(c['condition'])}</td><td>{_e(c.get('effect', ''))}</td><td>{_e(_quantiles(c))}</td></tr>"
        for c in o.get("conditions", [])
    )
    margins = "".join(f"<li>{_e(m)}</li>" for m in o.get("margins", []))
    proposal = o.get("proposal") or {}
    warn = f'<p class="failed">{_e(o["uncovered"])}</p>' if o.get("uncovered") else ""
    svg = distribution_svg(o)
    chart = (
        f'<figure class="chart" id="chart-{index}">{svg}<figcaption>{_e(name)}</figcaption></figure>'
        if svg
        else ""
    )
    return (
        f'<section id="output-{index}"><h2>{_e(name)} <span class="muted">({_e(o.get("kind", ""))})</span></h2>'
        f"<table><tr><th>condition</th><th>effect</th><th>|run - baseline| p50 / p99</th></tr>{rows}</table>"
        f"<ul>{margins}<li>{_e(proposal.get('text', ''))}</li></ul>{warn}{chart}</section>"
    )


def _quantiles(c: dict[str, Any]) -> str:
    d = c.get("vs-baseline") or c.get("repeats") or {}
    if "p50-abs" not in d:
        return ""
    return f"{float(d['p50-abs']):.2g} / {float(d['p99-abs']):.2g}"


def _tolerance(o: dict[str, Any]) -> float | None:
    atol = (o.get("criteria") or {}).get("atol")
    return float(atol) if isinstance(atol, int | float) and not isinstance(atol, bool) else None


def distribution_svg(o: dict[str, Any]) -> str | None:
    """Each condition's per-row largest deviation as a strip of points, the declared tolerance as
    a band, the proposed atol as a dashed line; None when the output holds no series."""
    chart = o.get("chart")
    if not isinstance(chart, dict) or not chart.get("series"):
        return None
    series = chart["series"]
    atol = _tolerance(o)
    proposed = ((o.get("proposal") or {}).get("values") or {}).get("atol")
    with _rc():
        fig = _figure(height=2.8)
        ax = fig.subplots()
        top = 0.0
        for i, s in enumerate(series):
            ys = [float(v) for v in s["abs"]]
            xs = [i + (j % 7 - 3) * 0.04 for j in range(len(ys))]
            over = [atol is not None and y > atol for y in ys]
            ax.scatter(xs, ys, s=12, c=["#cf222e" if b else "#0969da" for b in over], zorder=3)
            top = max([top, *[y for y in ys if math.isfinite(y)]])
        if atol is not None:
            ax.axhspan(
                0, atol, color="#2da44e", alpha=0.2, linewidth=0, label=_plain(f"tolerance: atol {atol:g}")
            )
            top = max(top, atol)
        if isinstance(proposed, int | float) and proposed > 0:
            top = max(top, float(proposed))
            ax.axhline(
                float(proposed),
                color="#9a6700",
                linestyle="--",
                linewidth=1,
                label=f"proposed atol {proposed:g}",
            )
        positive = [float(v) for s in series for v in s["abs"] if float(v) > 0]
        ax.set_yscale("symlog", linthresh=min(positive) if positive else (atol or 1.0))
        ax.set_ylim(0, top * 1.5 if top > 0 else 1.0)
        labels = [_plain(str(s["condition"]).split(" (", 1)[0]) for s in series]
        ax.set_xticks(range(len(series)), labels, rotation=15, ha="right")
        ax.set_ylabel(_plain(f"max |run - {chart.get('against', 'anchor')}| per row"))
        ax.set_title(_plain(f"{o['check']}/{o['output']}: {_margin_title(o)}"), fontsize=10)
        if atol is not None or proposed:
            ax.legend(loc="best", fontsize=8, framealpha=0.85)
        return _svg(fig)


def _margin_title(o: dict[str, Any]) -> str:
    used = (o.get("used") or {}).get("tolerance")
    if isinstance(used, int | float) and not isinstance(used, bool) and math.isfinite(used):
        return f"worst run at {used * 100:.3g} % of the tolerance"
    return "deviation per row"


def _plain(text: str) -> str:
    """`text` drawn as itself: a `$` is escaped so that it never starts mathtext."""
    return text.replace("$", r"\$")


__all__ = ["distribution_svg", "load_variance", "variance_file", "variance_html"]
