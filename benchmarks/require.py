"""Benchmark `kernodeck.require()` in a script that imports torch, against `import torch` alone.

    .venv/bin/python benchmarks/require.py [--runs 7] [--python PY] [--baseline-src DIR] [--workdir DIR]
        [--dists N] [--before-only] [--no-first]

`--python` is the interpreter that has torch installed (default: this one). A small manifest for
the installed torch CPU build is written in a temporary folder (one `linux-x86_64` platform with
backend `cpu`, `torch==<installed>`, and a lock pinning torch and every distribution it needs, at
the installed versions).

`--dists 375` checks a realistic environment instead (issue #45's case): a venv beside a real
torch with 375 distributions, every one of them locked (`build_env`): every distribution of
`--python`'s site-packages (hard links: torch's files are not copied), then clones of its small
ones (real copies under new names, RECORD rewritten) up to N. Built once in `--workdir`, kept for
the next run (25 s here; 247 clones, 20,450 files, 0.54 GB copied; 44,048 RECORD files in all).

Variants, run interleaved (one run of each per round, the order rotated every round), medians
reported with ratios against `import torch`; the paired ratio is the median of each run against
`import torch` in the same round (steadier on a shared machine, whose load drifts between rounds);
the time inside the script is require() itself from after `import torch` (its ratio adds that
median to `import torch`'s), or require() and the import together (before torch):

- `import torch`: `python -c "import torch"`;
- `require warm, before torch`: `kernodeck.require(manifest); import torch`, the first lines of a
  training script (torch is imported by require(), while the environment probe runs);
- `require warm`: `import torch; kernodeck.require(manifest)` with a cache that already holds this
  environment's RECORD verification (one require ran before);
- `require first`: the same with an empty cache directory (every installed file hashed);
- `require warm, isolated`: warm, with `isolate_torch=True` (torch imported again in a probe process);
- `baseline ...` (with `--baseline-src`, e.g. main's src): the same scripts against another
  Kernodeck source tree, for a before/after ratio in the same run.

Modules are compiled once (an untimed round, `PYTHONPYCACHEPREFIX` in the work folder), as for an
installed Kernodeck. Not part of `make test`; prints a table and the load average. Offline. Times
on a shared machine are noisy: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
if sys.argv[1:] == ["all"]:
    want = {n: d.version for n, d in dists.items()}
    todo = []
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


def project(work: Path, python: str, *, every: bool = False) -> Path:
    """The manifest and lock of the benchmark: torch's closure, or (`every`) every distribution."""
    cmd = [python, "-c", _CLOSURE, *(["all"] if every else [])]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
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


def _site_packages(python: str) -> Path:
    out = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


#: What a cloned distribution may carry: a RECORD of at most this many rows (torch and the like
#: appear once, as the real distributions they are).
CLONE_MAX_ROWS = 700


def _clone_sources(site: Path) -> list[Path]:
    """The dist-info folders of `site` worth cloning: small, RECORD-installed, no scripts outside."""
    out = []
    for d in sorted(site.glob("*.dist-info")):
        record = d / "RECORD"
        if not record.is_file() or d.name.startswith("kernodeck-"):
            continue
        rows = record.read_text("utf-8").splitlines()
        if len(rows) <= CLONE_MAX_ROWS and not any(r.startswith("..") for r in rows):
            out.append(d)
    return out


def _clone(site: Path, dist_info: Path, n: int) -> None:
    """A copy of the distribution `dist_info` (files of `site`) as the distribution `kdb<n>-<name>`:
    every top-level name prefixed, METADATA renamed, RECORD rewritten (file hashes unchanged: the
    same bytes; METADATA's hashed again). Real copies (new inodes), not links."""
    import base64
    import csv
    import hashlib
    import io

    prefix = f"kdb{n:03d}_"
    meta = (dist_info / "METADATA").read_text("utf-8")
    name = re.search(r"^Name: (.*)$", meta, re.M)
    assert name is not None
    new_name = prefix + name.group(1).strip()
    new_info = prefix + dist_info.name
    new_meta = meta.replace(f"Name: {name.group(1)}", f"Name: {new_name}", 1).encode()
    rows = list(csv.reader(io.StringIO((dist_info / "RECORD").read_text("utf-8"))))
    out_rows = []
    for row in rows:
        top, _, rest = row[0].partition("/")
        if top == dist_info.name:
            target = f"{new_info}/{rest}"
            if rest == "RECORD":
                continue
            if rest == "METADATA":
                digest = base64.urlsafe_b64encode(hashlib.sha256(new_meta).digest()).rstrip(b"=")
                row = [target, f"sha256={digest.decode()}", str(len(new_meta))]
                (site / target).parent.mkdir(parents=True, exist_ok=True)
                (site / target).write_bytes(new_meta)
                out_rows.append(row)
                continue
        else:
            target = prefix + row[0]
        src = site / row[0]
        if src.is_file():
            (site / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, site / target)
        out_rows.append([target, *row[1:]])
    out_rows.append([f"{new_info}/RECORD", "", ""])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(out_rows)
    (site / new_info / "RECORD").write_text(buf.getvalue(), "utf-8")


