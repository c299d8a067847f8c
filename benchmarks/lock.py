"""Benchmark `kernodeck lock` against `uv pip compile` and `pip-compile` on a real stack.

    .venv/bin/python benchmarks/lock.py [--runs 3] [--skip-pip-compile]

Inputs are the same for every tool: one requirements list, Python 3.11, exclude-newer fixed (for
the tools that support it), pip's built-in default index (read at run time, never written
here). Kernodeck locks four platforms in one command; uv needs one `uv pip compile` per platform
(plus, for reference, one `--universal` run); pip-compile can only lock the current platform.

Each configuration runs `--runs` times (cold: a fresh cache every run; warm: the cache of a
previous run) and reports the median wall time, the peak RSS of the process tree (from
`os.wait4`), pins and hash lines. The tools run in interleaved rounds, each once per round in an
order rotated every round, so a ratio compares runs made minutes apart at most (this machine's
speed moves during the day). `--baseline-src DIR` adds the Kernodeck of another source tree
(e.g. main's `src`) to the same rounds, with after/before ratios; `--requirements` replaces the
10 real projects (tests run it against a loopback index). The table is printed and written to
benchmarks/results/lock.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT))

from benchmarks.installed import as_installed, compile_tree  # noqa: E402

REQUIREMENTS = [
    "numpy>=1.26,<3",
    "scipy",
    "pandas",
    "requests",
    "httpx",
    "pydantic>=2",
    "rich",
    "tqdm",
    "pyyaml",
    "scikit-learn",
]
# A larger stack for the scaling run (cost per pin): the 10 above plus 40 common ones.
STACK_50 = [
    *REQUIREMENTS,
    *[
        "matplotlib",
        "pillow",
        "sympy",
        "networkx",
        "jinja2",
        "fsspec",
        "aiohttp",
        "fastapi",
        "uvicorn",
        "sqlalchemy",
        "click",
        "boto3",
        "pyarrow",
        "polars",
        "seaborn",
        "statsmodels",
        "transformers",
        "tokenizers",
        "datasets",
        "huggingface-hub",
        "protobuf",
        "grpcio",
        "opencv-python-headless",
        "scikit-image",
        "numba",
        "xgboost",
        "lightgbm",
        "jupyterlab",
        "ipython",
        "black",
        "ruff",
        "mypy",
        "pytest",
        "hypothesis",
        "typer",
        "attrs",
        "cryptography",
        "paramiko",
        "redis",
        "psycopg2-binary",
    ],
]
EXCLUDE_NEWER = "2025-06-01T00:00:00Z"
# The 100-dependency ML stack with a real conflict: s3fs and gcsfs take fsspec in lock step,
# datasets caps fsspec, s3fs pins aiobotocore, aiobotocore pins botocore to a narrow range, and
# boto3's newest patch releases need a botocore newer than that range. aiobotocore comes through
# s3fs only (listed directly, name order decides it before boto3 and hides the s3fs walk-back).
STACK_100 = [
    *STACK_50,
    *[
        "s3fs",
        "tiktoken",
        "gcsfs",
        "adlfs",
        "google-cloud-storage",
        "azure-storage-blob",
        "torch",
        "torchvision",
        "lightning",
        "accelerate",
        "peft",
        "safetensors",
        "sentencepiece",
        "timm",
        "einops",
        "evaluate",
        "onnx",
        "onnxruntime",
        "mlflow",
        "wandb",
        "tensorboard",
        "optuna",
        "hydra-core",
        "omegaconf",
        "dask",
        "distributed",
        "xarray",
        "zarr",
        "h5py",
        "joblib",
        "nltk",
        "plotly",
        "bokeh",
        "openpyxl",
        "lxml",
        "beautifulsoup4",
        "orjson",
        "msgpack",
        "python-dotenv",
        "loguru",
        "tenacity",
        "alembic",
        "celery",
        "gunicorn",
        "pymongo",
        "websockets",
        "pytest-cov",
        "pre-commit",
        "sentry-sdk",
        "rich-click",
    ],
]
#: exclude-newer of the 100-dependency stack: boto3 1.43.126 is newer than aiobotocore 3.10.0 allows.
STACK_100_EXCLUDE_NEWER = "2026-11-09T00:00:00Z"
#: Published as sdists only (hydra-core 1.x and omegaconf 2.x need 4.9.*): uv builds sdists by
#: default, Kernodeck only those the manifest allows, so the stack allows it for the same inputs.
STACK_100_SDISTS = ["antlr4-python3-runtime"]
PYTHON = "3.11"
PLATFORMS = [
    # (kernodeck platform table, uv --python-platform)
    ({"name": "linux-x86_64", "os": "linux", "arch": "x86_64"}, "x86_64-manylinux_2_28"),
    ({"name": "linux-aarch64", "os": "linux", "arch": "aarch64"}, "aarch64-manylinux_2_28"),
    ({"name": "macos-arm64", "os": "macos", "arch": "arm64"}, "aarch64-apple-darwin"),
    ({"name": "windows-x86_64", "os": "windows", "arch": "x86_64"}, "x86_64-pc-windows-msvc"),
]

_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==", re.M)
_HASH = re.compile(r"--hash=sha256:")


@dataclass
class Sample:
    seconds: float
    peak_mib: float
    ok: bool
    pins: int = 0
    hashes: int = 0
    note: str = ""


@dataclass
class Row:
    tool: str
    what: str
    cache: str
    samples: list[Sample] = field(default_factory=list)

    def cells(self) -> list[str]:
        ok = [s for s in self.samples if s.ok]
        if not ok:
            note = self.samples[0].note if self.samples else "not run"
            return [self.tool, self.what, self.cache, "failed", "", "", "", note]
        return [
            self.tool,
            self.what,
            self.cache,
            f"{statistics.median(s.seconds for s in ok):.2f}",
            f"{max(s.peak_mib for s in ok):.0f}",
            str(ok[-1].pins),
            str(ok[-1].hashes),
            f"{len(ok)}/{len(self.samples)} runs",
        ]


def run(cmd: list[str], *, env: dict[str, str], cwd: Path | None = None) -> tuple[float, float, int, str]:
    """(seconds, peak RSS MiB of the process tree, exit code, stderr tail)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-400:]
    kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return seconds, kib / 1024, proc.returncode, tail


