"""What one rank says about itself in a fleet verify: its identity (host, node, rank), the facts of
each layer as one flat, comparable mapping, and the sha256 of each layer's facts.

The facts of a layer are the outcome of its steps (status and what was observed, without timings)
plus the part of the observed inventory the layer owns: the interpreter for `interpreter`, the
installed distributions for `packages`, OS/glibc/driver/GPUs for `system`, the torch build for
`backend`, the devices and the control computation for `device`. Two ranks with the same digest
for a layer observed the same thing; only ranks whose digest differs from the majority send these
facts over the wire (see kernodeck.fleet.exchange).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from kernodeck.report import Report


@dataclass(frozen=True)
class Identity:
    """Where a rank runs: from the launcher's variables (torchrun, or Slurm's srun)."""

    rank: int
    world_size: int
    local_rank: int
    node: int
    host: str

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "node": self.node,
            "host": self.host,
        }


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            try:
                return int(value)
            except ValueError:
                return None
    return None


def identity_from_env(rank: int | None = None, world_size: int | None = None) -> Identity | None:
    """The rank's identity from RANK/WORLD_SIZE (torchrun) or SLURM_PROCID/SLURM_NTASKS (srun);
    None when neither is set."""
    r = rank if rank is not None else _env_int("RANK", "SLURM_PROCID")
    w = world_size if world_size is not None else _env_int("WORLD_SIZE", "SLURM_NTASKS")
    if r is None or w is None:
        return None
    local = _env_int("LOCAL_RANK", "SLURM_LOCALID")
    node = _env_int("GROUP_RANK", "NODE_RANK", "SLURM_NODEID")
    return Identity(
        rank=r,
        world_size=w,
        local_rank=local if local is not None else 0,
        node=node if node is not None else 0,
        host=socket.gethostname(),
    )


#: The inventory sections each layer owns, and the fact names they become.
def _inventory_facts(layer: str, inv: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if layer == "interpreter" and inv.get("interpreter"):
        it = inv["interpreter"]
        out["python"] = f"{it.get('implementation')} {it.get('version')}"
        out["soabi"] = it.get("soabi")
    elif layer == "packages":
        for d in inv.get("distributions") or []:
            out[f"dist:{d['name']}"] = d.get("version")
    elif layer == "system":
        pf = inv.get("platform") or {}
        sy = inv.get("system") or {}
        out["os"] = pf.get("distro") or pf.get("os")
        out["machine"] = pf.get("machine")
        out["glibc"] = pf.get("glibc")
        drv = sy.get("nvidia_driver")
        out["nvidia_driver"] = drv.get("version") if isinstance(drv, dict) else None
        out["gpus"] = ", ".join(sy.get("gpus") or []) or None
        out["gpu_count"] = len(sy.get("gpus") or [])
        out["rocm"] = sy.get("rocm")
    elif layer == "backend" and inv.get("torch"):
        t = inv["torch"]
        for key in ("version", "build_kind", "cuda", "hip", "cudnn"):
            out[f"torch.{key}"] = t.get(key)
    elif layer == "device" and inv.get("torch"):
        t = inv["torch"]
        devs = t.get("devices") or []
        out["devices"] = ", ".join(
            f"{d.get('name')} ({d.get('capability') or d.get('gcn_arch')})" for d in devs
        )
        out["device_count"] = len(devs)
        out["compute"] = (t.get("compute") or {}).get("status")
        out["visible_devices"] = json.dumps(inv.get("env") or {}, sort_keys=True)
    return {k: v for k, v in out.items() if v is not None}


def _step_value(step: Any) -> str:
    value = step.observed
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True, default=str)
    text = f"{step.status.value}"
    if value not in (None, ""):
        text += f": {value}"
    elif step.error:
        text += f": {step.error}"
    return text


def layer_facts(report: Report) -> dict[str, dict[str, Any]]:
    """Layer -> {fact: value} for the layers the report ran (timings left out), in report order."""
    out: dict[str, dict[str, Any]] = {}
    for step in report.steps:
        out.setdefault(str(step.layer), {})[f"step:{step.name}"] = _step_value(step)
    for layer, facts in out.items():
        facts.update(_inventory_facts(layer, report.inventory))
    return out


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def digest(facts: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(facts)).hexdigest()


def layer_status(report: Report, layer: str) -> str:
    """passed / failed / warning / skipped for one layer (failed wins, then warning)."""
    states = {
        s.status.value
        for s in report.steps
        if str(s.layer) == layer and (s.required or s.status.value != "failed")
    }
    for state in ("failed", "warning", "passed"):
        if state in states:
            return state
    return "skipped"
