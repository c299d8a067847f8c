"""Benchmark `kernodeck.require()` in a script that imports torch, against `import torch` alone.

    .venv/bin/python benchmarks/require.py [--runs 7] [--python PY] [--baseline-src DIR] [--workdir DIR]

`--python` is the interpreter that has torch installed (default: this one). A small manifest for
the installed torch CPU build is written in a temporary folder (one `linux-x86_64` platform with
backend `cpu`, `torch==<installed>`, and a lock pinning torch and every distribution it needs, at
the installed versions). Variants, run interleaved (one run of each per round, the order rotated
every round), medians reported with ratios against `import torch`, and the time of require()
itself, measured inside the script from after `import torch` (its ratio adds that median to
`import torch`'s: steadier than the difference of two wall-time medians, since `import torch`
alone varies by more than the difference being measured):

- `import torch`: `python -c "import torch"`;
- `require warm`: `import torch; kernodeck.require(manifest)` with a cache that already holds this
  environment's RECORD verification (one require ran before);
- `require first`: the same with an empty cache directory (every installed file hashed);
- `require warm, isolated`: warm, with `isolate_torch=True` (torch imported again in a probe process);
- `baseline warm` / `baseline first` (with `--baseline-src`, e.g. main's src): the same script
  against another Kernodeck source tree, for a before/after ratio in the same run.

Modules are compiled once (an untimed round, `PYTHONPYCACHEPREFIX` in the work folder), as for an
installed Kernodeck. Not part of `make test`; prints a table. Offline. Times on a shared machine are noisy: read the
ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# The environment's distributions and torch's dependency closure, read under the torch interpreter.
_CLOSURE = r"""
import json, re, sys
from importlib import metadata
def canon(n): return re.sub(r"[-_.]+", "-", n).lower()
dists = {canon(d.metadata["Name"]): d for d in metadata.distributions()}
want, todo = {}, ["torch"]
while todo:
    n = canon(todo.pop())
    d = dists.get(n)
    if d is None or n in want:
        continue
    want[n] = d.version
    for r in d.requires or []:
        if "extra ==" in r:
            continue
        todo.append(re.split(r"[ ;<>=!~\[(]", r.strip(), maxsplit=1)[0])
import platform
print(json.dumps({"pins": want, "py": "%d.%d" % sys.version_info[:2], "machine": platform.machine()}))
"""

MANIFEST = """\
schema-version = 1

[reference]
name = "bench-require"
id = "1"

[python]
version = "{py}"

[packages]
requirements = ["torch=={torch}"]

[[platform]]
name = "linux-{arch}"
os = "linux"
arch = "{arch}"
backend = "cpu"