def run_cpu(cmd: list[str], *, env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds user+system of the process tree, peak RSS MiB, exit code)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    kib = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return seconds, usage.ru_utime + usage.ru_stime, kib / 1024, os.waitstatus_to_exitcode(status)


def scaling(work: Path, index_url: str, runs: int) -> str:
    """Cold 4-platform lock of two stack sizes, kernodeck against uv (universal, and once per
    platform), interleaved: medians of wall and CPU time, peak RSS, and the cost per pin fitted
    through the two sizes (fixed + per pin x pins), as the issue's growth line."""
    global REQUIREMENTS
    stacks = {"10 deps": list(REQUIREMENTS), "50 deps": list(STACK_50)}
    uv = BIN / "uv"
    res: dict[tuple[str, str], list[tuple[float, float, float, int]]] = {}
    saved = list(REQUIREMENTS)
    try:
        for i in range(runs):
            for label, reqs in stacks.items():
                REQUIREMENTS = reqs
                d = work / f"scale-{label.split()[0]}-{i}"
                d.mkdir(parents=True)
                (d / "repro.toml").write_text(manifest_text(index_url))
                (d / "req.in").write_text("\n".join(reqs) + "\n")
                kd_env = {**base_env(), "KERNODECK_CACHE_DIR": str(d / "kd-cache")}
                cmd = [sys.executable, "-m", "kernodeck", "lock", str(d / "repro.toml"), "-q", "--upgrade"]
                w, c, m, rc = run_cpu([*cmd, "--output-dir", str(d / "kd")], env=kd_env)
                pins, _ = count(sorted((d / "kd").glob("requirements-rebuild-*.txt")))
                res.setdefault(("kernodeck lock", label), []).append((w, c, m, pins if rc == 0 else -1))
                common = [str(uv), "pip", "compile", "--no-config", "--generate-hashes", "--quiet"]
                common += ["--python-version", PYTHON, "--exclude-newer", EXCLUDE_NEWER]
                common += ["--index-url", index_url, "--no-header"]
                u_env = {**base_env(), "UV_CACHE_DIR": str(d / "uv-cache")}
                w, c, m, rc = run_cpu(
                    [*common, "--universal", "-o", str(d / "u.txt"), str(d / "req.in")], env=u_env
                )
                upins, _ = count([d / "u.txt"])
                res.setdefault(("uv --universal", label), []).append((w, c, m, upins if rc == 0 else -1))
                u4 = work / f"scale-uv4-{label.split()[0]}-{i}"
                u4_env = {**base_env(), "UV_CACHE_DIR": str(u4)}
                tw = tc = tm = 0.0
                ok = True
                for _, pp in PLATFORMS:
                    w, c, m, rc = run_cpu(
                        [*common, "--python-platform", pp, "-o", str(d / f"{pp}.txt"), str(d / "req.in")],
                        env=u4_env,
                    )
                    tw, tc, tm, ok = tw + w, tc + c, max(tm, m), ok and rc == 0
                res.setdefault(("uv x4", label), []).append((tw, tc, tm, 0 if ok else -1))
    finally:
        REQUIREMENTS = saved
    med = statistics.median
    lines = [
        "| tool | stack | wall s | CPU s | peak MiB | pins | ok runs |",
        "|---|---|---|---|---|---|---|",
    ]
    summary: dict[tuple[str, str], tuple[float, float, int]] = {}
    for (tool, label), samples in res.items():
        good = [s for s in samples if s[3] >= 0]
        if not good:
            lines.append(f"| {tool} | {label} | failed | | | | 0/{len(samples)} |")
            continue
        w, c, m = med(s[0] for s in good), med(s[1] for s in good), max(s[2] for s in good)
        pins = good[-1][3]
        summary[(tool, label)] = (w, c, pins)
        lines.append(
            f"| {tool} | {label} | {w:.2f} | {c:.2f} | {m:.0f} | {pins or ''} | {len(good)}/{len(samples)} |"
        )
    out = "\n".join(lines) + "\n\nRatios (kernodeck / peer, medians of this run):\n\n"
    out += "| stack | / uv --universal wall | CPU | / uv x4 wall | CPU |\n|---|---|---|---|---|\n"
    for label in stacks:
        k = summary.get(("kernodeck lock", label))
        u = summary.get(("uv --universal", label))
        q = summary.get(("uv x4", label))
        if k and u and q:
            out += f"| {label} | {k[0] / u[0]:.2f}x | {k[1] / u[1]:.2f}x | {k[0] / q[0]:.2f}x | {k[1] / q[1]:.2f}x |\n"
    fits = []
    for tool in ("kernodeck lock", "uv --universal"):
        a, b = summary.get((tool, "10 deps")), summary.get((tool, "50 deps"))
        if a and b and b[2] != a[2]:
            per = (b[0] - a[0]) / (b[2] - a[2])
            fits.append(f"| {tool} | {a[0] - per * a[2]:.2f} s | {per * 1000:.1f} ms |")
    if fits:
        out += "\nGrowth (wall = fixed + per pin x pins, fitted through the two stacks; pins counted per tool):\n\n"
        out += "| tool | fixed | per pin |\n|---|---|---|\n" + "\n".join(fits) + "\n"
    return out


