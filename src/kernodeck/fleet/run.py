"""`kernodeck verify --fleet` on every rank, and `require(..., fleet=True)` inside a job.

Each rank announces itself, runs the ordinary verify (kernodeck.layers.run, with the usual
--only/--skip/--no-compute), then takes part in the exchange (kernodeck.fleet.exchange). On the
command line, when no rank is missing, the ranks then form a gloo process group on the same store
and all-reduce the verdict, so every rank exits with the same verdict and the group itself proves
that every pair of ranks can talk; `--fleet-backend nccl` adds an all-reduce on the devices, timed.
Rank 0 prints the fleet report; every rank exits 0 only when the whole fleet passed and agrees.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kernodeck.errors import CheckFailed, KernodeckError, UsageError
from kernodeck.fleet.compare import render, summary_line
from kernodeck.fleet.exchange import (
    Channel,
    Outcome,
    StoreUnreachable,
    exchange,
    group_initialized,
    join,
    open_store,
)
from kernodeck.fleet.facts import Identity, identity_from_env
from kernodeck.report import Report
from kernodeck.support.fsio import write_text_or_stdout

BACKENDS = ("gloo", "nccl")


def _verify(fn: Callable[[], Report]) -> tuple[Report | None, str | None]:
    try:
        return fn(), None
    except KernodeckError as e:
        return None, e.message
    except Exception as e:  # a rank whose verify raised reports its first error, and the exchange goes on
        return None, f"{type(e).__name__}: {e}"


def _collective(
    ident: Identity, ch: Channel, ok: bool, timeout: float, backend: str
) -> tuple[bool, dict[str, Any]]:
    """Form a process group on the exchange's store, all-reduce the verdict (gloo), and with nccl
    time one all-reduce of 256 MiB on the devices."""
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import PrefixStore

    info: dict[str, Any] = {"backend": backend}
    started = time.monotonic()
    try:
        store = PrefixStore("pg/", ch.store)
        spec = "gloo" if backend == "gloo" else "cpu:gloo,cuda:nccl"
        dist.init_process_group(
            spec,
            store=store,
            rank=ident.rank,
            world_size=ident.world_size,
            timeout=timedelta(seconds=timeout),
        )
    except Exception as e:
        return False, {**info, "status": "failed", "detail": f"process group did not form: {_first(e)}"}
    try:
        flag = torch.tensor([0 if ok else 1], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        ok = int(flag.item()) == 0
        info["status"] = "ok"
        info["seconds"] = round(time.monotonic() - started, 3)
        info["detail"] = f"group formed and verdict all-reduced in {info['seconds']} s"
        if backend == "nccl":
            info.update(_nccl_allreduce(ident))
            if info.get("nccl_status") != "ok":
                ok = False
                info["status"] = "failed"
                info["detail"] = info.get("nccl_error")
            else:
                info["detail"] = f"{info['mib']} MiB in {info['ms']} ms, bus {info['bus_gbps']} GB/s"
    except Exception as e:
        ok = False
        info.update(status="failed", detail=_first(e))
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
    return ok, info


def _nccl_allreduce(ident: Identity) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        return {"nccl_status": "failed", "nccl_error": "no CUDA device visible to torch"}
    torch.cuda.set_device(ident.local_rank % torch.cuda.device_count())
    numel = 64 * 2**20  # 256 MiB of float32
    x = torch.ones(numel, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    iters = 5
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    sec = (time.perf_counter() - t0) / iters
    n = ident.world_size
    size = numel * 4
    return {
        "nccl_status": "ok",
        "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),  # type: ignore[no-untyped-call]
        "mib": size // 2**20,
        "ms": round(sec * 1000, 3),
        "bus_gbps": round(2 * (n - 1) / n * size / sec / 1e9, 2) if n > 1 else None,
    }


def _first(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def run_cli(
    verify_fn: Callable[..., Report],
    *,
    json_out: str | None,
    timeout: float,
    backend: str = "gloo",
    python: str | None = None,
    rehash: bool = False,
    isolate_torch: bool = False,
) -> int:
    """The whole `verify --fleet` on one rank; returns the exit status (the fleet verdict)."""
    if timeout <= 0:
        raise UsageError(f"--fleet-timeout must be positive, got {timeout:g}")
    if backend not in BACKENDS:
        raise UsageError(f"--fleet-backend: unknown backend {backend!r}", hint="gloo or nccl")
    ident = identity_from_env()
    if ident is None:
        raise UsageError(
            "--fleet needs RANK and WORLD_SIZE (or SLURM_PROCID and SLURM_NTASKS)",
            hint="start it with torchrun ... -m kernodeck verify --fleet, or under srun",
        )
    try:
        store = open_store(ident, timeout)
    except StoreUnreachable as e:
        print(f"kernodeck fleet: rank {ident.rank}: FLEET FAILED: {e}", file=sys.stderr)
        return 1
    ch = join(ident, store, timeout=timeout)

    def verify_shared() -> Report:
        # ranks on one host with one interpreter share the environment probe
        from kernodeck.fleet.probe import make

        return verify_fn(probe=make(python, rehash, ch, ident, timeout / 2, isolate_torch=isolate_torch))

    report, error = _verify(verify_shared)
    try:
        out = exchange(
            ident, store, report, error, timeout=timeout, want_reports=json_out is not None, joined=ch
        )
    except Exception as e:  # the store went away (under srun rank 0 hosts it): fail, never hang
        print(
            f"kernodeck fleet: rank {ident.rank}: FLEET FAILED: the exchange broke: {_first(e)}",
            file=sys.stderr,
        )
        return 1
    ok = out.ok
    info: dict[str, Any] | None = None
    if not out.missing and not group_initialized():
        ok, info = _collective(ident, ch, ok, timeout, backend)
    if ident.rank == 0 and out.comparison is not None:
        _fleet_report(out.comparison, ok, info, json_out)
    elif not ok:
        print(f"kernodeck fleet: rank {ident.rank}: FLEET FAILED: {reason(out, info)}", file=sys.stderr)
    return 0 if ok else 1


def _fleet_report(cmp: dict[str, Any], ok: bool, info: dict[str, Any] | None, json_out: str | None) -> None:
    """Rank 0: the fleet report on the terminal, and as JSON with `--json`."""
    cmp["ok"] = ok
    if info is not None:
        cmp["collective"] = info
    if json_out is not None:
        write_text_or_stdout(json_out, json.dumps(cmp, indent=2) + "\n")
    render(cmp, sys.stderr if json_out == "-" else sys.stdout)


def reason(out: Outcome, info: dict[str, Any] | None) -> str:
    """Why a rank other than 0 failed: the plan's reason (the same on every rank); the collective
    only when the plan passed and the collective is what failed."""
    from kernodeck.render.visible import one_line

    if not out.ok:
        return one_line(out.message) or "the fleet failed (see rank 0's report)"
    if info is not None and info.get("status") == "failed":
        return f"every rank passed and agrees, but the {info['backend']} collective failed: {one_line(str(info.get('detail')))}"
    return "another rank's verdict is FAILED (see rank 0's report)"


def require_in_group(verify_fn: Callable[[], Report], *, timeout: float = 120.0) -> Report:
    """`require(..., fleet=True)` with an initialised process group: its store carries the exchange
    (no group is created); raises CheckFailed on every rank when the fleet fails or disagrees."""
    import torch.distributed as dist

    ident = identity_from_env(dist.get_rank(), dist.get_world_size())
    assert ident is not None
    store = open_store(ident, timeout)
    ch = join(ident, store, timeout=timeout)
    report, error = _verify(verify_fn)
    try:
        out: Outcome = exchange(ident, store, report, error, timeout=timeout, joined=ch)
    except Exception as e:
        raise CheckFailed(f"FLEET FAILED (rank {ident.rank}): the exchange broke: {_first(e)}") from None
    if not out.ok:
        context = [out.message] if out.message else []
        if out.comparison is not None:
            render(out.comparison, sys.stderr)  # rank 0: the fleet report, once
            context = [r["first_error"] for r in out.comparison["ranks"] if r["first_error"]][:10] + context
            msg = summary_line(out.comparison)
        else:
            msg = f"FLEET FAILED (rank {ident.rank}): " + (out.message or "the fleet disagrees; see rank 0")
        err = CheckFailed(
            msg,
            context=context,
            hint="run `torchrun ... -m kernodeck verify --fleet` for the report",
            report=report,
        )
        err.fleet = out.comparison  # type: ignore[attr-defined]
        raise err
    assert report is not None
    return report
