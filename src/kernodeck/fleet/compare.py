"""The fleet comparison rank 0 builds from the digests and the facts of the differing layers, and
the one report it prints: the ranks by node and host, per layer (in verify's layer order)
whether every rank passed and whether they agree, and for every layer the ranks disagree on a
table with one row per differing fact and one column per group of ranks that agree, so that it
fits 80 columns however many facts (distributions) differ. FLEET OK names the ranks' warnings.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from typing import IO, Any

from kernodeck.fleet.facts import Identity
from kernodeck.layers import VERIFY_LAYERS
from kernodeck.render.visible import visible

#: The width the fleet report fits.
WIDTH = 80
#: Below this many characters a column of values is unreadable: each fact is a list instead.
MIN_COLUMN = 12

FLEET_SCHEMA = "kernodeck-fleet/1"


def ranks_text(ranks: list[int]) -> str:
    """0,1,2,5 -> '0-2, 5'."""
    out: list[str] = []
    start = prev = None
    for r in sorted(ranks):
        if start is None:
            start = prev = r
        elif prev is not None and r == prev + 1:
            prev = r
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = r
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def compare(
    ident: Identity,
    digests: dict[int, dict[str, Any]],
    plan: dict[str, Any],
    fulls: dict[int, dict[str, Any]],
    missing: list[dict[str, Any]],
    ok: bool,
) -> dict[str, Any]:
    ids = {r: m["id"] for r, m in digests.items()}
    ranks = [
        {
            **ids[r],
            "ok": m["ok"],
            "summary": m["summary"],
            "first_error": m["first_error"],
        }
        for r, m in sorted(digests.items())
    ]
    layers = []
    for layer, groups in sorted(plan["groups"].items(), key=lambda kv: _layer_rank(kv[0])):
        status: dict[str, list[int]] = {}
        for r, m in sorted(digests.items()):
            status.setdefault(m["status"].get(layer, "not run"), []).append(r)
        entry: dict[str, Any] = {
            "layer": layer,
            "status": status,
            "agree": len(groups) == 1,
            "groups": groups,
            "differences": [],
        }
        if len(groups) > 1:
            entry.update(_disagreement(layer, groups, fulls, ids))
        layers.append(entry)
    nodes: dict[int, dict[str, Any]] = {}
    for r, i in sorted(ids.items()):
        n = nodes.setdefault(i["node"], {"node": i["node"], "hosts": [], "ranks": []})
        if i["host"] not in n["hosts"]:
            n["hosts"].append(i["host"])
        n["ranks"].append(r)
    out: dict[str, Any] = {
        "schema": FLEET_SCHEMA,
        "ok": ok,
        "world_size": ident.world_size,
        "nodes": [nodes[k] for k in sorted(nodes)],
        "ranks": ranks,
        "missing": sorted(missing, key=lambda m: m["rank"]),
        "layers": layers,
        "warnings": _warnings(digests),
        "warning_counts": {str(r): m["warnings"] for r, m in sorted(digests.items()) if m.get("warnings")},
    }
    if plan.get("reports"):
        out["reports"] = {str(r): f.get("report") for r, f in sorted(fulls.items())}
    return out


def _disagreement(
    layer: str, groups: list[dict[str, Any]], fulls: dict[int, dict[str, Any]], ids: dict[int, Any]
) -> dict[str, Any]:
    """The facts of a layer the groups of ranks differ on, and one row per group and place."""
    facts_of: list[dict[str, Any] | None] = []
    for g in groups:
        src = next((r for r in g["ranks"] if r in fulls and layer in fulls[r].get("facts", {})), None)
        facts_of.append(fulls[src]["facts"][layer] if src is not None else None)
    keys = sorted({k for f in facts_of if f for k in f})
    differing = [k for k in keys if len({repr(f.get(k)) if f is not None else "?" for f in facts_of}) > 1]
    rows = []
    for gi, (g, f) in enumerate(zip(groups, facts_of, strict=True)):
        by_place: dict[tuple[int, str], list[int]] = {}
        for r in g["ranks"]:
            by_place.setdefault((ids[r]["node"], ids[r]["host"]), []).append(r)
        for (node, host), rs in sorted(by_place.items()):
            rows.append(
                {
                    "group": gi,
                    "node": node,
                    "host": host,
                    "ranks": rs,
                    "majority": g["majority"],
                    "values": {k: (f.get(k) if f is not None else None) for k in differing},
                    "layer_not_run": g["digest"] == "-",
                }
            )
    return {"differences": [{"fact": k} for k in differing], "rows": rows}


def _layer_rank(layer: str) -> int:
    names = [la.value for la in VERIFY_LAYERS]
    return names.index(layer) if layer in names else len(names)


def _warnings(digests: dict[int, dict[str, Any]]) -> dict[str, list[int]]:
    """Layer -> the ranks whose steps in it warned, in layer order."""
    out: dict[str, list[int]] = {}
    for r, m in sorted(digests.items()):
        for layer, state in m.get("status", {}).items():
            if state == "warning":
                out.setdefault(layer, []).append(r)
    return dict(sorted(out.items(), key=lambda kv: _layer_rank(kv[0])))


def warnings_text(warnings: dict[str, list[int]]) -> str:
    """'warnings: packages on ranks 0-2, code on rank 3' ('' for none)."""
    if not warnings:
        return ""
    parts = [
        f"{layer} on rank{'s' if len(rs) > 1 else ''} {ranks_text(rs)}" for layer, rs in warnings.items()
    ]
    return "warnings: " + ", ".join(parts)


def warning_counts_text(counts: dict[str, int]) -> str:
    """'warnings: 2 on ranks 0-2, 3 on rank 3': the ranks grouped by their count of warned steps,
    the groups by their first rank ('' for none)."""
    by_count: dict[int, list[int]] = {}
    for r, n in counts.items():
        by_count.setdefault(n, []).append(int(r))
    groups = sorted((sorted(rs), n) for n, rs in by_count.items() if n)
    if not groups:
        return ""
    parts = [f"{n} on rank{'s' if len(rs) > 1 else ''} {ranks_text(rs)}" for rs, n in groups]
    return "warnings: " + ", ".join(parts)


def _warned_text(cmp: dict[str, Any]) -> str:
    """The ranks' warning counts; a comparison written before the counts (or by ranks that send
    none) names the layers that warned instead."""
    counts = cmp.get("warning_counts")
    if counts:
        return warning_counts_text(counts)
    return warnings_text(cmp.get("warnings") or {})


def summary_line(cmp: dict[str, Any]) -> str:
    n = cmp["world_size"]
    if cmp["ok"]:
        warned = _warned_text(cmp)
        return f"FLEET OK: {n} ranks passed and agree on every layer" + (f"; {warned}" if warned else "")
    parts = []
    if cmp["missing"]:
        parts.append("missing ranks " + ranks_text([m["rank"] for m in cmp["missing"]]))
    failed = [r["rank"] for r in cmp["ranks"] if not r["ok"]]
    if failed:
        parts.append("failed on ranks " + ranks_text(failed))
    differ = [la["layer"] for la in cmp["layers"] if not la["agree"]]
    if differ:
        parts.append("ranks disagree on " + ", ".join(differ))
    if cmp.get("plan"):
        parts.append(cmp["plan"])
    coll = cmp.get("collective") or {}
    if coll.get("status") == "failed":
        parts.append(f"{coll['backend']} all-reduce failed")
    return f"FLEET FAILED ({n} ranks): " + "; ".join(parts)


def _value(v: Any, limit: int = 72) -> str:
    text = "-" if v is None else str(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _table(w: Any, table: list[list[str]], indent: str = "") -> None:
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        w(indent + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() + "\n")


def _groups(la: dict[str, Any]) -> list[dict[str, Any]]:
    """The layer's rows merged per group of agreeing ranks: its ranks, places and values."""
    merged: dict[int, dict[str, Any]] = {}
    for row in la["rows"]:
        g = merged.setdefault(row.get("group", len(merged)), {**row, "ranks": [], "places": []})
        g["ranks"] += row["ranks"]
        g["places"].append(f"node {row['node']} ({row['host']})")
    return [merged[k] for k in sorted(merged)]


