"""The fleet comparison rank 0 builds from the digests and the facts of the differing layers, and
the one report it prints: the ranks by node and host, per layer whether every rank passed and
whether they agree, and for every fact that differs a table by node, host and rank."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any

from kernodeck.fleet.facts import Identity
from kernodeck.render.visible import visible

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
    for layer, groups in plan["groups"].items():
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
            facts_of: list[dict[str, Any] | None] = []
            for g in groups:
                src = next((r for r in g["ranks"] if r in fulls and layer in fulls[r].get("facts", {})), None)
                facts_of.append(fulls[src]["facts"][layer] if src is not None else None)
            keys = sorted({k for f in facts_of if f for k in f})
            differing = [
                k for k in keys if len({repr(f.get(k)) if f is not None else "?" for f in facts_of}) > 1
            ]
            rows = []
            for g, f in zip(groups, facts_of, strict=True):
                by_place: dict[tuple[int, str], list[int]] = {}
                for r in g["ranks"]:
                    by_place.setdefault((ids[r]["node"], ids[r]["host"]), []).append(r)
                for (node, host), rs in sorted(by_place.items()):
                    rows.append(
                        {
                            "node": node,
                            "host": host,
                            "ranks": rs,
                            "majority": g["majority"],
                            "values": {k: (f.get(k) if f is not None else None) for k in differing},
                            "layer_not_run": g["digest"] == "-",
                        }
                    )
            entry["differences"] = [{"fact": k} for k in differing]
            entry["rows"] = rows
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
    }
    if plan.get("reports"):
        out["reports"] = {str(r): f.get("report") for r, f in sorted(fulls.items())}
    return out


def summary_line(cmp: dict[str, Any]) -> str:
    n = cmp["world_size"]
    if cmp["ok"]:
        return f"FLEET OK: {n} ranks passed and agree on every layer"
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
        if la["agree"]:
            continue
        facts = [d["fact"] for d in la["differences"]]
        w(f"\n{la['layer']}: {len(facts)} fact(s) differ\n")
        header = ["node", "host", "ranks", *facts]
        table = [header]
        for row in la["rows"]:
            mark = "" if row["majority"] else " *"
            table.append(
                [
                    str(row["node"]),
                    row["host"],
                    ranks_text(row["ranks"]) + mark,
                    *(("(not run)" if row["layer_not_run"] else _value(row["values"].get(f))) for f in facts),
                ]
            )
        _table(w, table, indent="  ")
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
