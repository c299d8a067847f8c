"""A fleet whose ranks misbehave: a rank alive but hanging, a rank stopped, a plan written by a
process other than rank 0, and what the ranks other than 0 print.

The exchange runs for real over a torch.distributed store: in threads of this process on a
HashStore (fast), and once under `torchrun` with gloo on 127.0.0.1 (a rank whose environment
probe hangs)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from torch.distributed import HashStore  # type: ignore[attr-defined]  # torch re-exports it without __all__

from kernodeck.fleet.exchange import NOT_A_PLAN, Channel, Outcome, exchange, join
from kernodeck.fleet.facts import Identity
from kernodeck.fleet.run import reason
from kernodeck.report import Report
from tests.fixtures.fleet_launch import TIMEOUT, Fleet, launch, make_fleet

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="torch.distributed's stores as on the clusters"
)

PREFIX = "t/"
WAIT = 2.0  # the exchange's timeout in the threaded tests (a beat of 0.1 s)


def _ident(rank: int, world: int) -> Identity:
    return Identity(rank=rank, world_size=world, local_rank=rank, node=0, host=f"host-{rank}")


def _report(data_value: str) -> Report:
    step = {"layer": "data", "name": "data:train", "status": "passed", "observed": data_value}
    if data_value != "same":
        step.update(status="failed", error=f"train.bin differs: {data_value}")
    return Report.model_validate({"kind": "verify", "steps": [step]})


def _run_ranks(store: object, world: int, reports: dict[int, Report]) -> dict[int, Outcome]:
    """`exchange` for the ranks in `reports`, each on its own thread (the others stay away)."""
    outcomes: dict[int, Outcome] = {}

    def run(r: int) -> None:
        outcomes[r] = exchange(_ident(r, world), store, reports[r], None, timeout=WAIT, prefix=PREFIX)

    threads = [threading.Thread(target=run, args=(r,)) for r in reports]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return outcomes


@pytest.fixture(autouse=True)
def _agent_store(monkeypatch: pytest.MonkeyPatch) -> None:
    # as under torchrun: the agent hosts the store, so rank 0 does not wait for every rank's ack
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")


def test_a_hanging_rank_is_told_from_a_stopped_one() -> None:
    store = HashStore()
    world = 4
    hanging = join(_ident(2, world), store, PREFIX, timeout=WAIT)  # joined; its verify never ends
    stopped = join(_ident(3, world), store, PREFIX, timeout=WAIT)
    stopped.stop_heartbeat()  # joined, then died: its heartbeat stops with it
    try:
        out = _run_ranks(store, world, {0: _report("same"), 1: _report("same")})
    finally:
        hanging.stop_heartbeat()
    stages = {m["rank"]: m["stage"] for m in out[0].missing}
    assert stages[2] == "joined and alive, but its verify has not finished (hanging)"
    assert stages[3].startswith("joined, then stopped during its verify (no heartbeat for 0.3 s")
    assert "crashed or killed" not in stages[2]
    assert out[1].message == out[0].message and "rank 2 on host-2 (joined and alive" in out[1].message
    assert not out[0].ok and not out[1].ok


def test_a_plan_written_by_another_process_blames_no_live_rank() -> None:
    store = HashStore()
    world = 3
    forged = b'{"message":"","missing":[],"ok":true,"reports":false,"send":{}}'
    Channel(store, PREFIX).store.set("plan", forged)  # type: ignore[arg-type]  # bytes are accepted
    reports = {0: _report("same"), 1: _report("same"), 2: _report("other")}
    # rank 2 first: it reads the forged plan (and so sends no facts) before rank 0 plans
    out2: list[Outcome] = []
    first = threading.Thread(
        target=lambda: out2.append(
            exchange(_ident(2, world), store, reports[2], None, timeout=WAIT, prefix=PREFIX)
        )
    )
    first.start()
    ch = Channel(store, PREFIX)
    deadline = time.monotonic() + 30
    while not ch.has("read/2") and time.monotonic() < deadline:
        time.sleep(0.01)
    out = _run_ranks(store, world, {0: reports[0], 1: reports[1]})
    first.join(timeout=60)
    assert out2[0].ok  # it was misled: the forged plan said so
    lead = out[0]
    assert not lead.ok and lead.comparison is not None
    assert lead.missing == []  # rank 2 is alive and did what it read: nobody is blamed
    assert "another process wrote the fleet plan, which only rank 0 writes" in lead.message
    assert "ranks 2 read that plan and were not asked for their facts" in lead.message
    assert "stopped" not in lead.message
    assert bytes(ch.store.get("plan")) != forged  # rank 0's plan replaced it for the ranks still to read


def test_a_plan_that_is_not_one_is_refused_by_the_other_ranks() -> None:
    store = HashStore()
    Channel(store, PREFIX).store.set("plan", b"[1, 2]")  # type: ignore[arg-type]  # bytes are accepted
    out = exchange(_ident(1, 2), store, _report("same"), None, timeout=WAIT, prefix=PREFIX)
    assert not out.ok and out.message == NOT_A_PLAN


def test_other_ranks_print_the_reason_not_the_transport_detail() -> None:
    store = HashStore()
    out = _run_ranks(store, 3, {0: _report("same"), 1: _report("same"), 2: _report("other")})
    expected = (
        "verify failed on ranks 2 (rank 2: data/data:train: train.bin differs: other); ranks disagree on data"
    )
    assert out[1].message == expected and out[2].message == expected
    gloo = {"backend": "gloo", "status": "failed", "detail": "Connection closed by peer [127.0.0.1]:29500"}
    assert reason(out[1], gloo) == expected  # the plan's reason, never gloo's
    assert reason(out[1], {"backend": "gloo", "status": "ok", "detail": "group formed"}) == expected
    passed = Outcome(True, 1)
    assert reason(passed, gloo) == (
        "every rank passed and agrees, but the gloo collective failed: Connection closed by peer [127.0.0.1]:29500"
    )
    assert (
        reason(passed, {"backend": "gloo", "status": "ok"})
        == "another rank's verdict is FAILED (see rank 0's report)"
    )


# --- under torchrun ----------------------------------------------------------------------------

HANG = """#!/bin/sh
# the environment probe of one rank: it hangs until rank 0 has finished (at most a minute)
i=0
while [ ! -e "{out}/rc.0" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
exit 3
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.mark.slow
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the manifest declares linux x86_64")
def test_a_rank_whose_verify_hangs_is_reported_as_hanging(fleet: Fleet, tmp_path: Path) -> None:
    out = tmp_path / "out"
    hang = tmp_path / "hang.sh"
    hang.write_text(HANG.format(out=out))
    hang.chmod(0o755)
    ranks = launch(fleet, out, timeout=TIMEOUT, env={"FLEET_ARGS_2": f"--python {hang}"})
    assert [ranks.rc(0), ranks.rc(1)] == ["1", "1"], ranks.stderr(0)
    host = socket.gethostname()
    report = ranks.stdout(0)
    assert f"MISSING rank 2 on {host}: joined and alive, but its verify has not finished (hanging)" in report
    assert "crashed or killed" not in report
    assert "rank 2" in ranks.stderr(1) and "(hanging)" in ranks.stderr(1)