def _cell(g: dict[str, Any], fact: str) -> str:
    return "(not run)" if g["layer_not_run"] else _value(g["values"].get(fact), limit=10_000)


def _differences(w: Any, la: dict[str, Any]) -> None:
    """One row per differing fact, one column per group of ranks ('*': not the majority); when the
    groups are too many for 80 columns, each fact as a list of its values by group."""
    facts = [d["fact"] for d in la["differences"]]
    groups = _groups(la)
    w(f"\n{la['layer']}: {len(facts)} fact(s) differ between {len(groups)} groups of ranks\n")
    names = [("ranks " if len(g["ranks"]) > 1 else "rank ") + ranks_text(g["ranks"]) for g in groups]
    names = [n + ("" if g["majority"] else " *") for n, g in zip(names, groups, strict=True)]
    for name, g in zip(names, groups, strict=True):
        places = f"{name}: {', '.join(dict.fromkeys(g['places']))}"
        for line in textwrap.wrap(places, WIDTH - 2, subsequent_indent="    ", break_long_words=False):
            w(f"  {line}\n")
    fact_width = min(max([len("fact"), *(len(f) for f in facts)]), 28)
    column = (WIDTH - 2 - fact_width - 2 * len(groups)) // len(groups)
    if column < MIN_COLUMN:
        for f in facts:
            w(f"  {_value(f, WIDTH - 2)}\n")
            for name, g in zip(names, groups, strict=True):
                w(f"    {name}: {_value(_cell(g, f), WIDTH - 6 - len(name))}\n")
        return
    table = [["fact", *(_value(n, column) for n in names)]]
    for f in facts:
        table.append([_value(f, fact_width), *(_value(_cell(g, f), column) for g in groups)])
    _table(w, table, indent="  ")


