"""Benchmark Kernodeck's start-up: what every command and `kernodeck.require()` pay before any work.

    PYTHONPATH=src .venv/bin/python benchmarks/startup.py [--runs 9] [--baseline-src DIR]

Variants, each a fresh interpreter (this one), run interleaved (one run of each per round, the
order rotated every round), medians reported with the ratio to `python -c pass`:

- `python -c pass`: the interpreter alone (the unit of the ratios);
- `kernodeck --help`, `kernodeck lock --help`: the command line's own start-up;
- `import kernodeck.require`: `import kernodeck; kernodeck.require` (what a training script imports);
- `require() data-only`: `kernodeck.require(manifest, only=["data"])` on a one-file manifest
  (imports, manifest, report and the check: the whole path of a script's first line, no probe);
- `verify --only data`: the same check from the command line;
- `lock (replayed)`: `kernodeck lock -q` of a two-platform project that replays its recorded lock
  (a loopback index started here served the first, untimed lock; the replay reads nothing from it).

With `--baseline-src` (e.g. main's `src`), every Kernodeck variant also runs against that source
tree in the same rounds (`... [baseline]` rows, and `after/before` ratios). `--instructions` also
counts the instructions each variant executes, once, under valgrind (`cachegrind`, the process
itself, not its children such as the lock's pip subprocess): deterministic where a shared machine
makes times swing. Modules are compiled in
an untimed round first, as for an installed Kernodeck. Offline; not part of `make test`. Times on
a shared machine are noisy: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.index_factory import IndexFactory  # noqa: E402

PY = sys.executable

DATA_MANIFEST = """\
schema-version = 1

[reference]
name = "bench-startup"
id = "1"

[python]
version = "{py}"

[[data]]
name = "train"
path = "train.bin"
sha256 = "{sha}"