# An ML stack (YOLOv5's requirements) on platforms that pull apart: torch has no Intel-macOS
# wheel after 2.2.2, so that platform's resolver walks down releases that require newer ones.
ML_STACK = [
    "matplotlib>=3.3",
    "numpy>=1.23.5",
    "opencv-python>=4.6.0",
    "pillow>=10.3.0",
    "psutil",
    "pyyaml>=5.3.1",
    "requests>=2.32.2",
    "scipy>=1.4.1",
    "torch>=1.8.0",
    "torchvision>=0.9.0",
    "ultralytics>=8.4.118",
    "pandas>=1.1.4",
    "seaborn>=0.11.0",
]
#: Late enough that Linux resolves ultralytics releases whose requirements Intel macOS cannot meet.
ML_EXCLUDE_NEWER = "2026-11-01T00:00:00Z"
ML_PLATFORMS = [
    ({"name": "linux-x86_64", "os": "linux", "arch": "x86_64"}, ""),
    ({"name": "macos-arm64", "os": "macos", "arch": "arm64", "macos": "14.0"}, ""),
    ({"name": "macos-x86_64", "os": "macos", "arch": "x86_64", "macos": "13.0"}, ""),
    ({"name": "windows-x86_64", "os": "windows", "arch": "x86_64"}, ""),
]


def backtrack(work: Path, index_url: str, runs: int) -> str:
    """Cold lock of ML_STACK on ML_PLATFORMS, kernodeck against one `uv pip compile --universal`,
    interleaved: medians of wall and CPU time (the resolver walking down releases on Intel macOS)."""
    global REQUIREMENTS, PLATFORMS, EXCLUDE_NEWER
    uv = BIN / "uv"
    res: dict[str, list[tuple[float, float, int]]] = {}
    saved = (list(REQUIREMENTS), list(PLATFORMS), EXCLUDE_NEWER)
    try:
        REQUIREMENTS, PLATFORMS, EXCLUDE_NEWER = list(ML_STACK), list(ML_PLATFORMS), ML_EXCLUDE_NEWER
        for i in range(runs):
            d = work / f"ml-{i}"
            d.mkdir(parents=True)
            (d / "repro.toml").write_text(manifest_text(index_url))
            (d / "req.in").write_text("\n".join(ML_STACK) + "\n")
            kd_env = {**base_env(), "KERNODECK_CACHE_DIR": str(d / "kd-cache")}
            cmd = [sys.executable, "-m", "kernodeck", "lock", str(d / "repro.toml"), "-q", "--upgrade"]
            w, c, _, rc = run_cpu([*cmd, "--output-dir", str(d / "kd")], env=kd_env)
            res.setdefault("kernodeck lock", []).append((w, c, rc))
            common = [str(uv), "pip", "compile", "--no-config", "--generate-hashes", "--quiet", "--universal"]
            common += ["--python-version", PYTHON, "--exclude-newer", EXCLUDE_NEWER, "--index-url", index_url]
            u_env = {**base_env(), "UV_CACHE_DIR": str(d / "uv-cache")}
            w, c, _, rc = run_cpu([*common, "-o", str(d / "u.txt"), str(d / "req.in")], env=u_env)
            res.setdefault("uv --universal", []).append((w, c, rc))
    finally:
        REQUIREMENTS, PLATFORMS, EXCLUDE_NEWER = saved
    med = statistics.median
    lines = ["| tool | wall s | CPU s | ok runs |", "|---|---|---|---|"]
    good = {t: [s for s in samples if s[2] == 0] for t, samples in res.items()}
    for tool, samples in res.items():
        ok = good[tool]
        if not ok:
            lines.append(f"| {tool} | failed | | 0/{len(samples)} |")
            continue
        lines.append(
            f"| {tool} | {med(s[0] for s in ok):.2f} | {med(s[1] for s in ok):.2f} | {len(ok)}/{len(samples)} |"
        )
    k, u = good.get("kernodeck lock"), good.get("uv --universal")
    if k and u:
        lines += ["", f"kernodeck / uv --universal, wall: {med(s[0] for s in k) / med(s[0] for s in u):.2f}x"]
    return "\n".join(lines) + "\n"


