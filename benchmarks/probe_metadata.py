"""Benchmark the probe's distribution reader against `importlib.metadata`.

The probe (src/kernodeck/probe/script.py) reads every distribution's name, version, requirements
and RECORD with a hand-written reader of METADATA headers. This measures, inside the target
interpreter, that reader against `importlib.metadata` doing the same work (distributions(), each
one's metadata Name/Version, requires, and RECORD through `files`), in interleaved runs, medians.

    .venv/bin/python benchmarks/probe_metadata.py [--python ENV/bin/python] [--runs 15]

`benchmarks/verify.py --real-only` builds the ~200-distribution environment this is meant for
(its python is printed there). Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "src" / "kernodeck" / "probe" / "script.py"

#: Runs under the target interpreter: one timing of each reader per round, alternating order.
DRIVER = r"""
import importlib.util, json, statistics, sys, time
spec = importlib.util.spec_from_file_location("kd_probe_script", sys.argv[1])
probe = importlib.util.module_from_spec(spec); spec.loader.exec_module(probe)
runs = int(sys.argv[2])

def hand():
    out = []
    for d in probe.distributions():
        rows = probe._record_rows(d["record"]) if d["record"] else []
        out.append((d["name"], d["version"], len(d["requires"]), len(rows)))
    return out

def stdlib():
    import importlib.metadata as im
    out = []
    for d in im.distributions():
        m = d.metadata
        name = m["Name"]
        if not name:
            continue
        files = d.files or []
        out.append((name, m["Version"], len(d.requires or []), len(files)))
    return out

fns = {"hand-written": hand, "importlib.metadata": stdlib}
times = {k: [] for k in fns}
counts = {}
for r in range(runs):
    for k in (list(fns) if r % 2 == 0 else list(reversed(fns))):
        sys.modules.pop("importlib.metadata", None)
        t = time.perf_counter()
        got = fns[k]()
        times[k].append(time.perf_counter() - t)
        counts[k] = [len(got), sum(g[3] for g in got), sum(g[2] for g in got)]
print(json.dumps({"times": times, "counts": counts}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    p = subprocess.run(
        [args.python, "-I", "-c", DRIVER, str(SCRIPT), str(args.runs)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    data = json.loads(p.stdout)
    med = {k: sorted(v)[len(v) // 2] for k, v in data["times"].items()}
    print(f"interpreter: {args.python}; {args.runs} interleaved rounds, medians")
    for k, (n, files, reqs) in data["counts"].items():
        print(
            f"  {k:<20} {med[k] * 1000:8.1f} ms  ({n} distributions, {files} RECORD rows, {reqs} requirements)"
        )
    ratio = med["importlib.metadata"] / med["hand-written"]
    extra = (med["importlib.metadata"] - med["hand-written"]) * 1000
    print(f"  importlib.metadata / hand-written: {ratio:.2f} ({extra:+.1f} ms per probe run)")


if __name__ == "__main__":
    main()