def _visible_writer(out: IO[str]) -> Callable[[str], None]:
    """`out.write` with control characters made visible (hosts, errors and facts come from the ranks)."""

    def write(text: str) -> None:
        out.write(visible(text))

    return write


def _exchange_lines(w: Callable[[str], None], cmp: dict[str, Any]) -> None:
    ex = cmp.get("exchange")
    if not ex:
        return
    w(
        f"\nexchange: {ex['bytes']} bytes (digests {ex['digest_bytes']}, plan {ex['plan_bytes']} x "
        f"{len(cmp['ranks'])}, facts {ex['facts_bytes']} from {ex['ranks_sending_facts']} ranks), "
        f"{ex['seconds']} s ({ex['seconds_after_last_digest']} s after the last digest)\n"
    )
    if ex.get("environment_probes"):
        w(
            f"environment probes: {ex['environment_probes']} for {len(cmp['ranks'])} ranks (shared per host and interpreter)\n"
        )


def render(cmp: dict[str, Any], file: IO[str] | None = None) -> None:
    """The fleet report as plain text (one screen for a healthy fleet)."""
    w = _visible_writer(file if file is not None else sys.stdout)
    w(f"kernodeck fleet verify: {cmp['world_size']} ranks\n")
    for node in cmp["nodes"]:
        w(f"  node {node['node']} ({', '.join(node['hosts'])}): ranks {ranks_text(node['ranks'])}\n")
    for m in cmp["missing"]:
        where = f" on {m['host']}" if m.get("host") else ""
        w(f"  MISSING rank {m['rank']}{where}: {m['stage']}\n")
    rows = [["layer", "passed on all", "ranks agree"]]
    for la in cmp["layers"]:
        bad = {k: v for k, v in la["status"].items() if k in ("failed", "not run")}
        passed = "yes" if not bad else "; ".join(f"{k} on ranks {ranks_text(v)}" for k, v in bad.items())
        agree = "yes" if la["agree"] else f"no ({len(la['groups'])} groups)"
        rows.append([la["layer"], passed, agree])
    w("\n")
    _table(w, rows)
    for la in cmp["layers"]:
        if not la["agree"]:
            _differences(w, la)
    errs = [r for r in cmp["ranks"] if r["first_error"]]
    if errs:
        w("\nfirst error by rank\n")
        for r in errs:
            w(f"  rank {r['rank']} ({r['host']}): {r['first_error']}\n")
    _exchange_lines(w, cmp)
    if cmp.get("collective"):
        c = cmp["collective"]
        w(
            f"{c['backend']} all-reduce: {c.get('status')}"
            + (f", {c['detail']}" if c.get("detail") else "")
            + "\n"
        )
    w("\n" + summary_line(cmp) + "\n")