[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"
"""

LOCK_MANIFEST = """\
schema-version = 1

[reference]
name = "bench-startup-lock"
id = "1"

[python]
version = "3.11"

[packages]
requirements = ["app"]
exclude-newer = "2026-06-01T00:00:00Z"

[[packages.index]]
name = "default"
url = "{url}"
default = true

[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"

[[platform]]
name = "windows"
os = "windows"
arch = "x86_64"
"""


def data_project(work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    data = b"kernodeck start-up benchmark\n" * 1000
    (work / "train.bin").write_bytes(data)
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (work / "repro.toml").write_text(DATA_MANIFEST.format(py=py, sha=hashlib.sha256(data).hexdigest()))
    return work / "repro.toml"


def lock_project(work: Path, url: str) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    (work / "repro.toml").write_text(LOCK_MANIFEST.format(url=url))
    return work / "repro.toml"


def env_for(src: Path, work: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_", "KERNODECK_", "VIRTUAL_ENV", "CONDA_"))
        and k != "PYTHONDONTWRITEBYTECODE"  # compiled once into the work folder, as when installed
    }
    env.update(
        PYTHONPATH=str(src),
        PIP_CONFIG_FILE=os.devnull,
        NO_COLOR="1",
        XDG_CACHE_HOME=str(work / "xdg-cache"),
        PYTHONPYCACHEPREFIX=str(work / "pycache"),
    )
    return env


def run_once(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, from `os.wait4`) of one run; exits on a failure."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            text = out.read().decode(errors="replace")
            raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{text}")
    return elapsed, usage.ru_utime + usage.ru_stime


def instructions(cmd: list[str], env: dict[str, str], cwd: Path) -> int:
    """Instructions executed by one run of `cmd` (valgrind's `I refs`; children not followed)."""
    vg = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    proc = subprocess.run([*vg, *cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"valgrind failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--baseline-src", type=Path, default=None, help="another Kernodeck src tree to compare")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    args = ap.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on PATH")

    trees = {"": ROOT / "src"}
    if args.baseline_src is not None:
        trees[" [baseline]"] = args.baseline_src.resolve()
    work = Path(tempfile.mkdtemp(prefix="kd-startup-", dir=args.workdir))
    factory = IndexFactory(work / "index")
    factory.add_wheel("app", "1.0", requires=["dep>=1", 'winonly; sys_platform == "win32"'])
    factory.add_wheel("dep", "1.0", upload_time="2024-01-01T00:00:00Z")
    factory.add_wheel("dep", "2.0", upload_time="2024-02-01T00:00:00Z")
    factory.add_wheel("winonly", "1.0")

    variants: dict[str, tuple[list[str], dict[str, str], Path]] = {}
    plain_env = env_for(ROOT / "src", work / "plain")
    variants["python -c pass"] = ([PY, "-c", "pass"], plain_env, work)
    with factory.serve() as server:
        for suffix, src in trees.items():
            tw = work / f"tree{len(variants)}"
            env = env_for(src, tw)
            data = data_project(tw / "data")
            lock = lock_project(tw / "lock", server.url())
            lock_cmd = [PY, "-m", "kernodeck", "lock", "-q", "--cache-dir", str(tw / "cache"), str(lock)]
            run_once(lock_cmd, env, tw)  # the first lock, recorded for replay (and every module compiled)
            require = f"import kernodeck; kernodeck.require({str(data)!r}, only=['data'])"
            variants[f"kernodeck --help{suffix}"] = ([PY, "-m", "kernodeck", "--help"], env, tw)
            variants[f"kernodeck lock --help{suffix}"] = ([PY, "-m", "kernodeck", "lock", "--help"], env, tw)
            variants[f"import kernodeck.require{suffix}"] = (
                [PY, "-c", "import kernodeck; kernodeck.require"],
                env,
                tw,
            )
            variants[f"require() data-only{suffix}"] = ([PY, "-c", require], env, tw)
            variants[f"verify --only data{suffix}"] = (
                [PY, "-m", "kernodeck", "verify", "--only", "data", str(data)],
                env,
                tw,
            )
            variants[f"lock (replayed){suffix}"] = (lock_cmd, env, tw)
        served_before = len(server.requests)
        for cmd, env, cwd in variants.values():  # untimed: compile every module once
            run_once(cmd, env, cwd)
        names = list(variants)
        times: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.runs):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                cmd, env, cwd = variants[n]
                wall, used = run_once(cmd, env, cwd)
                times[n].append(wall)
                cpu[n].append(used)
        instr = {n: instructions(*variants[n]) for n in names} if args.instructions else {}
        replay_requests = len(server.requests) - served_before

    base = statistics.median(times["python -c pass"])
    base_cpu = statistics.median(cpu["python -c pass"])
    load = os.getloadavg()[0]
    print(f"# Start-up: {args.runs} interleaved runs, medians ({PY}; load {load:.2f}, {os.cpu_count()} CPUs)")
    print()
    head = "| variant | wall s | × `python -c pass` | CPU s | × CPU | after/before wall | after/before CPU |"
    rule = "|---|---:|---:|---:|---:|---:|---:|"
    if instr:
        head += " instructions | × | after/before instr |"
        rule += "---:|---:|---:|"
    print(head)
    print(rule)
    for n in names:
        med, c = statistics.median(times[n]), statistics.median(cpu[n])
        before = f"{n} [baseline]"
        vs = vs_cpu = vs_instr = ""
        if before in times:
            vs = f"{med / statistics.median(times[before]):.2f}"
            vs_cpu = f"{c / statistics.median(cpu[before]):.2f}"
        line = f"| {n} | {med:.3f} | {med / base:.2f} | {c:.3f} | {c / base_cpu:.2f} | {vs} | {vs_cpu} |"
        if instr:
            if before in instr:
                vs_instr = f"{instr[n] / instr[before]:.2f}"
            line += f" {instr[n] / 1e6:.0f} M | {instr[n] / instr['python -c pass']:.1f} | {vs_instr} |"
        print(line)
    if replay_requests:
        print(f"\nnote: the replayed locks made {replay_requests} requests to the index (expected none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