# An application sample require() does not run unless asked (checks=True): it would add 20 s.
[[check]]
name = "sample"
run = ["python", "-c", "import time; time.sleep(20)"]
"""


def project(work: Path, python: str) -> Path:
    out = subprocess.run([python, "-c", _CLOSURE], capture_output=True, text=True, check=True)
    info = json.loads(out.stdout)
    pins: dict[str, str] = info["pins"]
    if "torch" not in pins:
        raise SystemExit(f"{python} has no torch installed")
    arch = info["machine"]
    (work / "repro.toml").write_text(
        MANIFEST.format(py=info["py"], torch=pins["torch"].split("+")[0], arch=arch)
    )
    platform = f"linux-{arch}"
    lines = [f"# platform: {platform}", "--only-binary :all:", ""]
    for i, (name, version) in enumerate(sorted(pins.items())):
        lines += [f"{name}=={version} \\", f"    --hash=sha256:{i:064x}", "    # via -r repro.toml"]
    (work / f"requirements-rebuild-{platform}.txt").write_text("\n".join(lines) + "\n")
    return work / "repro.toml"


#: What the script prints on stderr: the seconds from after `import torch` to after require().
INSIDE = "kernodeck-bench-require-seconds="


def script(manifest: Path, isolate: bool) -> str:
    kw = ", isolate_torch=True" if isolate else ""
    return (
        "import torch\nimport sys, time\nt = time.perf_counter()\nimport kernodeck\n"
        f"kernodeck.require({str(manifest)!r}{kw})\n"
        f"print({INSIDE!r} + repr(time.perf_counter() - t), file=sys.stderr)\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--python", default=sys.executable, help="an interpreter that has torch")
    ap.add_argument("--baseline-src", default=None, help="another Kernodeck src/ to compare with")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--no-first", action="store_true", help="leave out the first-run variants (slow)")
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kd-bench-require-"))
    work.mkdir(parents=True, exist_ok=True)
    manifest = project(work, args.python)
    base_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    base_env["NO_COLOR"] = "1"
    # as an installed Kernodeck runs: compiled modules (the untimed first round writes them)
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    base_env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")

    def env(src: Path, cache: Path) -> dict[str, str]:
        return {**base_env, "PYTHONPATH": str(src), "KERNODECK_CACHE_DIR": str(cache)}

    variants: dict[str, tuple[list[str], dict[str, str] | None, Path | None]] = {
        "import torch": ([args.python, "-c", "import torch"], dict(base_env), None),
        "require warm": ([args.python, "-c", script(manifest, False)], env(SRC, work / "warm"), None),
        "require first": ([args.python, "-c", script(manifest, False)], None, SRC),
        "require warm, isolated": (
            [args.python, "-c", script(manifest, True)],
            env(SRC, work / "warm"),
            None,
        ),
    }
    if args.no_first:
        del variants["require first"]
    if args.baseline_src:
        bsrc = Path(args.baseline_src).resolve()
        variants["baseline warm"] = (
            [args.python, "-c", script(manifest, False)],
            env(bsrc, work / "bwarm"),
            None,
        )
        if not args.no_first:
            variants["baseline first"] = ([args.python, "-c", script(manifest, False)], None, bsrc)

    cpu: dict[str, list[float]] = {name: [] for name in variants}
    # require() itself, timed inside the script: `import torch` alone varies by more than the
    # difference being measured
    inside: dict[str, list[float]] = {name: [] for name in variants}

    def children_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def run_once(name: str, n: int) -> float:
        cmd, e, first_src = variants[name]
        fresh: Path | None = None
        if e is None:  # a first run: an empty cache directory of its own
            assert first_src is not None
            fresh = work / f"first-{n}-{abs(hash(name)) % 10_000}"
            e = env(first_src, fresh)
        c0, t = children_cpu(), time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=work, timeout=600)
        took = time.perf_counter() - t
        if n >= 0:
            cpu[name].append(children_cpu() - c0)  # the script and every probe it waited for
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
        if p.returncode != 0:
            raise SystemExit(f"{name} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        if n >= 0:
            inside[name] += [
                float(line[len(INSIDE) :]) for line in p.stderr.splitlines() if line.startswith(INSIDE)
            ]
        return took

    # warm the caches (and the page cache) once, untimed
    for name in variants:
        run_once(name, -1)
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for n in range(args.runs):
        k = n % len(names)
        for name in names[k:] + names[:k]:
            times[name].append(run_once(name, n))
    base = statistics.median(times["import torch"])
    base_cpu = statistics.median(cpu["import torch"])
    print(f"# require() vs import torch: {args.runs} interleaved runs, medians ({args.python})")
    print()
    print(
        "| variant | wall s (min-max) | added wall s | wall ratio | require() itself s | "
        "(import torch + it) / import torch | CPU s | CPU ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        ts = times[name]
        med, c = statistics.median(ts), statistics.median(cpu[name])
        own = statistics.median(inside[name]) if inside[name] else None
        own_cells = f"{own:.3f} | {(base + own) / base:.2f}" if own is not None else " | "
        print(
            f"| {name} | {med:.2f} ({min(ts):.2f}-{max(ts):.2f}) | {med - base:+.2f} | {med / base:.2f} "
            f"| {own_cells} | {c:.2f} | {c / base_cpu:.2f} |"
        )
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