#: A pinned line of a requirements file: the name and the version.
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.M)
#: How much older than uv's pin a pin must be to count in the pin-age column.
YEAR = 365 * 24 * 3600.0


def pins_of(path: Path) -> dict[str, str]:
    """{normalized name: version} of a requirements file (empty when it is missing)."""
    from packaging.utils import canonicalize_name

    if not path.exists():
        return {}
    return {canonicalize_name(m[1]): m[2] for m in _PINNED.finditer(path.read_text())}


class UploadTimes:
    """Upload time of each released version (its earliest file), read from the index's PEP 691
    JSON pages (PEP 700 `upload-time`); each project's page is read once."""

    def __init__(self, index_url: str) -> None:
        self.index_url = index_url.rstrip("/") + "/"
        self.pages: dict[str, dict[str, float]] = {}

    def of(self, project: str, version: str) -> float | None:
        from packaging.version import InvalidVersion, Version

        if project not in self.pages:
            self.pages[project] = self._read(project)
        try:
            return self.pages[project].get(str(Version(version)))
        except InvalidVersion:
            return None

    def _read(self, project: str) -> dict[str, float]:
        import json
        import urllib.request
        from datetime import datetime

        from packaging.utils import parse_sdist_filename, parse_wheel_filename

        req = urllib.request.Request(
            self.index_url + project + "/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                page = json.loads(resp.read())
        except (OSError, ValueError):
            return {}
        times: dict[str, float] = {}
        for f in page.get("files", []):
            name, when = f.get("filename", ""), f.get("upload-time")
            if not when:
                continue
            try:
                v = parse_wheel_filename(name)[1] if name.endswith(".whl") else parse_sdist_filename(name)[1]
            except ValueError:
                continue
            t = datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
            key = str(v)
            times[key] = min(t, times.get(key, t))
        return times


def older_pins(ours: dict[str, str], uv: dict[str, str], times: UploadTimes) -> list[str]:
    """Our pins uploaded more than a year before uv's pin of the same project, as
    "name ours (uv: theirs)", sorted."""
    out = []
    for name in sorted(ours.keys() & uv.keys()):
        if ours[name] == uv[name]:
            continue
        a, b = times.of(name, ours[name]), times.of(name, uv[name])
        if a is not None and b is not None and b - a > YEAR:
            out.append(f"{name} {ours[name]} (uv: {uv[name]})")
    return out


def load() -> str:
    """The 1-minute load average of this machine (the benchmark records it before and after)."""
    return f"{os.getloadavg()[0]:.2f}"


def stack100(work: Path, index_url: str, runs: int, baseline_src: Path | None = None) -> str:
    """Cold 4-platform lock of STACK_100 (exclude-newer STACK_100_EXCLUDE_NEWER), Kernodeck (and
    the baseline source tree, if given) against uv --universal and uv once per platform,
    interleaved: medians of wall and CPU time, pins, and per platform the pin-age column: how many
    of the tool's pins are older than uv's per-platform pin of the same project by more than a
    year (upload times of the pinned versions from the index's PEP 700 `upload-time`)."""
    global REQUIREMENTS, EXCLUDE_NEWER
    uv = BIN / "uv"
    kd_tools = {"kernodeck lock": None} | (
        {"kernodeck lock [baseline]": baseline_src} if baseline_src else {}
    )
    res: dict[str, list[tuple[float, float, int]]] = {}
    last: dict[str, Path] = {}
    saved = (list(REQUIREMENTS), EXCLUDE_NEWER)
    try:
        REQUIREMENTS, EXCLUDE_NEWER = list(STACK_100), STACK_100_EXCLUDE_NEWER
        for i in range(runs):
            d = work / f"s100-{i}"
            d.mkdir(parents=True)
            (d / "repro.toml").write_text(manifest_text(index_url, allow_sdist=STACK_100_SDISTS))
            (d / "req.in").write_text("\n".join(STACK_100) + "\n")
            for tool, src in kd_tools.items():
                tag = "base" if src else "kd"
                env = {**base_env(), "KERNODECK_CACHE_DIR": str(d / f"{tag}-cache")}
                env |= {"PYTHONPATH": str(src)} if src else {}
                cmd = [sys.executable, "-m", "kernodeck", "lock", str(d / "repro.toml"), "-q", "--upgrade"]
                w, c, _, rc = run_cpu([*cmd, "--output-dir", str(d / tag)], env=env)
                pins, _ = count(sorted((d / tag).glob("requirements-rebuild-*.txt")))
                res.setdefault(tool, []).append((w, c, pins if rc == 0 else -1))
                last[tool] = d / tag
            common = [str(uv), "pip", "compile", "--no-config", "--generate-hashes", "--quiet"]
            common += ["--python-version", PYTHON, "--exclude-newer", EXCLUDE_NEWER]
            common += ["--index-url", index_url, "--no-header"]
            u_env = {**base_env(), "UV_CACHE_DIR": str(d / "uv-cache")}
            w, c, _, rc = run_cpu(
                [*common, "--universal", "-o", str(d / "u.txt"), str(d / "req.in")], env=u_env
            )
            res.setdefault("uv --universal", []).append((w, c, count([d / "u.txt"])[0] if rc == 0 else -1))
            u4_env = {**base_env(), "UV_CACHE_DIR": str(d / "uv4-cache")}
            tw = tc = 0.0
            ok = True
            for plat, pp in PLATFORMS:
                out = d / "uv4" / f"{plat['name']}.txt"
                out.parent.mkdir(exist_ok=True)
                w, c, _, rc = run_cpu(
                    [*common, "--python-platform", pp, "-o", str(out), str(d / "req.in")], env=u4_env
                )
                tw, tc, ok = tw + w, tc + c, ok and rc == 0
            pins = count(sorted((d / "uv4").glob("*.txt")))[0]
            res.setdefault("uv x4", []).append((tw, tc, pins if ok else -1))
            last["uv x4"] = d / "uv4"
    finally:
        REQUIREMENTS, EXCLUDE_NEWER = saved
    return stack100_table(res, last, UploadTimes(index_url))


def stack100_table(
    res: dict[str, list[tuple[float, float, int]]], last: dict[str, Path], times: UploadTimes
) -> str:
    med = statistics.median
    names = [p["name"] for p, _ in PLATFORMS]
    lines = [
        "| tool | wall s | CPU s | pins | ok runs | pins > 1 year older than uv's per platform ("
        + ", ".join(names)
        + ") |",
        "|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for tool, samples in res.items():
        good = [s for s in samples if s[2] >= 0]
        if not good:
            lines.append(f"| {tool} | failed | | | 0/{len(samples)} | |")
            continue
        ages = ""
        if tool.startswith("kernodeck") and tool in last and "uv x4" in last:
            counts = []
            for name in names:
                old = older_pins(
                    pins_of(last[tool] / f"requirements-rebuild-{name}.txt"),
                    pins_of(last["uv x4"] / f"{name}.txt"),
                    times,
                )
                counts.append(str(len(old)))
                notes += [f"- {tool}, {name}: {o}" for o in old]
            ages = " / ".join(counts)
        w, c = med(s[0] for s in good), med(s[1] for s in good)
        lines.append(f"| {tool} | {w:.2f} | {c:.2f} | {good[-1][2]} | {len(good)}/{len(samples)} | {ages} |")
    k, u = res.get("kernodeck lock"), res.get("uv --universal")
    if k and u and all(s[2] >= 0 for s in k + u):
        lines += ["", f"kernodeck / uv --universal, wall: {med(s[0] for s in k) / med(s[0] for s in u):.2f}x"]
    if notes:
        lines += ["", "Pins more than a year older than uv's (last round):", "", *notes]
    return "\n".join(lines) + "\n"


def count(paths: list[Path]) -> tuple[int, int]:
    pins = hashes = 0
    for p in paths:
        if p.exists():
            text = p.read_text()
            pins += len(_PIN.findall(text))
            hashes += len(_HASH.findall(text))
    return pins, hashes


def base_env() -> dict[str, str]:
    env = as_installed(
        {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "KERNODECK_"))}
    )
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["NO_COLOR"] = "1"
    return env


