"""Fleet verify over torch.distributed: real `torchrun` launches with gloo on 127.0.0.1.

Every rank is started through a small wrapper (`torchrun --no-python wrapper.sh`) that picks its
interpreter, project folder and extra arguments from FLEET_*_<RANK> variables and writes its exit
status, stdout and stderr to files, so each rank's verdict can be checked on its own. Two venvs
share main's site-packages through a .pth file (torch, kernodeck's dependencies) and differ in one
tiny package installed from a local wheel: fleetpkg 1.0 (the lock) or 2.0.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from kernodeck.fleet.exchange import _plan
from kernodeck.fleet.facts import digest, layer_facts
from kernodeck.report import Report
from tests.fixtures.fleet_launch import (
    LAUNCH_TIMEOUT,
    SRC,
    TIMEOUT,
    Fleet,
    Ranks,
    fleet_env,
    free_port,
    launch,
    make_fleet,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        sys.platform != "linux" or os.uname().machine != "x86_64",
        reason="the manifest declares linux x86_64",
    ),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet"))


def _report_count(ranks: Ranks, n: int) -> int:
    return sum(ranks.stdout(r).count("kernodeck fleet verify:") for r in range(n))


def test_three_ranks_same_environment_pass_with_one_report(fleet: Fleet, tmp_path: Path) -> None:
    ranks = launch(fleet, tmp_path / "out", timeout=60)
    assert [ranks.rc(r) for r in range(3)] == ["0", "0", "0"], ranks.stderr(0) + ranks.stdout(0)
    report = ranks.stdout(0)
    assert "FLEET OK: 3 ranks passed and agree on every layer" in report
    assert _report_count(ranks, 3) == 1
    for layer in ("interpreter", "packages", "data"):
        assert any(line.split()[:3] == [layer, "yes", "yes"] for line in report.splitlines()), report
    assert "gloo all-reduce: ok" in report
    assert "environment probes: 1 for 3 ranks" in report  # one host, one interpreter: one probe


def test_rank_with_another_interpreter_fails_every_rank_and_names_the_package(
    fleet: Fleet, tmp_path: Path
) -> None:
    js = tmp_path / "fleet.json"
    ranks = launch(
        fleet,
        tmp_path / "out",
        timeout=60,
        env={"FLEET_PY_2": str(fleet.venv_b), "FLEET_ARGS_0": f"--json {js}"},
    )
    assert [ranks.rc(r) for r in range(3)] == ["1", "1", "1"], ranks.stdout(0) + ranks.stderr(0)
    report = ranks.stdout(0)
    assert "ranks disagree on packages" in report
    assert "environment probes: 2 for 3 ranks" in report  # venv-a shared by ranks 0-1, venv-b
    table = report.split("packages: ", 1)[1]
    assert "dist:fleetpkg" in table
    # one row per differing fact, one column per group of ranks (the minority marked *)
    header = next(line for line in table.splitlines() if line.split()[:1] == ["fact"])
    assert header.split()[1:] == ["ranks", "0-1", "rank", "2", "*"]
    row = next(line for line in table.splitlines() if line.split()[:1] == ["dist:fleetpkg"])
    assert row.split() == ["dist:fleetpkg", "1.0", "2.0"]
    assert "rank 2" in report and "fleetpkg 2.0 is installed where the lock pins 1.0" in report
    for r in (1, 2):
        assert "FLEET FAILED" in ranks.stderr(r)

    data = json.loads(js.read_text())
    assert data["ok"] is False
    packages = next(la for la in data["layers"] if la["layer"] == "packages")
    assert packages["agree"] is False
    by_ranks = {tuple(row["ranks"]): row["values"] for row in packages["rows"]}
    assert by_ranks[(0, 1)]["dist:fleetpkg"] == "1.0"
    assert by_ranks[(2,)]["dist:fleetpkg"] == "2.0"
    assert packages["status"] == {"warning": [0, 1], "failed": [2]}  # warning: main's unlocked dists
    assert sorted(data["reports"]) == ["0", "1", "2"]
    assert data["reports"]["2"]["kind"] == "verify"
    interp = next(la for la in data["layers"] if la["layer"] == "interpreter")
    assert interp["agree"] is True


def test_one_rank_with_another_data_file_is_reported_by_rank(fleet: Fleet, tmp_path: Path) -> None:
    other = tmp_path / "project-1"
    shutil.copytree(fleet.project, other)
    (other / "train.bin").write_bytes(b"another shard\n")
    sha = hashlib.sha256(b"another shard\n").hexdigest()
    js = tmp_path / "fleet.json"
    ranks = launch(
        fleet, tmp_path / "out", timeout=60, env={"FLEET_DIR_1": str(other), "FLEET_ARGS_0": f"--json {js}"}
    )
    assert [ranks.rc(r) for r in range(3)] == ["1", "1", "1"]
    report = ranks.stdout(0)
    assert "ranks disagree on data" in report
    for r in (1, 2):  # the reason, never the collective's detail
        err = ranks.stderr(r)
        assert f"rank {r}: FLEET FAILED: verify failed on ranks 1 (rank 1: data/data:train: " in err
        assert "ranks disagree on data" in err and "all-reduced" not in err
    data = json.loads(js.read_text())
    layer = next(la for la in data["layers"] if la["layer"] == "data")
    by_ranks = {tuple(row["ranks"]): row["values"]["step:data:train"] for row in layer["rows"]}
    assert set(by_ranks) == {(0, 2), (1,)}
    assert by_ranks[(1,)] == f"failed: {sha}"
    assert by_ranks[(0, 2)].startswith("passed: ")
    packages = next(la for la in data["layers"] if la["layer"] == "packages")
    assert packages["agree"] is True


def test_rank_that_never_joins_is_named_by_the_others(fleet: Fleet, tmp_path: Path) -> None:
    ranks = launch(fleet, tmp_path / "out", timeout=TIMEOUT, env={"FLEET_MODE_2": "absent"})
    assert ranks.rc(2) == "absent"
    assert [ranks.rc(0), ranks.rc(1)] == ["1", "1"]
    assert "MISSING rank 2: never joined" in ranks.stdout(0)
    assert "FLEET FAILED (3 ranks): missing ranks 2" in ranks.stdout(0)
    assert "rank 2 (never joined)" in ranks.stderr(1)


def test_rank_killed_during_verify_on_another_node_is_named(fleet: Fleet, tmp_path: Path) -> None:
    # node 1 runs rank 2 alone; its verify starts the environment probe, which kills it
    ranks = launch(
        fleet,
        tmp_path / "out",
        nnodes=2,
        nproc=(2, 1),
        timeout=TIMEOUT,
        env={"FLEET_ARGS_2": f"--python {fleet.killer}"},
    )
    assert ranks.rc(2) == "137"
    assert [ranks.rc(0), ranks.rc(1)] == ["1", "1"]
    host = socket.gethostname()
    assert f"MISSING rank 2 on {host}: joined, then stopped during its verify" in ranks.stdout(0)
    assert "rank 2" in ranks.stderr(1) and "stopped during its verify" in ranks.stderr(1)


def test_two_nodes_are_grouped_by_node(fleet: Fleet, tmp_path: Path) -> None:
    other = tmp_path / "project-3"
    shutil.copytree(fleet.project, other)
    (other / "train.bin").write_bytes(b"node 1 has another shard\n")
    js = tmp_path / "fleet.json"
    ranks = launch(
        fleet,
        tmp_path / "out",
        nnodes=2,
        nproc=(2, 2),
        timeout=60,
        env={"FLEET_DIR_3": str(other), "FLEET_ARGS_0": f"--json {js}"},
    )
    assert [ranks.rc(r) for r in range(4)] == ["1", "1", "1", "1"]
    host = socket.gethostname()
    report = ranks.stdout(0)
    assert f"node 0 ({host}): ranks 0-1" in report
    assert f"node 1 ({host}): ranks 2-3" in report
    data = json.loads(js.read_text())
    assert [(n["node"], n["ranks"]) for n in data["nodes"]] == [(0, [0, 1]), (1, [2, 3])]
    layer = next(la for la in data["layers"] if la["layer"] == "data")
    rows = [(row["node"], row["ranks"]) for row in layer["rows"]]
    assert rows == [(0, [0, 1]), (1, [2]), (1, [3])]
    assert _report_count(ranks, 4) == 1


REQUIRE_SCRIPT = """
import os, sys
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

