"""Benchmark the fleet exchange of `kernodeck verify --fleet`: bytes on the wire and wall time for
2, 4, 8 and 16 processes on this machine (CPU, gloo, one torchrun on 127.0.0.1), and the model of
how it grows to 1,024 ranks.

    PYTHONPATH=src .venv/bin/python benchmarks/fleet.py [--sizes 2,4,8,16] [--timeout 120]

Each size runs twice: every rank the same ("agree"), and the last rank with another data file
("one differs"), which makes it and one representative of the majority send the facts of that
layer. The verify itself is the data layer only (`--only data --no-compute`), so the numbers are
those of the exchange, not of the probes. Columns: bytes exchanged (joins + digests + the plan
read by every rank + facts of the differing layer), the exchange time seen by rank 0 (from its
own digest to the end, which includes waiting for the slowest rank's verify), the time after the
last digest arrived (the protocol itself), the time to form the gloo group and all-reduce the
verdict, and the wall time of the whole torchrun launch.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = Path(sys.executable).parent / "torchrun"

WRAPPER = """#!/bin/sh
eval "dir=\\${FLEET_DIR_$RANK:-$FLEET_DIR}"
cd "$dir" || exit 9
exec "$FLEET_PY" -m kernodeck verify --fleet --no-compute --only data --fleet-timeout "$FLEET_TIMEOUT" \\
  > "$FLEET_OUT/out.$RANK" 2> "$FLEET_OUT/err.$RANK"
"""

EXCHANGE = re.compile(
    r"exchange: (\d+) bytes \(digests (\d+), plan (\d+) x (\d+), facts (\d+) from (\d+) ranks\), ([\d.]+) s \(([\d.]+) s after"
)


def _project(path: Path, data: bytes, sha: str) -> None:
    path.mkdir(parents=True)
    (path / "train.bin").write_bytes(data)
    (path / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "bench"\nid = "1"\n[python]\n'
        f'version = "{sys.version_info.major}.{sys.version_info.minor}"\n'
        '[[data]]\nname = "train"\npath = "train.bin"\n'
        f'sha256 = "{sha}"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(n: int, differ: bool, work: Path, timeout: float) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(dir=work))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "OMP_NUM_THREADS": "1",
        "NO_COLOR": "1",
        "FLEET_PY": sys.executable,
        "FLEET_DIR": str(work / "same"),
        "FLEET_OUT": str(out),
        "FLEET_TIMEOUT": str(timeout),
        "KERNODECK_CACHE_DIR": str(work / "cache"),
    }
    if differ:
        env[f"FLEET_DIR_{n - 1}"] = str(work / "other")
    cmd = [
        str(TORCHRUN),
        "--nproc-per-node",
        str(n),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_port()),
        "--no-python",
        str(work / "wrapper.sh"),
    ]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, capture_output=True, timeout=timeout * 4 + 120)
    wall = time.perf_counter() - t0
    text = (out / "out.0").read_text()
    m = EXCHANGE.search(text)
    g = re.search(r"gloo all-reduce: ok, group formed and verdict all-reduced in ([\d.]+) s", text)
    if m is None or g is None:
        raise SystemExit(f"no exchange line for n={n}:\n{text}\n{(out / 'err.0').read_text()}")
    return {
        "bytes": int(m.group(1)),
        "digest": int(m.group(2)),
        "plan": int(m.group(3)),
        "facts": int(m.group(5)),
        "senders": int(m.group(6)),
        "exchange_s": float(m.group(7)),
        "protocol_s": float(m.group(8)),
        "gloo_s": float(g.group(1)),
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2,4,8,16")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="kernodeck-fleet-bench-"))
    try:
        data = b"a training shard\n" * 1000
        sha = hashlib.sha256(data).hexdigest()
        _project(work / "same", data, sha)
        _project(work / "other", data + b"x", sha)
        (work / "wrapper.sh").write_text(WRAPPER)
        (work / "wrapper.sh").chmod(0o755)
        rows = []
        print(f"fleet exchange on {os.cpu_count()} CPUs (gloo, torchrun, 127.0.0.1)\n")
        head = f"{'ranks':>5} {'case':<11} {'bytes':>7} {'digests':>8} {'plan':>5} {'facts':>6} {'senders':>7} {'exchange s':>10} {'protocol s':>10} {'gloo s':>6} {'launch s':>8}"
        print(head)
        for n in sizes:
            for differ in (False, True):
                r = run(n, differ, work, args.timeout)
                rows.append((n, differ, r))
                case = "one differs" if differ else "agree"
                print(
                    f"{n:>5} {case:<11} {r['bytes']:>7} {r['digest']:>8} {r['plan']:>5} {r['facts']:>6} "
                    f"{r['senders']:>7} {r['exchange_s']:>10.3f} {r['protocol_s']:>10.3f} {r['gloo_s']:>6.3f} {r['wall_s']:>8.1f}",
                    flush=True,
                )
        # model: bytes = N x (join + digest + plan) + facts of the differing ranks
        n_max, _, big = max(((n, d, r) for n, d, r in rows if not d), key=lambda t: t[0])
        per_rank = big["bytes"] / n_max
        digest_per_rank = big["digest"] / n_max
        _, _, diff = max(((n, d, r) for n, d, r in rows if d), key=lambda t: t[0])
        print("\nmodel (bytes through the store, all ranks together):")
        print(f"  per rank: {per_rank:.0f} B (digest {digest_per_rank:.0f} B, plan {big['plan']} B, join)")
        print(
            f"  each differing layer adds ~{diff['facts']} B per group sending facts (here {diff['senders']} ranks)"
        )
        for n in (64, 256, 1024):
            print(
                f"  {n:>5} ranks: agree {n * per_rank / 1024:8.1f} KiB; one rank differs "
                f"{(n * per_rank + diff['facts'] + diff['plan'] - big['plan']) / 1024:8.1f} KiB"
            )
        print(
            "  rank 0 makes O(N) store requests (one counter poll loop, one multi_get of N digests);"
            " every other rank makes O(1) (its digest, the plan, maybe its facts)."
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
