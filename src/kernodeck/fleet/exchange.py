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
collective. While a rank verifies, a thread bumps its `alive/<rank>` counter every beat (a
twentieth of the timeout, at most a second), so a rank that is missing is told apart: alive but
hanging (its counter still moves) or stopped (crashed, killed or frozen: it no longer moves).

Only rank 0 writes the plan: it writes it only where no plan is (compare-and-set), every other
rank records a digest of the plan it read (`read/<rank>`), and rank 0 checks at the end that the
plan is still its own. A plan another process wrote fails the fleet with that said, and a rank
that followed such a plan is never blamed for the facts it was not asked for.

The store is the one the job already has: an initialised process group's store (nothing is
created then), else a TCPStore client of the torchrun agent's store (MASTER_ADDR: MASTER_PORT),
or, without an agent (srun), a TCPStore that rank 0 hosts, as `env://` does.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
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
        self._beating: threading.Event | None = None

    def start_heartbeat(self, rank: int, beat: float) -> None:
        """Bump `alive/<rank>` every `beat` seconds, on a daemon thread, until stopped."""
        stop = threading.Event()
        self._beating = stop

        def run() -> None:
            while True:
                try:
                    self.store.add(f"alive/{rank}", 1)
                except Exception:  # the store went away: nobody is left to tell
                    return
                if stop.wait(beat):
                    return

        threading.Thread(target=run, name=f"kernodeck-fleet-heartbeat-{rank}", daemon=True).start()

    def stop_heartbeat(self) -> None:
        if self._beating is not None:
            self._beating.set()

    def get_bytes(self, key: str) -> bytes:
        data = bytes(self.store.get(key))
        self.received += len(data)
        return data

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


def beat_interval(timeout: float) -> float:
    """How often a rank says it is alive: a twentieth of the timeout, at most a second."""
    return min(1.0, timeout / 20)


#: Beats without a bump after which a rank is taken for stopped.
SILENT_BEATS = 3


def summary_of(ident: Identity, report: Report | None, error: str | None) -> dict[str, Any]:
    """The digest message of one rank: identity, verdict, first error, its count of warned steps,
    per-layer status and digest."""
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
        warnings=report.counts()[Status.WARNING.value],
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
    ch = joined if joined is not None else join(ident, store, prefix, timeout=timeout)
    try:
        started = time.monotonic()
        ch.put(f"digest/{ident.rank}", summary_of(ident, report, error))
        ch.bump("n:digest")
        if ident.rank != 0:
            return _follow(ident, ch, report, timeout)
        return _lead(ident, ch, report, timeout, want_reports, started)
    finally:
        ch.stop_heartbeat()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


#: What a rank says when the plan it read is not one rank 0 writes.
NOT_A_PLAN = "the fleet plan in the job's store is not one rank 0 wrote (another process wrote that key)"


def _follow(ident: Identity, ch: Channel, report: Report | None, timeout: float) -> Outcome:
    """A rank other than 0: wait for the plan, send the facts it asks for."""
    beat = beat_interval(timeout)
    if not ch.wait_key("plan", time.monotonic() + timeout):
        absent = [r for r in range(ident.world_size) if not ch.has(f"digest/{r}")]
        zero_sent = 0 not in absent
        if zero_sent:
            absent.insert(0, 0)  # rank 0 sent its digest, and no plan came
        alive = _alive(ch, absent, beat)
        missing = [_missing(ch, r, r in alive, beat, after_digest=r == 0 and zero_sent) for r in absent]
        return Outcome(False, ident.rank, missing, _missing_text(missing, timeout))
    raw = ch.get_bytes("plan")
    ch.put(f"read/{ident.rank}", _sha(raw))
    plan = _parse_plan(raw)
    if plan is None:
        return Outcome(False, ident.rank, [], NOT_A_PLAN)
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


def _parse_plan(raw: bytes) -> dict[str, Any] | None:
    """The plan rank 0 publishes, or None when the bytes are not one."""
    try:
        plan = json.loads(raw)
    except ValueError:
        return None
    shape = {"ok": bool, "missing": list, "message": str, "send": dict, "reports": bool}
    if not isinstance(plan, dict) or any(not isinstance(plan.get(k), t) for k, t in shape.items()):
        return None
    return plan