dist.init_process_group("gloo")
import kernodeck
from kernodeck.errors import CheckFailed

try:
    kernodeck.require("repro.toml", fleet=True, fleet_timeout=60, only=["interpreter", "data"], compute=False)
    result = "ok"
except CheckFailed as e:
    result = "failed: " + e.message
print(result)
print("groups:", len(c10d._world.pg_map))
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.parametrize("differs", [False, True], ids=["same", "rank2-data-differs"])
def test_require_fleet_inside_a_torchrun_script_uses_its_group(
    fleet: Fleet, tmp_path: Path, differs: bool
) -> None:
    script = tmp_path / "train.py"
    script.write_text(REQUIRE_SCRIPT)
    env = {"FLEET_MODE": "script", "FLEET_SCRIPT": str(script), "FLEET_PY": sys.executable}
    if differs:
        other = tmp_path / "project-2"
        shutil.copytree(fleet.project, other)
        (other / "train.bin").write_bytes(b"rank 2 shard\n")
        env["FLEET_DIR_2"] = str(other)
    ranks = launch(fleet, tmp_path / "out", timeout=60, env=env)
    for r in range(3):
        assert ranks.rc(r) == "0", ranks.stderr(r)
        lines = ranks.stdout(r).splitlines()
        assert lines[-1] == "groups: 1"  # the script's own group, nothing added
        if differs:
            assert lines[0].startswith("failed: FLEET FAILED"), lines
        else:
            assert lines[0] == "ok", ranks.stdout(r) + ranks.stderr(r)
    if differs:
        assert "ranks disagree on data" in ranks.stdout(0)
        # the fleet's reason, the same as rank 0's verdict
        assert "FLEET FAILED (rank 1): verify failed on ranks 2 (rank 2: data/data:train: " in ranks.stdout(1)
        assert ranks.stdout(1).splitlines()[0].endswith("; ranks disagree on data")
        assert ranks.stderr(0).count("kernodeck fleet verify: 3 ranks") == 1  # the report, on rank 0
        assert "kernodeck fleet verify" not in ranks.stderr(1) + ranks.stderr(2)