def manifest_text(
    index_url: str,
    same_versions: str = "prefer",
    requirements: list[str] | None = None,
    allow_sdist: list[str] | None = None,
) -> str:
    reqs = ", ".join(f'"{r}"' for r in (requirements or REQUIREMENTS))
    lines = [
        "schema-version = 1",
        "",
        "[reference]",
        'name = "bench"',
        'id = "1"',
        "",
        "[python]",
        f'version = "{PYTHON}"',
        "",
        "[packages]",
        f"requirements = [{reqs}]",
        f"exclude-newer = {EXCLUDE_NEWER}",
        f'same-versions = "{same_versions}"',
        *([f"allow-sdist = [{', '.join(repr(n) for n in allow_sdist)}]"] if allow_sdist else []),
        "",
        "[[packages.index]]",
        'name = "default"',
        f'url = "{index_url}"',
        "default = true",
    ]
    for plat, _ in PLATFORMS:
        lines += ["", "[[platform]]", *(f'{k} = "{v}"' for k, v in plat.items())]
    return "\n".join(lines) + "\n"


#: One tool's share of a round: its rows, and what it runs in round i (appending one sample to each).
Suite = tuple[list[Row], Callable[[int], None]]


def kernodeck_suite(
    work: Path,
    index_url: str,
    requirements: list[str],
    same_versions: str = "prefer",
    baseline_src: Path | None = None,
) -> Suite:
    """`same-versions = "prefer"` (joint resolution, the default) is "kernodeck lock"; "no"
    (each platform on its own) is "kernodeck lock (same-versions=no)"; with `baseline_src`, the
    Kernodeck of that source tree ("kernodeck lock [baseline]", e.g. main's `src`). Each round: a
    fresh cache, a cold lock, a warm one (it replays), then one whose input changed (a one-off
    constraint that keeps every pin: no replay, a resolution on the warm cache)."""
    tag = "baseline" if baseline_src is not None else same_versions
    manifest = work / f"kd-{tag}" / "repro.toml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(manifest_text(index_url, same_versions, requirements))
    tool = (
        "kernodeck lock" if same_versions == "prefer" else f"kernodeck lock (same-versions={same_versions})"
    )
    if baseline_src is not None:
        tool += " [baseline]"
    what = "4 platforms, 1 command"
    cold, warm, again = Row(tool, what, "cold"), Row(tool, what, "warm"), Row(tool, what, "warm, resolves")
    extra_env = {"PYTHONPATH": str(baseline_src)} if baseline_src is not None else {}
    one_off = f"{re.split(r'[^A-Za-z0-9._-]', requirements[0], maxsplit=1)[0]}<9999"  # keeps every pin

    def round_(i: int) -> None:
        cache = work / f"kd-cache-{tag}-{i}"
        out = work / f"kd-out-{tag}-{i}"
        env = {**base_env(), **extra_env, "KERNODECK_CACHE_DIR": str(cache)}
        cmd = [sys.executable, "-m", "kernodeck", "lock", str(manifest), "-q", "--upgrade"]
        cmd += ["--output-dir", str(out)]
        for row in (cold, warm, again):
            more = ["--upgrade-package", one_off] if row is again else []
            s, mib, rc, tail = run([*cmd, *more], env=env)
            files = [out / f"requirements-rebuild-{p['name']}.txt" for p, _ in PLATFORMS]
            pins, hashes = count(files)
            row.samples.append(
                Sample(s, mib, rc == 0, pins, hashes, tail.strip().splitlines()[-1] if rc else "")
            )

    return [cold, warm, again], round_


