"""The fleet comparison and its text report (kernodeck.fleet.compare): differing facts as rows,
groups of ranks as columns, layers in verify's order, 80 columns whatever differs."""

from __future__ import annotations

import io
from typing import Any

from kernodeck.fleet.compare import compare, render, summary_line
from kernodeck.fleet.facts import Identity
from kernodeck.layers import VERIFY_LAYERS


def _digests(n: int, status: dict[int, dict[str, str]]) -> dict[int, dict[str, Any]]:
    return {
        r: {
            "id": {"rank": r, "node": r // 4, "host": f"gpu-node-{r // 4:02d}.cluster.example"},
            "ok": "failed" not in status[r].values(),
            "summary": "",
            "first_error": None,
            "status": status[r],
        }
        for r in range(n)
    }


def _dists(n: int, **changed: str) -> dict[str, Any]:
    facts: dict[str, Any] = {f"dist:package-with-a-long-name-{i:03d}": f"1.{i}.0" for i in range(n)}
    facts.update(changed)
    return facts


def _fleet(groups: list[list[int]], facts_of: list[dict[str, Any]]) -> dict[str, Any]:
    """A fleet whose packages layer splits into `groups` (the first the majority); the other layers agree."""
    n = sum(len(g) for g in groups)
    layers = ["packages", "data", "interpreter", "code"]  # not verify's order
    status = {r: dict.fromkeys(layers, "passed") for r in range(n)}
    plan_groups: dict[str, list[dict[str, Any]]] = {
        la: [{"digest": "d", "ranks": list(range(n)), "majority": True}] for la in layers
    }
    plan_groups["packages"] = [
        {"digest": f"d{i}", "ranks": g, "majority": i == 0} for i, g in enumerate(groups)
    ]
    fulls = {g[0]: {"facts": {"packages": f}} for g, f in zip(groups, facts_of, strict=True)}
    ident = Identity(rank=0, world_size=n, local_rank=0, node=0, host="h")
    return compare(ident, _digests(n, status), {"groups": plan_groups}, fulls, [], ok=False)


def _text(cmp: dict[str, Any]) -> str:
    out = io.StringIO()
    render(cmp, out)
    return out.getvalue()


def test_one_package_on_one_rank_is_one_row_and_fits_80_columns() -> None:
    base = _dists(300)
    base["dist:torch"] = "2.5.1+cu124"
    cmp = _fleet([[0, 1, 2, 4, 5, 6, 7], [3]], [base, _dists(300, **{"dist:torch": "2.6.0+cu126"})])
    text = _text(cmp)
    assert max(len(ln) for ln in text.splitlines()) <= 80, text
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.lstrip().startswith("fact "))
    assert header.split() == ["fact", "ranks", "0-2,", "4-7", "rank", "3", "*"]
    (row,) = [ln for ln in lines if "dist:torch" in ln]
    assert row.split() == ["dist:torch", "2.5.1+cu124", "2.6.0+cu126"]
    assert "  rank 3 *: node 0 (gpu-node-00.cluster.example)" in lines


def test_three_hundred_differing_distributions_stay_within_80_columns() -> None:
    cmp = _fleet([[0, 1], [2], [3]], [_dists(300), _dists(0), _dists(300, **{"dist:numpy": "2.0"})])
    text = _text(cmp)
    assert max(len(ln) for ln in text.splitlines()) <= 80
    assert "packages: 301 fact(s) differ between 3 groups of ranks" in text
    assert sum("dist:package-with-a-long-" in ln for ln in text.splitlines()) == 300


def test_many_groups_fall_back_to_a_list_per_fact_within_80_columns() -> None:
    groups = [[i] for i in range(9)]
    facts = [{"dist:torch": f"2.{i}.0+cu126-with-a-long-local-version-label"} for i in range(9)]
    text = _text(_fleet(groups, facts))
    assert max(len(ln) for ln in text.splitlines()) <= 80
    lines = text.splitlines()
    start = lines.index("  dist:torch")
    assert [ln.split(":")[0].strip() for ln in lines[start + 1 : start + 10]] == [
        "rank 0",
        *(f"rank {i} *" for i in range(1, 9)),
    ]


def test_layers_are_in_verify_order() -> None:
    cmp = _fleet([[0, 1], [2]], [_dists(2), _dists(3)])
    order = [la.value for la in VERIFY_LAYERS]
    got = [la["layer"] for la in cmp["layers"]]
    assert got == sorted(got, key=order.index) and got[0] == "code"
    table = [ln.split()[0] for ln in _text(cmp).splitlines() if ln.split() and ln.split()[0] in order]
    assert table[:4] == got


def test_fleet_ok_names_the_ranks_warnings() -> None:
    status = {
        r: {"code": "warning" if r < 3 else "passed", "packages": "warning" if r == 3 else "passed"}
        for r in range(4)
    }
    plan = {
        "groups": {
            la: [{"digest": "d", "ranks": [0, 1, 2, 3], "majority": True}] for la in ("packages", "code")
        }
    }
    ident = Identity(rank=0, world_size=4, local_rank=0, node=0, host="h")
    cmp = compare(ident, _digests(4, status), plan, {}, [], ok=True)
    assert summary_line(cmp) == (
        "FLEET OK: 4 ranks passed and agree on every layer; warnings: code on ranks 0-2, packages on rank 3"
    )
    clean = compare(ident, _digests(4, {r: {"code": "passed"} for r in range(4)}), plan, {}, [], ok=True)
    assert summary_line(clean) == "FLEET OK: 4 ranks passed and agree on every layer"


def test_fleet_ok_gives_the_ranks_warning_counts() -> None:
    status = {r: {"code": "warning", "packages": "warning" if r == 3 else "passed"} for r in range(5)}
    digests = _digests(5, status)
    for r, n in enumerate([2, 2, 2, 3, 0]):
        digests[r]["warnings"] = n
    plan = {"groups": {"code": [{"digest": "d", "ranks": list(range(5)), "majority": True}]}}
    ident = Identity(rank=0, world_size=5, local_rank=0, node=0, host="h")
    cmp = compare(ident, digests, plan, {}, [], ok=True)
    assert cmp["warning_counts"] == {"0": 2, "1": 2, "2": 2, "3": 3}
    assert summary_line(cmp) == (
        "FLEET OK: 5 ranks passed and agree on every layer; warnings: 2 on ranks 0-2, 3 on rank 3"
    )
