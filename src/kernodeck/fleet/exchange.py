"""The fleet exchange over the torch.distributed key-value store, with a deadline on every wait.

Every rank writes `join/<rank>` when it starts and `digest/<rank>` (its per-layer digests, a few
hundred bytes) when its verify ends. Rank 0 waits for all digests until the deadline, names the
ranks that never wrote one (and whether they had joined), finds per layer the majority digest, and
publishes one `plan`: the verdict, the missing ranks, and which ranks must send the full facts of
which layers — the ranks outside the majority, plus one representative of the majority. Those
ranks write `full/<rank>`; rank 0 builds the comparison from them. Bytes on the wire: N digests +
N reads of the plan + the facts of the differing layers, so O(ranks x digest + differences), never
O(ranks x inventory) (`--json` asks every rank for its whole report, on purpose).

Explicit per-rank keys make a missing rank nameable: a rank that crashed, was killed or never
started leaves its key absent, and every wait ends at the deadline instead of hanging in a
collective. The store is the one the job already has: an initialised process group's store
(nothing is created then), else a TCPStore client of the torchrun agent's store (MASTER_ADDR:
MASTER_PORT), or, without an agent (srun), a TCPStore that rank 0 hosts, as `env://` does.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kernodeck.errors import UsageError
from kernodeck.fleet.facts import Identity, canonical, digest, layer_facts, layer_status
from kernodeck.report import Report, Status

_calls = 0  # exchanges started by this process: each one gets its own key prefix


def group_initialized() -> bool:
    """Whether torch.distributed has a default process group (without importing torch when the
    program has not)."""
    import sys

    if "torch" not in sys.modules:
        return False
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized())


def _prefix() -> str:
    global _calls
    _calls += 1
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"kernodeck-fleet/{run}/{restart}/{_calls}/"


class Channel:
    """A prefixed view of a c10d store that counts the payload bytes this rank moves."""

    def __init__(self, store: Any, prefix: str) -> None:
        from torch._C._distributed_c10d import PrefixStore

        self.store = PrefixStore(prefix, store)
        self.sent = 0
        self.received = 0

    def put(self, key: str, value: Any) -> int:
        data = canonical(value)
        self.store.set(key, data)  # type: ignore[arg-type]  # bytes are accepted
        self.sent += len(data)
        return len(data)

    def bump(self, key: str) -> None:
        self.store.add(key, 1)

    def count(self, key: str) -> int:
        return int(self.store.add(key, 0))

    def has(self, key: str) -> bool:
        return bool(self.store.check([key]))

    def get_many(self, keys: list[str]) -> list[Any]:
        if not keys:
            return []
        raw = self.store.multi_get(keys)
        self.received += sum(len(r) for r in raw)
        return [json.loads(bytes(r)) for r in raw]

    def wait_count(self, key: str, target: int, deadline: float) -> bool:
        """Poll a counter until it reaches target or the deadline passes."""
        pause = 0.02
        while True:
            if self.count(key) >= target:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 1.5, 0.25)

    def wait_key(self, key: str, deadline: float) -> bool:
        pause = 0.02
        while True:
            if self.has(key):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 1.5, 0.25)


def open_store(ident: Identity, timeout: float) -> Any:
    """The store of the initialised process group, else the job's rendezvous store (env://)."""
    if group_initialized():
        from torch.distributed import distributed_c10d

        return distributed_c10d._get_default_store()
    addr = os.environ.get("MASTER_ADDR")
    port = os.environ.get("MASTER_PORT")
    if not addr or not port:
        raise UsageError(
            "--fleet needs MASTER_ADDR and MASTER_PORT",
            hint="start it with torchrun, or set them (and RANK, WORLD_SIZE) for srun",
        )
    from torch._C._distributed_c10d import TCPStore

    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    try:
        return TCPStore(
            addr,
            int(port),
            world_size=ident.world_size,
            is_master=ident.rank == 0 and not agent,
            timeout=timedelta(seconds=timeout),
            wait_for_workers=False,
            multi_tenant=True,
        )
    except Exception as e:  # DistNetworkError, RuntimeError: the store is not there
        host = "the torchrun agent of node 0" if agent else "rank 0"
        raise StoreUnreachable(
            f"cannot reach the rendezvous store at {addr}:{port} (hosted by {host}) within {timeout:g} s: "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None


class StoreUnreachable(Exception):
    pass


def summary_of(ident: Identity, report: Report | None, error: str | None) -> dict[str, Any]:
    """The digest message of one rank: identity, verdict, first error, per-layer status and digest."""
    msg: dict[str, Any] = {"id": ident.to_json()}
    if report is None:
        msg.update(ok=False, summary=f"verify raised: {error}", first_error=error, status={}, digests={})
        return msg
    facts = layer_facts(report)
    first = next((s for s in report.steps if s.status is Status.FAILED and s.required), None)
    msg.update(
        ok=report.ok,
        summary=report.summary(),
        first_error=f"{first.layer}/{first.name}: {first.error}" if first else None,
        status={layer: layer_status(report, layer) for layer in facts},
        digests={layer: digest(f) for layer, f in facts.items()},
    )
    return msg


@dataclass
class Outcome:
    """What one rank knows at the end of the exchange; `comparison` only on rank 0."""

    ok: bool
    rank: int
    missing: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    comparison: dict[str, Any] | None = None


def _plan(digests: dict[int, dict[str, Any]], want_reports: bool) -> dict[str, Any]:
    layers: list[str] = []
    for msg in digests.values():
        layers += [la for la in msg["digests"] if la not in layers]
    send: dict[int, list[str]] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for layer in layers:
        by: dict[str, list[int]] = {}
        for r in sorted(digests):
            by.setdefault(digests[r]["digests"].get(layer, "-"), []).append(r)
        count = Counter({d: len(rs) for d, rs in by.items()})
        majority = max(by, key=lambda d: (count[d], -by[d][0]))
        ordered = sorted(by.items(), key=lambda kv: (kv[0] != majority, kv[1][0]))
        groups[layer] = [{"digest": d, "ranks": rs, "majority": d == majority} for d, rs in ordered]
        if len(by) > 1:
            for d, rs in by.items():
                for r in rs if d != majority else rs[:1]:
                    if d != "-":
                        send.setdefault(r, []).append(layer)
    return {"send": {str(r): v for r, v in sorted(send.items())}, "groups": groups, "reports": want_reports}


def exchange(
    ident: Identity,
    store: Any,
    report: Report | None,
    error: str | None,
    *,
    timeout: float,
    want_reports: bool = False,
    prefix: str | None = None,
    joined: Channel | None = None,
) -> Outcome:
    """Run the exchange for this rank; never blocks past `timeout` seconds per wait."""
    ch = joined if joined is not None else join(ident, store, prefix)
    started = time.monotonic()
    n = ident.world_size
    mine = summary_of(ident, report, error)
    ch.put(f"digest/{ident.rank}", mine)
    ch.bump("n:digest")

    if ident.rank != 0:
        if not ch.wait_key("plan", time.monotonic() + timeout):
            missing = [_missing(ch, r) for r in range(n) if not ch.has(f"digest/{r}")]
            if not any(m["rank"] == 0 for m in missing):
                missing.append(
                    {"rank": 0, "joined": True, "stage": "alive, but did not publish the fleet plan in time"}
                )
            return Outcome(False, ident.rank, missing, _missing_text(missing, timeout))
        (plan,) = ch.get_many(["plan"])
        req = plan["send"].get(str(ident.rank), [] if plan["reports"] else None)
        if req is not None and report is not None:
            facts = layer_facts(report)
            body: dict[str, Any] = {"facts": {la: facts.get(la, {}) for la in req}}
            if plan["reports"]:
                body["report"] = json.loads(report.to_json())
            ch.put(f"full/{ident.rank}", body)
        elif req is not None:
            ch.put(f"full/{ident.rank}", {"facts": {}, "report": None})
        ch.bump("n:ack")
        return Outcome(bool(plan["ok"]), ident.rank, plan["missing"], plan["message"])

    # rank 0: collect, plan, compare. It names the missing ranks at 0.8 x timeout, so that its plan
    # reaches the others before their own deadline (they wait the whole timeout for it).
    deadline = time.monotonic() + 0.8 * timeout
    everyone = ch.wait_count("n:digest", n, deadline)
    all_in = time.monotonic()
    # one request per rank only when some are missing, to name them
    present = list(range(n)) if everyone else [r for r in range(n) if r == 0 or ch.has(f"digest/{r}")]
    missing = [_missing(ch, r) for r in range(n) if r not in present]
    digests = dict(zip(present, ch.get_many([f"digest/{r}" for r in present]), strict=True))
    plan = _plan(digests, want_reports)
    agree = all(len(g) == 1 for g in plan["groups"].values())
    ok = not missing and agree and all(m["ok"] for m in digests.values())
    message = _missing_text(missing, timeout) if missing else ""
    plan.update(ok=ok, missing=missing, message=message)
    # what the other ranks read: O(differences), never a list of every rank
    plan_bytes = ch.put("plan", {k: plan[k] for k in ("ok", "missing", "message", "send", "reports")})

    fulls: dict[int, dict[str, Any]] = {}
    senders = sorted({int(r) for r in plan["send"]} | (set(present) if want_reports else set()))
    if 0 in senders:
        facts = layer_facts(report) if report is not None else {}
        fulls[0] = {"facts": {la: facts.get(la, {}) for la in plan["send"].get("0", [])}}
        if want_reports:
            fulls[0]["report"] = json.loads(report.to_json()) if report is not None else None
    others = [r for r in senders if r != 0]
    deadline = time.monotonic() + timeout
    got = [r for r in others if ch.wait_key(f"full/{r}", deadline)]
    fulls.update(zip(got, ch.get_many([f"full/{r}" for r in got]), strict=True))
    late = [r for r in others if r not in got]
    for r in late:
        missing.append({"rank": r, "joined": True, "stage": "sent its digest, then stopped before its facts"})
    if late:
        ok = False
        message = _missing_text(missing, timeout)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" and not group_initialized():
        # rank 0 hosts the store (srun): it stays up until every rank has read the plan
        ch.wait_count("n:ack", len(present) - 1, time.monotonic() + timeout)

    from kernodeck.fleet.compare import compare

    full_bytes = sum(len(canonical(f)) for r, f in fulls.items() if r != 0)
    digest_bytes = sum(len(canonical(m)) for m in digests.values())
    join_bytes = len(canonical({"id": ident.to_json()})) * len(present)
    comparison = compare(ident, digests, plan, fulls, missing, ok)
    comparison["exchange"] = {
        "bytes": join_bytes + digest_bytes + plan_bytes * len(present) + full_bytes,
        "digest_bytes": digest_bytes,
        "plan_bytes": plan_bytes,
        "facts_bytes": full_bytes,
        "ranks_sending_facts": len(senders),
        "seconds": round(time.monotonic() - started, 3),
        "seconds_after_last_digest": round(time.monotonic() - all_in, 3),
        "environment_probes": ch.count("n:probe-runs"),
    }
    return Outcome(ok, 0, missing, message, comparison)


def join(ident: Identity, store: Any, prefix: str | None = None) -> Channel:
    """Announce this rank (before its verify), so that a rank that stops later is told apart from
    one that never started."""
    ch = Channel(store, prefix or _prefix())
    ch.put(f"join/{ident.rank}", {"id": ident.to_json()})
    return ch


def _missing(ch: Channel, r: int) -> dict[str, Any]:
    if ch.has(f"join/{r}"):
        (j,) = ch.get_many([f"join/{r}"])
        return {
            "rank": r,
            "joined": True,
            "host": j["id"]["host"],
            "node": j["id"]["node"],
            "stage": "joined, then stopped during its verify (crashed or killed)",
        }
    return {"rank": r, "joined": False, "stage": "never joined"}


def _missing_text(missing: list[dict[str, Any]], timeout: float) -> str:
    parts = []
    for m in sorted(missing, key=lambda m: m["rank"]):
        where = f" on {m['host']}" if m.get("host") else ""
        parts.append(f"rank {m['rank']}{where} ({m['stage']})")
    return f"missing after {timeout:g} s: " + "; ".join(parts)