def _lead(
    ident: Identity, ch: Channel, report: Report | None, timeout: float, want_reports: bool, started: float
) -> Outcome:
    """Rank 0: collect, plan, compare. It names the missing ranks at 0.8 x timeout, so that its
    plan reaches the others before their own deadline (they wait the whole timeout for it)."""
    n = ident.world_size
    beat = beat_interval(timeout)
    deadline = time.monotonic() + 0.8 * timeout - SILENT_BEATS * beat
    everyone = ch.wait_count("n:digest", n, deadline)
    all_in = time.monotonic()
    # one request per rank only when some are missing, to name them
    absent = [] if everyone else [r for r in range(1, n) if not ch.has(f"digest/{r}")]
    alive = _alive(ch, absent, beat)
    absent = [r for r in absent if not ch.has(f"digest/{r}")]  # a digest may come while we look
    missing = [_missing(ch, r, r in alive, beat) for r in absent]
    present = [r for r in range(n) if r not in absent]
    digests = dict(zip(present, ch.get_many([f"digest/{r}" for r in present]), strict=True))
    plan = _plan(digests, want_reports)
    agree = all(len(g) == 1 for g in plan["groups"].values())
    ok = not missing and agree and all(m["ok"] for m in digests.values())
    plan.update(ok=ok, missing=missing, message=verdict_text(digests, plan["groups"], missing, timeout))
    # what the other ranks read: O(differences), never a list of every rank
    mine = canonical({k: plan[k] for k in ("ok", "missing", "message", "send", "reports")})
    foreign = _publish(ch, mine)

    fulls = _own_facts(report, plan, want_reports)
    senders = sorted({int(r) for r in plan["send"]} | (set(present) if want_reports else set()))
    late, misled = _collect_facts(ch, [r for r in senders if r != 0], fulls, mine, timeout)
    late_alive = _alive(ch, late, beat)
    missing += [_late(ch, r, r in late_alive, beat) for r in late]
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True" and not group_initialized():
        # rank 0 hosts the store (srun): it stays up until every rank has read the plan
        ch.wait_count("n:ack", len(present) - 1, time.monotonic() + timeout)
    foreign = foreign or ch.get_bytes("plan") != mine  # still ours at the end?
    ok = ok and not late and not misled and not foreign
    message = verdict_text(digests, plan["groups"], missing, timeout)
    if foreign:
        message = "; ".join(filter(None, [message, _foreign_text(misled)]))

    from kernodeck.fleet.compare import compare

    comparison = compare(ident, digests, plan, fulls, missing, ok)
    if foreign:
        comparison["plan"] = _foreign_text(misled)
    comparison["exchange"] = _exchange_stats(
        ident, ch, digests, fulls, len(mine), len(senders), started, all_in
    )
    return Outcome(ok, 0, missing, message, comparison)


def _publish(ch: Channel, mine: bytes) -> bool:
    """Write rank 0's plan where no plan is; True when another process had written one (it is
    replaced, so that the ranks still to read it read rank 0's)."""
    current = bytes(ch.store.compare_set("plan", "", mine))  # type: ignore[arg-type]  # bytes are accepted
    ch.sent += len(mine)
    if current == mine:
        return False
    ch.store.set("plan", mine)  # type: ignore[arg-type]  # bytes are accepted
    return True


def _own_facts(report: Report | None, plan: dict[str, Any], want_reports: bool) -> dict[int, dict[str, Any]]:
    fulls: dict[int, dict[str, Any]] = {}
    if "0" in plan["send"] or want_reports:
        facts = layer_facts(report) if report is not None else {}
        fulls[0] = {"facts": {la: facts.get(la, {}) for la in plan["send"].get("0", [])}}
        if want_reports:
            fulls[0]["report"] = json.loads(report.to_json()) if report is not None else None
    return fulls


def _collect_facts(
    ch: Channel, others: list[int], fulls: dict[int, dict[str, Any]], mine: bytes, timeout: float
) -> tuple[list[int], list[int]]:
    """The facts the plan asked `others` for, into `fulls`: (the ranks that sent none in time,
    the ranks that read another plan than rank 0's and so were never asked)."""
    deadline = time.monotonic() + timeout
    pending, misled = list(others), []
    pause = 0.02
    while pending:
        for r in list(pending):
            if ch.has(f"full/{r}"):
                pending.remove(r)
                (fulls[r],) = ch.get_many([f"full/{r}"])
            elif _read_another_plan(ch, r, mine):
                pending.remove(r)
                misled.append(r)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 1.5, 0.25)
    return pending, misled


def _read_another_plan(ch: Channel, r: int, mine: bytes) -> bool:
    """Whether rank `r` recorded reading a plan other than rank 0's."""
    return ch.has(f"read/{r}") and ch.get_many([f"read/{r}"])[0] != _sha(mine)


def _foreign_text(misled: list[int]) -> str:
    text = "another process wrote the fleet plan, which only rank 0 writes"
    if misled:
        from kernodeck.fleet.compare import ranks_text

        text += f" (ranks {ranks_text(misled)} read that plan and were not asked for their facts)"
    return text