def uv_suite(work: Path, index_url: str, requirements: list[str]) -> Suite:
    uv = BIN / "uv"
    req_in = work / "requirements.in"
    req_in.write_text("\n".join(requirements) + "\n")
    rows = [
        Row("uv pip compile", "4 platforms, 4 commands", "cold"),
        Row("uv pip compile", "4 platforms, 4 commands", "warm"),
        Row("uv pip compile --universal", "1 universal file", "cold"),
        Row("uv pip compile --universal", "1 universal file", "warm"),
        Row("uv pip compile --offline", "4 platforms, 4 commands", "warm"),
    ]
    common = [
        str(uv),
        "pip",
        "compile",
        "--no-config",
        "--generate-hashes",
        "--quiet",
        "--python-version",
        PYTHON,
        "--exclude-newer",
        EXCLUDE_NEWER,
        "--index-url",
        index_url,
        "--no-header",
    ]

    def round_(i: int) -> None:
        cache = work / f"uv-cache-{i}"
        env = {**base_env(), "UV_CACHE_DIR": str(cache)}
        for row in (rows[0], rows[1], rows[4]):
            offline = ["--offline"] if row is rows[4] else []
            total = peak = 0.0
            ok = True
            outs = []
            note = ""
            for _, pp in PLATFORMS:
                out = work / f"uv-{i}-{row.cache}-{pp}.txt"
                s, mib, rc, tail = run(
                    [*common, *offline, "--python-platform", pp, "-o", str(out), str(req_in)], env=env
                )
                total += s
                peak = max(peak, mib)
                ok = ok and rc == 0
                note = note or (tail.strip().splitlines()[-1] if rc and tail.strip() else "")
                outs.append(out)
            pins, hashes = count(outs)
            row.samples.append(Sample(total, peak, ok, pins, hashes, note))
        ucache = work / f"uv-ucache-{i}"
        uenv = {**base_env(), "UV_CACHE_DIR": str(ucache)}
        for row in rows[2:4]:
            out = work / f"uv-{i}-{row.cache}-universal.txt"
            s, mib, rc, tail = run([*common, "--universal", "-o", str(out), str(req_in)], env=uenv)
            pins, hashes = count([out])
            row.samples.append(Sample(s, mib, rc == 0, pins, hashes, tail.strip()[-200:] if rc else ""))

    return rows, round_