def build_env(work: Path, python: str, dists: int) -> str:
    """A venv of `dists` distributions beside a real torch: every distribution of `python`'s
    site-packages (hard links: torch's 1.6 GB are not copied) but Kernodeck's own, and clones of
    its small ones (real copies, cycled in name order) up to `dists`. Returns its interpreter."""
    venv = work / "venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = _site_packages(str(venv / "bin" / "python"))
        real = _site_packages(python)
        for entry in sorted(real.iterdir()):
            if entry.name.startswith(("kernodeck", "_editable_impl_kernodeck", "__pycache__")):
                continue
            if entry.is_dir():
                shutil.copytree(entry, site / entry.name, copy_function=os.link, symlinks=True)
            else:
                os.link(entry, site / entry.name)
        # the scripts their RECORDs list (../../../bin/...), the same bytes
        real_bin = Path(python).parent
        for script in sorted(real_bin.iterdir()):
            if script.is_file() and not (venv / "bin" / script.name).exists():
                os.link(script, venv / "bin" / script.name)
        if (real_bin.parent / "share").is_dir():  # manual pages
            shutil.copytree(
                real_bin.parent / "share", venv / "share", copy_function=os.link, dirs_exist_ok=True
            )
        sources = _clone_sources(site)
        have = len(list(site.glob("*.dist-info")))
        for n in range(max(0, dists - have)):
            _clone(site, sources[n % len(sources)], n)
    return str(venv / "bin" / "python")


#: What the script prints on stderr: the seconds from after `import torch` to after require().
INSIDE = "kernodeck-bench-require-seconds="


def script(manifest: Path, isolate: bool, *, before: bool = False) -> str:
    """The timed script: `import torch` then require() (`before`: require() then `import torch`,
    timed together inside)."""
    kw = ", isolate_torch=True" if isolate else ""
    call = f"import kernodeck\nkernodeck.require({str(manifest)!r}{kw})\n"
    body = call + "import torch\n" if before else "import torch\n" + "t = time.perf_counter()\n" + call
    return (
        "import sys, time\nt = time.perf_counter()\n"
        + body
        + f"print({INSIDE!r} + repr(time.perf_counter() - t), file=sys.stderr)\n"
    )


#: A variant: its command, its environment (None: a first run, an empty cache folder of its own
#: made for each run from the src folder given).
Variant = tuple[list[str], "dict[str, str] | None", "Path | None"]