def _exchange_stats(
    ident: Identity,
    ch: Channel,
    digests: dict[int, dict[str, Any]],
    fulls: dict[int, dict[str, Any]],
    plan_bytes: int,
    senders: int,
    started: float,
    all_in: float,
) -> dict[str, Any]:
    full_bytes = sum(len(canonical(f)) for r, f in fulls.items() if r != 0)
    digest_bytes = sum(len(canonical(m)) for m in digests.values())
    join_bytes = len(canonical({"id": ident.to_json()})) * len(digests)
    return {
        "bytes": join_bytes + digest_bytes + plan_bytes * len(digests) + full_bytes,
        "digest_bytes": digest_bytes,
        "plan_bytes": plan_bytes,
        "facts_bytes": full_bytes,
        "ranks_sending_facts": senders,
        "seconds": round(time.monotonic() - started, 3),
        "seconds_after_last_digest": round(time.monotonic() - all_in, 3),
        "environment_probes": ch.count("n:probe-runs"),
    }


def join(ident: Identity, store: Any, prefix: str | None = None, *, timeout: float = 60.0) -> Channel:
    """Announce this rank (before its verify), so that a rank that stops later is told apart from
    one that never started, and start its heartbeat (stopped when its exchange ends)."""
    ch = Channel(store, prefix or _prefix())
    ch.put(f"join/{ident.rank}", {"id": ident.to_json()})
    ch.start_heartbeat(ident.rank, beat_interval(timeout))
    return ch


def _alive(ch: Channel, ranks: list[int], beat: float) -> set[int]:
    """The ranks among `ranks` whose heartbeat moves: looked at twice, SILENT_BEATS beats apart."""
    if not ranks:
        return set()
    before = {r: ch.count(f"alive/{r}") for r in ranks}
    time.sleep(SILENT_BEATS * beat)
    return {r for r in ranks if ch.count(f"alive/{r}") > before[r]}


def _silent(beat: float) -> str:
    return f"no heartbeat for {SILENT_BEATS * beat:g} s: crashed, killed or frozen"


def _missing(ch: Channel, r: int, alive: bool, beat: float, *, after_digest: bool = False) -> dict[str, Any]:
    if not ch.has(f"join/{r}"):
        return {"rank": r, "joined": False, "stage": "never joined"}
    (j,) = ch.get_many([f"join/{r}"])
    if after_digest:  # rank 0, seen from another rank: its digest came, its plan did not
        stage = (
            "alive, but did not publish the fleet plan in time"
            if alive
            else f"sent its digest, then stopped before the fleet plan ({_silent(beat)})"
        )
    elif alive:
        stage = "joined and alive, but its verify has not finished (hanging)"
    else:
        stage = f"joined, then stopped during its verify ({_silent(beat)})"
    return {"rank": r, "joined": True, "host": j["id"]["host"], "node": j["id"]["node"], "stage": stage}


def _late(ch: Channel, r: int, alive: bool, beat: float) -> dict[str, Any]:
    """A rank the plan asked for facts that sent none in time."""
    (j,) = ch.get_many([f"join/{r}"])
    stage = (
        "alive, but has not sent the facts the plan asked for (hanging)"
        if alive
        else f"sent its digest, then stopped before its facts ({_silent(beat)})"
    )
    return {"rank": r, "joined": True, "host": j["id"]["host"], "node": j["id"]["node"], "stage": stage}


def _missing_text(missing: list[dict[str, Any]], timeout: float) -> str:
    parts = []
    for m in sorted(missing, key=lambda m: m["rank"]):
        where = f" on {m['host']}" if m.get("host") else ""
        parts.append(f"rank {m['rank']}{where} ({m['stage']})")
    return f"missing after {timeout:g} s: " + "; ".join(parts)


#: The longest first error a rank's reason quotes.
MAX_REASON = 200


def verdict_text(
    digests: dict[int, dict[str, Any]],
    groups: dict[str, list[dict[str, Any]]],
    missing: list[dict[str, Any]],
    timeout: float,
) -> str:
    """Why the fleet failed, in one line every rank prints ("" when it passed): the missing
    ranks, the ranks whose verify failed (with the first one's first error), the layers the ranks
    disagree on."""
    from kernodeck.fleet.compare import ranks_text
    from kernodeck.render.visible import one_line

    parts = [_missing_text(missing, timeout)] if missing else []
    failed = [r for r, m in sorted(digests.items()) if not m["ok"]]
    if failed:
        first = digests[failed[0]]
        why = one_line(str(first["first_error"] or first["summary"]))[:MAX_REASON]
        parts.append(f"verify failed on ranks {ranks_text(failed)} (rank {failed[0]}: {why})")
    differ = [layer for layer, g in groups.items() if len(g) > 1]
    if differ:
        parts.append("ranks disagree on " + ", ".join(differ))
    return "; ".join(parts)
