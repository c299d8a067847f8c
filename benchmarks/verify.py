"""Benchmark `kernodeck verify`: packages + contract + system layers against `pip check` and
`uv pip check` on an environment with >= 150 distributions, and fingerprint throughput on a 2 GB
file against `sha256sum`, with a second (cached) run that must not read the file again.

    .venv/bin/python benchmarks/verify.py [--dists 160] [--size-gb 2] [--runs 5] [--workdir DIR]
                                          [--real | --real-only] [--real-cache DIR]

Not part of `make test`; prints a table. Offline: the wheels are generated locally.

`--real` adds a real environment of ~200 distributions with torch (REAL_STACK, installed once by
pip with this machine's own pip configuration into a venv under `--real-cache`, default
~/.cache/kernodeck-bench, and reused while the list is unchanged): interleaved runs of `pip check`
and of `kernodeck verify` (packages+contract) cold (a fresh, empty cache: every RECORD file hashed)
and warm, with ratios, the files and GB hashed and the hashing rate. `--real-only` runs only that.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.index_factory import build_wheel_bytes  # noqa: E402

PY = sys.executable
from benchmarks.installed import as_installed  # noqa: E402

ENV = {**as_installed(os.environ), "PIP_CONFIG_FILE": os.devnull, "NO_COLOR": "1"}


def timed(cmd: list[str], runs: int, ok: tuple[int, ...] = (0,)) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        times.append(time.perf_counter() - t)
        if p.returncode not in ok:
            raise SystemExit(
                f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
            )
    return statistics.median(times), times


def build_env(work: Path, n: int) -> tuple[Path, Path]:
    """A venv with n generated distributions (a dependency chain with fan-out), a manifest and a lock."""
    wheels = work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    hashes = {}
    for i in range(n):
        name = f"bench-pkg-{i:03d}"
        requires = [f"bench-pkg-{j:03d}>=1.0" for j in (i - 1, i // 2) if 0 <= j < i]
        meta = "Metadata-Version: 2.1\nName: {}\nVersion: 1.0\n{}\n".format(
            name, "".join(f"Requires-Dist: {r}\n" for r in sorted(set(requires)))
        )
        mod = name.replace("-", "_")
        files = {
            f"{mod}/m{k}.py": (f"# {name} {k}\n" + "x = 1\n" * (200 * (k + 1))).encode() for k in range(12)
        }
        fn, data = build_wheel_bytes(name, "1.0", metadata=meta, files=files, payload_size=64 * 1024)
        (wheels / fn).write_bytes(data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    venv = work / "venv"
    if not venv.exists():
        subprocess.run([PY, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [
                PY,
                "-m",
                "uv",
                "pip",
                "install",
                "--python",
                str(venv / "bin" / "python"),
                "--no-index",
                "--find-links",
                str(wheels),
                *hashes,
            ],
            check=True,
            env=ENV,
            capture_output=True,
        )
    project = work / "project"
    project.mkdir(exist_ok=True)
    (project / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "bench"\nid = "1"\n[python]\n'
        f'version = "{sys.version_info.major}.{sys.version_info.minor}"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    lines = ["# platform: linux-x86_64", "--only-binary :all:", ""]
    for name, h in sorted(hashes.items()):
        lines += [f"{name}==1.0 \\", f"    --hash=sha256:{h}"]
    (project / "requirements-rebuild-linux-x86_64.txt").write_text("\n".join(lines) + "\n")
    return venv / "bin" / "python", project / "repro.toml"


#: The real environment: popular pure and binary packages and their dependencies (~200 distributions).
REAL_STACK = (
    "torch==2.13.0",
    "numpy",
    "pandas",
    "scipy",
    "scikit-learn",
    "matplotlib",
    "transformers",
    "datasets",
    "accelerate",
    "jupyter",
    "requests",
    "flask",
    "django",
    "fastapi",
    "uvicorn",
    "sqlalchemy",
    "pydantic",
    "pytest",
    "black",
    "ruff",
    "mypy",
    "boto3",
    "pillow",
    "sympy",
    "networkx",
    "jinja2",
    "click",
    "rich",
    "tqdm",
    "pyyaml",
    "lxml",
    "cryptography",
    "aiohttp",
    "httpx",
    "seaborn",
    "statsmodels",
    "numba",
    "pyarrow",
    "polars",
    "sentencepiece",
    "safetensors",
    "einops",
    "timm",
    "openpyxl",
    "beautifulsoup4",
    "sphinx",
    "celery",
    "redis",
    "psutil",
    "tensorboard",
    "onnx",
    "opencv-python-headless",
    "plotly",
    "bokeh",
    "dask",
    "xarray",
    "h5py",
    "shapely",
)


def build_real_env(cache_root: Path) -> Path:
    """The venv of REAL_STACK under cache_root (built by pip with the machine's pip configuration
    the first time, reused after); returns its python."""
    key = hashlib.sha256("\n".join([sys.version, *REAL_STACK]).encode()).hexdigest()[:12]
    venv = cache_root / f"verify-real-{key}"
    python = venv / "bin" / "python"
    done = venv / ".kernodeck-bench-complete"
    if done.exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    cache_root.mkdir(parents=True, exist_ok=True)
    subprocess.run([PY, "-m", "venv", str(venv)], check=True)
    print(f"installing {len(REAL_STACK)} requirements into {venv} (once) ...", flush=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *REAL_STACK],
        check=True,
        timeout=3600,
    )
    done.write_text("\n".join(REAL_STACK) + "\n")
    return python


def real_project(work: Path, python: Path) -> Path:
    """A manifest and a lock that pins exactly what the real environment holds."""
    from kernodeck.probe.runner import ProbeRequest, RealProbe

    facts = RealProbe(python).collect(ProbeRequest(records=False, torch=False, smi=False))
    proj = work / "real-project"
    proj.mkdir(parents=True, exist_ok=True)
    (proj / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "real"\nid = "1"\n[python]\n'
        f'version = "{sys.version_info.major}.{sys.version_info.minor}"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    lines = ["# platform: linux-x86_64", ""]
    for d in sorted(facts.dists().values(), key=lambda d: d.key):
        lines += [f"{d.name}=={d.version} \\", f"    --hash=sha256:{'0' * 64}"]
    (proj / "requirements-rebuild-linux-x86_64.txt").write_text("\n".join(lines) + "\n")
    return proj / "repro.toml"


def hashed_totals(python: Path) -> tuple[int, int, int]:
    """(distributions, RECORD files hashed, bytes hashed) of one cold records check."""
    from kernodeck.probe.runner import ProbeRequest, RealProbe

    facts = RealProbe(python, rehash=True).collect(ProbeRequest(torch=False, smi=False))  # no cache
    return len(facts.distributions), facts.records.hashed, facts.records.bytes_hashed


def bench_real(work: Path, cache_root: Path, runs: int, baseline_src: str | None = None) -> None:
    """Interleaved runs: pip check, verify cold (fresh cache), verify warm; medians of wall and of
    CPU time (user + system of the process tree: steadier than wall on a shared machine) and
    ratios. `baseline_src`: also verify cold with that checkout's src (before/after)."""
    import resource

    python = build_real_env(cache_root)
    manifest = real_project(work, python)
    n, files, nbytes = hashed_totals(python)
    kd = [PY, "-m", "kernodeck", "verify", str(manifest), "--python", str(python), "--no-compute"]
    kd += ["--only", "packages", "--only", "contract"]
    warm_cache = work / "real-cache-warm"
    subprocess.run(kd, capture_output=True, env={**ENV, "KERNODECK_CACHE_DIR": str(warm_cache)})
    labels = {
        "pip": "pip check",
        "cold": "kernodeck verify packages+contract, cold (every file hashed)",
        "warm": "kernodeck verify packages+contract, warm (stat cache)",
    }
    if baseline_src:
        labels["base"] = f"  same, cold, with {baseline_src}"
    wall: dict[str, list[float]] = {k: [] for k in labels}
    cpu: dict[str, list[float]] = {k: [] for k in labels}
    for r in range(runs):
        cold_cache = work / f"real-cache-cold-{r}"
        cmds = {
            "pip": ([str(python), "-m", "pip", "check"], {}),
            "cold": (kd, {"KERNODECK_CACHE_DIR": str(cold_cache)}),
            "warm": (kd, {"KERNODECK_CACHE_DIR": str(warm_cache)}),
        }
        if baseline_src:
            cmds["base"] = (
                kd,
                {"KERNODECK_CACHE_DIR": str(cold_cache) + "-base", "PYTHONPATH": baseline_src},
            )
        order = list(cmds) if r % 2 == 0 else list(reversed(cmds))
        for name in order:
            cmd, extra = cmds[name]
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, env={**ENV, **extra}, timeout=600)
            wall[name].append(time.perf_counter() - t)
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime)
            if p.returncode not in (0, 1) or (name == "pip" and p.returncode != 0):
                raise SystemExit(
                    f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
                )
        shutil.rmtree(cold_cache, ignore_errors=True)
        shutil.rmtree(str(cold_cache) + "-base", ignore_errors=True)
    med = {k: statistics.median(v) for k, v in wall.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    gb = nbytes / 1e9
    print()
    print(f"real environment: {n} distributions, {files} RECORD files, {gb:.2f} GB ({python.parent.parent})")
    print(f"{runs} interleaved runs, medians (wall: every run, s)")
    print(f"  {'command':<62} {'wall s':>7} {'CPU s':>7}")
    for k, label in labels.items():
        print(f"  {label:<62} {med[k]:7.3f} {mcpu[k]:7.3f}  {[round(t, 2) for t in wall[k]]}")
    print(f"  {'ratios':<62} {'wall':>7} {'CPU':>7}")
    for k in [k for k in labels if k != "pip"]:
        print(f"  {k + ' / pip check':<62} {med[k] / med['pip']:7.2f} {mcpu[k] / mcpu['pip']:7.2f}")
    if baseline_src:
        print(
            f"  {'cold / baseline cold':<62} {med['cold'] / med['base']:7.2f} {mcpu['cold'] / mcpu['base']:7.2f}"
        )
    print(
        f"  hashed cold: {files} files, {gb:.2f} GB; {gb / med['cold']:.2f} GB/s over the whole verify "
        f"(wall), {gb / mcpu['cold']:.2f} GB per CPU-second"
    )


def count_dists(python: Path) -> int:
    out = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(len(list(m.distributions())))"],
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dists", type=int, default=160)
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--real", action="store_true", help="also benchmark a real ~200-distribution venv")
    ap.add_argument("--real-only", action="store_true", help="only the real ~200-distribution venv")
    ap.add_argument("--real-cache", default=str(Path.home() / ".cache" / "kernodeck-bench"))
    ap.add_argument("--baseline-src", default=None, help="also time a cold verify with this src (A/B)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="kd-bench-"))
    if args.real or args.real_only:
        bench_real(work, Path(args.real_cache), args.runs, args.baseline_src)
        if args.real_only:
            if not args.workdir:
                shutil.rmtree(work, ignore_errors=True)
            return
    cache = work / "cache"
    ENV["KERNODECK_CACHE_DIR"] = str(cache)
    python, manifest = build_env(work, args.dists)
    n = count_dists(python)
    kd = [PY, "-m", "kernodeck", "verify", str(manifest), "--python", str(python), "--no-compute"]
    layers = ["--only", "packages", "--only", "contract", "--only", "system"]
    rows: list[tuple[str, float, str]] = []
    print(f"environment: {n} distributions in {python.parent.parent}")
    med, _ = timed([*kd, *layers, "--rehash"], args.runs)
    rows.append(
        (
            "kernodeck verify --no-compute (packages+contract+system), --rehash: every RECORD file hashed",
            med,
            "",
        )
    )
    med, _ = timed([*kd, *layers], args.runs)
    rows.append(("kernodeck verify --no-compute (packages+contract+system), fingerprint cache warm", med, ""))
    med, _ = timed([*kd], args.runs)
    rows.append(("kernodeck verify --no-compute (all layers, incl. torch probe attempt)", med, ""))
    med, _ = timed([PY, "-m", "pip", "--python", str(python), "check"], args.runs)
    rows.append(("pip --python ENV check", med, ""))
    med, _ = timed([str(python), "-m", "pip", "check"], args.runs)
    rows.append(("ENV/bin/python -m pip check", med, ""))
    med, _ = timed([PY, "-m", "uv", "pip", "check", "--python", str(python)], args.runs)
    rows.append(("uv pip check --python ENV", med, ""))

    # the test environment itself: ~75 distributions, torch included (~26k files, 1.3 GB)
    big = Path(PY)
    rows_big: list[tuple[str, float]] = []
    if (ROOT / ".venv" / "bin" / "python").exists():
        proj = work / "venv-project"
        proj.mkdir(exist_ok=True)
        (proj / "repro.toml").write_text(manifest.read_text().replace('name = "bench"', 'name = "dev"'))
        from kernodeck.probe.runner import ProbeRequest, RealProbe

        facts = RealProbe(big).collect(ProbeRequest(records=False, torch=False))
        lines = ["# platform: linux-x86_64", ""]
        for d in sorted(facts.dists().values(), key=lambda d: d.key):
            lines += [f"{d.name}=={d.version} \\", f"    --hash=sha256:{'0' * 64}"]
        (proj / "requirements-rebuild-linux-x86_64.txt").write_text("\n".join(lines) + "\n")
        kd_big = [
            PY,
            "-m",
            "kernodeck",
            "verify",
            str(proj / "repro.toml"),
            "--python",
            str(big),
            "--no-compute",
            *layers,
        ]
        med, _ = timed([*kd_big, "--rehash"], max(1, args.runs // 2), ok=(0, 1))
        rows_big.append((f"kernodeck verify, .venv ({len(facts.dists())} dists, torch), --rehash", med))
        med, _ = timed(kd_big, args.runs, ok=(0, 1))
        rows_big.append((f"kernodeck verify, .venv ({len(facts.dists())} dists, torch), cache warm", med))
        med, _ = timed([PY, "-m", "pip", "check"], args.runs)
        rows_big.append(("pip check, .venv", med))
        med, _ = timed([PY, "-m", "uv", "pip", "check", "--python", str(big)], args.runs)
        rows_big.append(("uv pip check, .venv", med))

    # fingerprint throughput
    big_file = work / "project" / "data" / "big.bin"  # inside the project: data paths stay there
    big_file.parent.mkdir(exist_ok=True)
    size = int(args.size_gb * (1 << 30))
    if not big_file.exists() or big_file.stat().st_size != size:
        with open(big_file, "wb") as f:
            chunk = os.urandom(64 << 20)
            for _ in range(size // len(chunk)):
                f.write(chunk)
    subprocess.run(
        ["cat", str(big_file)], stdout=subprocess.DEVNULL, check=True
    )  # warm the page cache for both
    t = time.perf_counter()
    ref = subprocess.run(
        ["sha256sum", str(big_file)], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    t_sum = time.perf_counter() - t
    from kernodeck.fingerprint import FingerprintCache

    c = FingerprintCache.open(cache, rehash=True)
    t = time.perf_counter()
    got = c.file_sha256(big_file)
    t_kd = time.perf_counter() - t
    c.save()
    assert got == ref
    c2 = FingerprintCache.open(cache)
    t = time.perf_counter()
    assert c2.file_sha256(big_file) == ref
    t_cached = time.perf_counter() - t
    (manifest.parent / "repro.toml").write_text(
        manifest.read_text()
        + f'\n[[data]]\nname = "big"\npath = "{big_file}"\nsha256 = "{ref}"\n'.replace(
            str(big_file), os.path.relpath(big_file, manifest.parent)
        )
    )
    vdata = [PY, "-m", "kernodeck", "verify", str(manifest), "--only", "data"]
    t1, _ = timed([*vdata, "--rehash"], 1)
    t2, _ = timed(vdata, 3)

    gb = size / 1e9
    print()
    print(f"{'command':<92} {'median s':>9}")
    for name, med, _ in rows:
        print(f"{name:<92} {med:>9.3f}")
    for name, med in rows_big:
        print(f"{name:<92} {med:>9.3f}")
    print()
    print("ratios (< 1: kernodeck is faster), same run:")
    warm, full = rows[1][1], rows[2][1]
    pip_py, pip_m, uv = rows[3][1], rows[4][1], rows[5][1]
    for label, value in (
        ("warm verify / ENV/bin/python -m pip check", warm / pip_m),
        ("warm verify / pip --python ENV check", warm / pip_py),
        ("warm verify / uv pip check", warm / uv),
        ("verify, all layers / ENV/bin/python -m pip check", full / pip_m),
    ):
        print(f"  {label:<60} {value:6.2f}")
    if rows_big:
        big_warm, big_pip, big_uv = rows_big[1][1], rows_big[2][1], rows_big[3][1]
        print(f"  {'.venv: warm verify / pip check':<60} {big_warm / big_pip:6.2f}")
        print(f"  {'.venv: warm verify / uv pip check':<60} {big_warm / big_uv:6.2f}")
    print()
    print(f"fingerprint of a {args.size_gb:g} GB file (page cache warm):")
    print(f"  sha256sum                      {t_sum:7.3f} s  {gb / t_sum:6.2f} GB/s")
    print(
        f"  kernodeck.fingerprint          {t_kd:7.3f} s  {gb / t_kd:6.2f} GB/s  ({100 * t_sum / t_kd:.0f} % of sha256sum's speed)"
    )
    print(
        f"  second run, cached             {t_cached * 1000:7.3f} ms  bytes read: {c2.stats.bytes_hashed}, cache hits: {c2.stats.hits}"
    )
    print(f"  kernodeck verify --only data --rehash {t1:.3f} s; cached (median of 3) {t2:.3f} s")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