def pip_compile_suite(work: Path, index_url: str, requirements: list[str]) -> Suite | None:
    pc = BIN / "pip-compile"
    if not pc.exists():
        print(
            f"pip-compile is not installed in {BIN} (`make bench` installs pip-tools): skipped",
            file=sys.stderr,
        )
        return None
    req_in = work / "pc-requirements.in"
    req_in.write_text("\n".join(requirements) + "\n")
    cold = Row("pip-compile --generate-hashes", "current platform only", "cold")
    warm = Row("pip-compile --generate-hashes", "current platform only", "warm")

    def round_(i: int) -> None:
        cache = work / f"pc-cache-{i}"
        env = base_env()
        for row in (cold, warm):
            out = work / f"pc-{i}-{row.cache}.txt"
            cmd = [
                str(pc),
                "--quiet",
                "--generate-hashes",
                "--no-header",
                "--no-config",
                "--cache-dir",
                str(cache),
                "--index-url",
                index_url,
                "--pip-args",
                f"--cache-dir {cache}/pip",
                "-o",
                str(out),
                str(req_in),
            ]
            s, mib, rc, tail = run(cmd, env=env, cwd=work)
            pins, hashes = count([out])
            row.samples.append(Sample(s, mib, rc == 0, pins, hashes, tail.strip()[-200:] if rc else ""))
            if out.exists() and row is cold:
                out.unlink()  # a warm run starts without an output file too (no reuse of pins)

    return [cold, warm], round_


def interleaved(suites: list[Suite], runs: int) -> list[Row]:
    """Every suite once per round, the order rotated each round (so no tool always runs first,
    or always on a machine the previous one warmed); the rows in the order of `suites`."""
    for i in range(runs):
        k = i % len(suites)
        for _, round_ in suites[k:] + suites[:k]:
            round_(i)
    return [row for rows, _ in suites for row in rows]