def variants_of(args: argparse.Namespace, work: Path, python: str, manifest: Path) -> dict[str, Variant]:
    """The variants to run, by name, in the order of the table."""
    base_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    base_env["NO_COLOR"] = "1"
    # as an installed Kernodeck runs: compiled modules (the untimed first round writes them)
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    base_env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")

    def env(src: Path, cache: Path) -> dict[str, str]:
        return {**base_env, "PYTHONPATH": str(src), "KERNODECK_CACHE_DIR": str(cache)}

    def run(isolate: bool = False, before: bool = False) -> list[str]:
        return [python, "-c", script(manifest, isolate, before=before)]

    out: dict[str, Variant] = {"import torch": ([python, "-c", "import torch"], dict(base_env), None)}
    trees = [("require", SRC, "warm")]
    if args.baseline_src:
        trees.append(("baseline", Path(args.baseline_src).resolve(), "bwarm"))
    for label, src, warm in trees:
        out[f"{label} warm, before torch"] = (run(before=True), env(src, work / warm), None)
        if not args.before_only:
            out[f"{label} warm"] = (run(), env(src, work / warm), None)
            if not args.no_first:
                out[f"{label} first"] = (run(), None, src)
            if label == "require":
                out["require warm, isolated"] = (run(isolate=True), env(src, work / warm), None)
    return out


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Runs:
    """Wall, CPU (the script and every probe it waited for) and inside times of each variant."""

    def __init__(self, variants: dict[str, Variant], work: Path) -> None:
        self.variants = variants
        self.work = work
        self.wall: dict[str, list[float]] = {name: [] for name in variants}
        self.cpu: dict[str, list[float]] = {name: [] for name in variants}
        # require() itself, timed inside the script: `import torch` alone varies by more than the
        # difference being measured
        self.inside: dict[str, list[float]] = {name: [] for name in variants}

    def once(self, name: str, n: int) -> None:
        """One run (n < 0: untimed)."""
        cmd, e, first_src = self.variants[name]
        fresh: Path | None = None
        if e is None:  # a first run: an empty cache directory of its own
            assert first_src is not None
            fresh = self.work / f"first-{n}-{abs(hash(name)) % 10_000}"
            e = {**(self.variants["import torch"][1] or {}), "PYTHONPATH": str(first_src)}
            e["KERNODECK_CACHE_DIR"] = str(fresh)
        c0, t = children_cpu(), time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, cwd=self.work, timeout=600)
        took, cpu = time.perf_counter() - t, children_cpu() - c0
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
        if p.returncode != 0:
            raise SystemExit(f"{name} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        if n >= 0:
            self.wall[name].append(took)
            self.cpu[name].append(cpu)
            self.inside[name] += [
                float(line[len(INSIDE) :]) for line in p.stderr.splitlines() if line.startswith(INSIDE)
            ]

    def table(self) -> list[str]:
        base = statistics.median(self.wall["import torch"])
        base_cpu = statistics.median(self.cpu["import torch"])
        lines = [
            "| variant | wall s (min-max) | added wall s | wall ratio | paired wall ratio | timed inside s | "
            "(import torch + it) / import torch | CPU s | CPU ratio |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        torch_walls = self.wall["import torch"]
        for name, ts in self.wall.items():
            med, c = statistics.median(ts), statistics.median(self.cpu[name])
            # each run against `import torch` in the same round (minutes apart, the load is not the same)
            paired = statistics.median(t / b for t, b in zip(ts, torch_walls, strict=True))
            own = statistics.median(self.inside[name]) if self.inside[name] else None
            own_cells = " | "
            if own is not None:
                # before torch, the inside time holds the import: no sum to make
                own_cells = f"{own:.3f} | " + ("" if "before" in name else f"{(base + own) / base:.2f}")
            lines.append(
                f"| {name} | {med:.2f} ({min(ts):.2f}-{max(ts):.2f}) | {med - base:+.2f} | {med / base:.2f} "
                f"| {paired:.2f} | {own_cells} | {c:.2f} | {c / base_cpu:.2f} |"
            )
        return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--python", default=sys.executable, help="an interpreter that has torch")
    ap.add_argument("--baseline-src", default=None, help="another Kernodeck src/ to compare with")
    ap.add_argument("--workdir", default=None, help="kept (with the --dists venv) for the next run")
    ap.add_argument("--no-first", action="store_true", help="leave out the first-run variants (slow)")
    ap.add_argument("--before-only", action="store_true", help="only the require()-before-torch variants")
    ap.add_argument(
        "--dists",
        type=int,
        default=0,
        help="check a venv of this many distributions, every one locked (build_env), not --python's",
    )
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="kd-bench-require-"))
    work.mkdir(parents=True, exist_ok=True)
    python = build_env(work, args.python, args.dists) if args.dists else args.python
    manifest = project(work, python, every=bool(args.dists))
    runs = Runs(variants_of(args, work, python, manifest), work)
    # warm the caches (and the page cache) once, untimed
    names = list(runs.variants)
    for name in names:
        runs.once(name, -1)
    for n in range(args.runs):
        k = n % len(names)
        for name in names[k:] + names[:k]:
            runs.once(name, n)
    pins = len(re.findall(r"^\S+==", (work / "requirements-rebuild-linux-x86_64.txt").read_text(), re.M))
    print(f"# require() vs import torch: {args.runs} interleaved runs, medians ({python}, {pins} pins)")
    print()
    print("\n".join(runs.table()))
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