def test_rank_whose_verify_raised_reports_its_first_error(fleet: Fleet, tmp_path: Path) -> None:
    empty = tmp_path / "no-manifest"
    empty.mkdir()
    ranks = launch(fleet, tmp_path / "out", timeout=60, env={"FLEET_DIR_2": str(empty)})
    assert [ranks.rc(r) for r in range(3)] == ["1", "1", "1"]
    report = ranks.stdout(0)
    first = next(line for line in report.splitlines() if line.startswith("  rank 2 (")).lower()
    assert "repro.toml" in first
    assert "not run on ranks 2" in report


def test_fleet_outside_a_launcher_is_a_usage_error(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "MASTER_ADDR", "MASTER_PORT")
    }
    (tmp_path / "repro.toml").write_text("schema-version = 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kernodeck", "verify", "--fleet", "--only", "data"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--fleet needs RANK and WORLD_SIZE" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ranks_started_without_torchrun_like_srun(fleet: Fleet, tmp_path: Path) -> None:
    # srun sets RANK/WORLD_SIZE (here directly) and no torchrun agent: rank 0 hosts the store
    out = tmp_path / "out"
    out.mkdir()
    port = free_port()
    procs = []
    for r in range(3):
        env = fleet_env(fleet, out, 60, {})
        env.update(
            RANK=str(r), WORLD_SIZE="3", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
        )
        procs.append(subprocess.Popen([str(fleet.wrapper)], env=env))
    try:
        for p in procs:
            p.wait(timeout=LAUNCH_TIMEOUT)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    ranks = Ranks(out)
    assert [ranks.rc(r) for r in range(3)] == ["0", "0", "0"], ranks.stderr(0) + ranks.stderr(1)
    assert "FLEET OK: 3 ranks" in ranks.stdout(0)


def _report(steps: Sequence[Mapping[str, object]], inventory: Mapping[str, object] | None = None) -> Report:
    return Report.model_validate({"steps": steps, "inventory": inventory or {}})


def test_layer_digest_ignores_timings_and_sees_versions() -> None:
    step = {"layer": "data", "name": "data:x", "status": "passed", "observed": "abc"}
    a = layer_facts(_report([{**step, "seconds": 0.1}]))
    b = layer_facts(_report([{**step, "seconds": 9.0}]))
    assert digest(a["data"]) == digest(b["data"])
    inv = {"distributions": [{"name": "foo", "version": "1.0"}]}
    pk = {"layer": "packages", "name": "pins", "status": "passed"}
    one = layer_facts(_report([pk], inv))["packages"]
    two = layer_facts(_report([pk], {"distributions": [{"name": "foo", "version": "2.0"}]}))["packages"]
    assert one["dist:foo"] == "1.0" and two["dist:foo"] == "2.0"
    assert digest(one) != digest(two)


def test_plan_asks_only_the_minority_and_one_representative() -> None:
    def msg(d: str) -> dict[str, object]:
        return {"digests": {"data": "same", "packages": d}}

    digests = {r: msg("a") for r in range(6)} | {4: msg("b"), 5: {"digests": {"data": "same"}}}
    plan = _plan(digests, want_reports=False)
    assert plan["send"] == {"0": ["packages"], "4": ["packages"]}  # rank 5 ran no packages layer
    groups = plan["groups"]["packages"]
    assert [(g["ranks"], g["majority"]) for g in groups] == [([0, 1, 2, 3], True), ([4], False), ([5], False)]
    assert [g["ranks"] for g in plan["groups"]["data"]] == [[0, 1, 2, 3, 4, 5]]


def test_require_fleet_without_a_group_is_the_plain_require(tmp_path: Path) -> None:
    from kernodeck.api import require
    from kernodeck.errors import CheckFailed

    data = b"shard\n"
    (tmp_path / "train.bin").write_bytes(data)
    (tmp_path / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "solo"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[packages]\nrequirements = []\n[[data]]\nname = "train"\npath = "train.bin"\n'
        f'sha256 = "{hashlib.sha256(data).hexdigest()}"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    report = require(tmp_path / "repro.toml", fleet=True, only=["data"], compute=False)
    assert report.ok and [s.name for s in report.steps] == ["data:train"]
    (tmp_path / "train.bin").write_bytes(b"other\n")
    with pytest.raises(CheckFailed) as info:
        require(tmp_path / "repro.toml", fleet=True, only=["data"], compute=False)
    assert "FLEET" not in info.value.message and "data:train" in " ".join(info.value.context)


def test_nccl_backend_without_devices_fails_every_rank(fleet: Fleet, tmp_path: Path) -> None:
    ranks = launch(fleet, tmp_path / "out", timeout=60, env={"FLEET_ARGS": "--fleet-backend nccl"})
    assert [ranks.rc(r) for r in range(3)] == ["1", "1", "1"], ranks.stdout(0) + ranks.stderr(0)
    assert "nccl all-reduce: failed" in ranks.stdout(0)
    assert "3 ranks passed and agree" not in ranks.stdout(0)


def test_missing_rank_0_is_named_by_the_others(fleet: Fleet, tmp_path: Path) -> None:
    ranks = launch(fleet, tmp_path / "out", timeout=TIMEOUT, env={"FLEET_MODE_0": "absent"})
    assert ranks.rc(0) == "absent"
    for r in (1, 2):
        assert ranks.rc(r) == "1"
        assert f"rank {r}: FLEET FAILED: missing after {TIMEOUT} s: rank 0 (never joined)" in ranks.stderr(r)


def test_shared_probe_runs_once_and_keeps_each_ranks_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.distributed import HashStore  # type: ignore[attr-defined]  # torch re-exports it without __all__

    from kernodeck.fleet.exchange import Channel
    from kernodeck.fleet.facts import Identity
    from kernodeck.fleet.probe import SharedProbe, probe_runs
    from kernodeck.probe.runner import ProbeRequest, RealProbe

    store = HashStore()
    ch = Channel(store, "t/")
    request = ProbeRequest(records=False, torch=False, compute=False, smi=False)

    def probe(rank: int) -> SharedProbe:
        ident = Identity(rank=rank, world_size=2, local_rank=rank, node=0, host="h")
        return SharedProbe(RealProbe(sys.executable), ch, ident, wait=60)

    first, second = probe(0), probe(1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    facts0 = first.collect(request)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    facts1 = second.collect(request)
    assert (first.shared_from, second.shared_from) == (True, False)
    assert probe_runs(ch) == 1
    assert facts0.env["CUDA_VISIBLE_DEVICES"] == "0" and facts1.env["CUDA_VISIBLE_DEVICES"] == "1"
    assert facts1.interpreter == facts0.interpreter and facts1.dists() == facts0.dists()

    other = SharedProbe(RealProbe(sys.executable), ch, Identity(2, 3, 0, 1, "elsewhere"), wait=60)
    other.collect(request)
    assert other.shared_from is True and probe_runs(ch) == 2  # another host probes for itself


def test_exchange_carries_each_ranks_warning_count() -> None:
    """Four threaded ranks over one HashStore: FLEET OK counts each rank's warned steps (ranks that
    agree on every layer's steps warned alike; a rank with another count disagrees)."""
    import threading

    from torch.distributed import HashStore  # type: ignore[attr-defined]  # torch re-exports it without __all__

    from kernodeck.fleet.compare import summary_line
    from kernodeck.fleet.exchange import Outcome, exchange, summary_of
    from kernodeck.fleet.facts import Identity
    from kernodeck.report import Step

    def report(warned: int) -> Report:
        steps = [Step.passed("code", "revision", observed="abc")]
        steps += [Step.warning("code", f"w{i}", "dirty", required=False) for i in range(warned)]
        return Report(steps=steps)

    store, counts = HashStore(), [2, 2, 2, 2]
    outcomes: dict[int, Outcome] = {}

    def rank(r: int) -> None:
        ident = Identity(rank=r, world_size=4, local_rank=r, node=0, host="h")
        outcomes[r] = exchange(ident, store, report(counts[r]), None, timeout=30, prefix="w/")

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ident0 = Identity(rank=0, world_size=1, local_rank=0, node=0, host="h")
    assert summary_of(ident0, report(3), None)["warnings"] == 3
    assert all(o.ok for o in outcomes.values()) and len(outcomes) == 4, [o.message for o in outcomes.values()]
    comparison = outcomes[0].comparison
    assert comparison is not None
    assert comparison["warning_counts"] == {"0": 2, "1": 2, "2": 2, "3": 2}
    assert (
        summary_line(comparison)
        == "FLEET OK: 4 ranks passed and agree on every layer; warnings: 2 on ranks 0-3"
    )