def table(rows: list[Row]) -> str:
    head = ["tool", "what", "cache", "median s", "peak MiB", "pins", "hash lines", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def _median(rows: list[Row], tool: str, cache: str) -> float | None:
    for r in rows:
        if r.tool == tool and r.cache == cache:
            ok = [s.seconds for s in r.samples if s.ok]
            return statistics.median(ok) if ok else None
    return None


def ratios(rows: list[Row]) -> str:
    """Kernodeck against the others, from the medians of this run (lower is better for kernodeck
    in the first two; the third is how many times faster kernodeck is than pip-compile)."""
    lines = ["| ratio | cold | warm |", "|---|---|---|"]
    pairs = [
        ("kernodeck / uv pip compile (4 runs)", "kernodeck lock", "uv pip compile"),
        ("kernodeck / uv pip compile --universal", "kernodeck lock", "uv pip compile --universal"),
        ("pip-compile / kernodeck", "pip-compile --generate-hashes", "kernodeck lock"),
        (
            "joint (prefer) / per platform (no): budget 1.5x",
            "kernodeck lock",
            "kernodeck lock (same-versions=no)",
        ),
    ]
    for label, num, den in pairs:
        cells = []
        for cache in ("cold", "warm"):
            a, b = _median(rows, num, cache), _median(rows, den, cache)
            cells.append(f"{a / b:.2f}x" if a is not None and b else "n/a")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    # A warm lock that must resolve (an input changed) against uv run offline on a warm cache.
    a = _median(rows, "kernodeck lock", "warm, resolves")
    b = _median(rows, "uv pip compile --offline", "warm")
    lines.append(
        "| kernodeck resolving on a warm cache / uv pip compile --offline (4 runs): budget 1.5x | | "
        + (f"{a / b:.2f}x" if a is not None and b else "n/a")
        + " |"
    )
    if any(r.tool == "kernodeck lock [baseline]" for r in rows):
        for cache in ("cold", "warm", "warm, resolves"):
            a, b = _median(rows, "kernodeck lock", cache), _median(rows, "kernodeck lock [baseline]", cache)
            cell = f"{a / b:.2f}x" if a is not None and b else "n/a"
            lines.append(
                f"| kernodeck / its baseline source (after/before), {cache} | "
                + (f"{cell} | |" if cache == "cold" else f"| {cell} |")
            )
    return "\n".join(lines)


def main_tables(
    work: Path, index_url: str, requirements: list[str], args: argparse.Namespace, baseline: Path | None
) -> str:
    """The interleaved main table and ratios, then the scaling and backtracking sections asked for."""
    suites = [
        kernodeck_suite(work, index_url, requirements),
        kernodeck_suite(work, index_url, requirements, same_versions="no"),
    ]
    if baseline is not None:
        suites.append(kernodeck_suite(work, index_url, requirements, baseline_src=baseline))
    if not args.skip_uv:
        suites.append(uv_suite(work, index_url, requirements))
    pc = None if args.skip_pip_compile else pip_compile_suite(work, index_url, requirements)
    if pc is not None:
        suites.append(pc)
    rows = interleaved(suites, args.runs)
    text = table(rows) + "\n\nRatios (medians of this run):\n\n" + ratios(rows)
    if args.scaling:
        text += "\n\n## Scaling: cold 4-platform lock, two stack sizes\n\n" + scaling(
            work, index_url, args.runs
        )
    if args.backtrack:
        text += (
            f"\n\n## Platforms that pull apart: {', '.join(ML_STACK)} on "
            f"{', '.join(p['name'] for p, _ in ML_PLATFORMS)}, exclude-newer {ML_EXCLUDE_NEWER}, cold\n\n"
            + backtrack(work, index_url, args.runs)
        )
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-pip-compile", action="store_true")
    ap.add_argument("--skip-uv", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument(
        "--scaling",
        action="store_true",
        help="also lock a 10- and a 50-dependency stack cold (kernodeck, uv x4, uv --universal): CPU time and cost per pin",
    )
    ap.add_argument(
        "--backtrack",
        action="store_true",
        help="also lock an ML stack on Linux, both macOS and Windows cold (kernodeck, uv --universal): "
        "a resolver walking down releases on Intel macOS",
    )
    ap.add_argument(
        "--stack100",
        action="store_true",
        help="also lock the 100-dependency ML stack cold (kernodeck, its baseline, uv x4, uv --universal): "
        "wall, CPU and the pin-age column against uv's per-platform pins",
    )
    ap.add_argument(
        "--only-stack100", action="store_true", help="run only the 100-dependency stack (implies --stack100)"
    )
    ap.add_argument(
        "--index-url", default=None, help="the index for every tool (default: pip's built-in one)"
    )
    ap.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also run the Kernodeck of this source tree (e.g. main's src) in the same rounds: "
        "'[baseline]' rows and after/before ratios",
    )
    ap.add_argument(
        "--requirements",
        default=None,
        help="comma-separated requirements of the main table, instead of the 10 real projects",
    )
    args = ap.parse_args(argv)
    requirements = [r.strip() for r in args.requirements.split(",")] if args.requirements else REQUIREMENTS

    from kernodeck.index.sources import builtin_index_url

    # pip's built-in default: what `kernodeck lock` uses when repro.toml names no index.
    index_url = args.index_url or builtin_index_url()
    work = Path(tempfile.mkdtemp(prefix="kernodeck-bench-"))
    baseline = args.baseline_src.resolve() if args.baseline_src is not None else None
    load_before = load()
    text = ""
    try:
        if baseline is not None:
            compile_tree(baseline)
        if not args.only_stack100:
            text = main_tables(work, index_url, requirements, args, baseline)
        if args.stack100 or args.only_stack100:
            text += (
                f"\n\n## 100 dependencies ({', '.join(STACK_100[50:])} on top of the 50), "
                f"exclude-newer {STACK_100_EXCLUDE_NEWER}, Kernodeck allows the sdists of "
                f"{', '.join(STACK_100_SDISTS)}, cold\n\n" + stack100(work, index_url, args.runs, baseline)
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    main_inputs = (
        ""
        if args.only_stack100
        else f"Requirements: {', '.join(requirements)}; exclude-newer {EXCLUDE_NEWER} "
        "(pip-compile has no exclude-newer and resolves today's versions); "
    )
    header = (
        f"# kernodeck lock benchmark\n\n{main_inputs}Python {PYTHON}; platforms: "
        f"{', '.join(p['name'] for p, _ in PLATFORMS)}; {args.runs} interleaved round(s), median wall time; "
        f"host {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"load average (1 min) {load_before} before, {load()} after.\n\n"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "lock.md").write_text(header + text + "\n")
    print(header + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
