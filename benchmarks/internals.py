"""What each private-internal dependency buys: every command with it, and with it switched off.

    .venv/bin/python benchmarks/internals.py [--runs 9] [--cold-runs 5]

docs/ARCHITECTURE.md lists the private internals Kernodeck depends on; one whose gain is under 5 %
of its command's time is removed. This measures each gain in the command it was added for, as
interleaved rounds (every variant once per round, the order rotated), medians of CPU seconds
(user + system of the process tree, from `os.wait4`: steadier than wall time on a shared
machine) and of wall seconds; `--instructions` adds one run of each variant under valgrind
(instructions executed: the same on a loaded machine, but threads run one at a time there):

- `httpmods` (httpx's command line and httpcore's async/HTTP/2 modules kept out): a lock that adds
  one dependency on a warm cache (its page comes from the index), a cold lock, a warm lock;
- `pydanticplugins` (pydantic's plugin scan skipped): `validate` of a manifest with an error;
- `rounds-memo` (resolvelib's per-round pin check remembered): a resolution on a warm cache;
- `leave` (CPython's exit without freeing every object): a warm lock, a cold one, resolutions.

(`gc.freeze()` at the end of `support.gctune.fewer_collections` was measured here too: under 1 % of
a cold 50-dependency lock's instructions, 0.2 % of a warm resolution; removed.)

Each variant runs `python benchmarks/internals.py --child VARIANT -- ARGS...`, which switches the
one internal off and then starts the `kernodeck` command as the console script does. Inputs are
benchmarks/lock.py's (10 and 50 real projects, pip's built-in default index read at run time,
exclude-newer fixed, 4 platforms).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: The dependency "adds" puts on top of a warm cache (not among the stack's pins).
ADDED = "tabulate"
VARIANTS = ("all", "httpmods", "pydanticplugins", "rounds-memo", "leave")


def _switch_off(variant: str) -> None:
    """Switch one internal off in this process, before the command imports its user."""
    if variant == "httpmods":
        import kernodeck.support.httpmods as httpmods

        httpmods.keep_unused_out = lambda environ=None: None
    elif variant == "pydanticplugins":
        import kernodeck.support.pydanticplugins as plugins

        plugins.load_none = lambda: None
    elif variant == "rounds-memo":
        from resolvelib.resolvers import Resolution

        import kernodeck.resolve.rounds as rounds

        rounds._Rounds._is_current_pin_satisfying = Resolution._is_current_pin_satisfying  # type: ignore[method-assign]
    elif variant == "leave":
        import kernodeck.cli as cli

        cli.leave = lambda code: sys.exit(code)


def child(variant: str, args: list[str]) -> None:
    _switch_off(variant)
    if variant not in ("httpmods", "all") and "httpx" in sys.modules:
        raise SystemExit("switching the internal off imported httpx: the run would not be comparable")
    sys.argv = ["kernodeck", *args]
    from kernodeck.cli import run

    run()


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def _cmd(variant: str, args: list[str]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", variant, "--", *args]


class Case:
    """One command, measured with `variants` off and with everything on."""

    def __init__(self, name: str, variants: tuple[str, ...], expect_rc: int = 0) -> None:
        self.name = name
        self.variants = ("all", *variants)
        self.expect_rc = expect_rc
        self.samples: dict[str, list[tuple[float, float]]] = {v: [] for v in self.variants}
        self.instructions: dict[str, int] = {}

    def args(self, round_no: int) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def prepare(self, variant: str, round_no: int) -> None:
        """Untimed set-up before one timed run (a fresh cache for a cold lock)."""

    def measure(self, round_no: int, env: dict[str, str]) -> None:
        order = (
            self.variants[round_no % len(self.variants) :] + self.variants[: round_no % len(self.variants)]
        )
        for v in order:
            self.prepare(v, round_no)
            wall, cpu, rc = _run(_cmd(v, self.args(round_no)), {**env, **self.env(v, round_no)})
            if rc != self.expect_rc:
                raise SystemExit(f"{self.name} [{v}] exited {rc}, expected {self.expect_rc}")
            self.samples[v].append((wall, cpu))

    def env(self, variant: str, round_no: int) -> dict[str, str]:
        return {}

    def count(self, env: dict[str, str]) -> None:
        """Instructions of one run per variant, under valgrind: steady on a loaded machine."""
        vg = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
        for v in self.variants:
            self.prepare(v, 0)
            cmd = [*vg, *_cmd(v, self.args(0))]
            proc = subprocess.run(
                cmd, env={**env, **self.env(v, 0)}, capture_output=True, text=True, timeout=900
            )
            found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
            if proc.returncode != self.expect_rc or found is None:
                raise SystemExit(
                    f"valgrind: {self.name} [{v}] exited {proc.returncode}\n{proc.stderr[-2000:]}"
                )
            self.instructions[v] = int(found.group(1).replace(",", ""))

    def instruction_rows(self) -> list[str]:
        base = self.instructions["all"]
        out = [f"| {self.name} | everything on | {base / 1e9:.3f} | |"]
        for v in self.variants[1:]:
            n = self.instructions[v]
            out.append(f"| {self.name} | {v} off | {n / 1e9:.3f} | {100 * (n - base) / n:+.1f} % |")
        return out

    def rows(self) -> list[str]:
        base_wall = statistics.median(s[0] for s in self.samples["all"])
        base_cpu = statistics.median(s[1] for s in self.samples["all"])
        out = [f"| {self.name} | everything on | {base_wall:.3f} | {base_cpu:.3f} | | |"]
        for v in self.variants[1:]:
            wall = statistics.median(s[0] for s in self.samples[v])
            cpu = statistics.median(s[1] for s in self.samples[v])
            out.append(
                f"| {self.name} | {v} off | {wall:.3f} | {cpu:.3f} | "
                f"{100 * (wall - base_wall) / wall:+.1f} % | {100 * (cpu - base_cpu) / cpu:+.1f} % |"
            )
        return out


class Validate(Case):
    def __init__(self, work: Path) -> None:
        super().__init__("validate, a manifest with an error", ("pydanticplugins",), expect_rc=2)
        self.path = work / "bad" / "repro.toml"
        self.path.parent.mkdir(parents=True)
        self.path.write_text(
            'schema-version = 1\n[reference]\nname = "x"\nid = "1"\n'
            '[python]\nversion = "3.11"\n[packages]\nrequirements = ["numpy>=1"]\nprereleases = "maybe"\n'
        )

    def args(self, round_no: int) -> list[str]:
        return ["validate", str(self.path)]


class Lock(Case):
    """A lock of `requirements` on a cache primed once (warm), per variant."""

    def __init__(
        self,
        name: str,
        work: Path,
        index_url: str,
        requirements: list[str],
        variants: tuple[str, ...],
        mode: str,
    ) -> None:
        from benchmarks.lock import manifest_text

        super().__init__(name, variants)
        # "warm" (replays), "resolves" (one-off constraint), "cold" (fresh cache), "adds" (one more
        # requirement, on a copy of the warm cache: its page and metadata come from the index)
        self.mode = mode
        self.dir = work / name.replace(" ", "-").replace(",", "")
        self.dir.mkdir(parents=True)
        self.manifest = self.dir / "repro.toml"
        self.manifest.write_text(manifest_text(index_url, "prefer", requirements))
        self.added = self.dir / "added" / "repro.toml"
        self.added.parent.mkdir()
        self.added.write_text(manifest_text(index_url, "prefer", [*requirements, ADDED]))
        self.warm_cache = self.dir / "cache-warm"
        self.one_off = f"{requirements[0].split('>')[0].split('<')[0].split('=')[0]}<9999"

    def args(self, round_no: int) -> list[str]:
        if self.mode == "adds":  # the stack's lock is there: the added requirement is resolved
            return ["lock", str(self.added), "-q", "--output-dir", str(self.dir / "out-adds")]
        out = ["lock", str(self.manifest), "-q", "--upgrade", "--output-dir", str(self.dir / "out")]
        return [*out, "--upgrade-package", self.one_off] if self.mode == "resolves" else out

    def prime(self, env: dict[str, str]) -> None:
        first = ["lock", str(self.manifest), "-q", "--upgrade", "--output-dir", str(self.dir / "out")]
        _, _, rc = _run(_cmd("all", first), {**env, "KERNODECK_CACHE_DIR": str(self.warm_cache)})
        if rc:
            raise SystemExit(f"{self.name}: priming the cache failed ({rc})")

    def prepare(self, variant: str, round_no: int) -> None:
        if self.mode in ("cold", "adds"):
            shutil.rmtree(self.dir / "cache-cold", ignore_errors=True)
        if self.mode == "adds":
            shutil.copytree(self.warm_cache, self.dir / "cache-cold", symlinks=True)
            shutil.rmtree(self.dir / "out-adds", ignore_errors=True)
            shutil.copytree(self.dir / "out", self.dir / "out-adds")

    def env(self, variant: str, round_no: int) -> dict[str, str]:
        cache = self.dir / "cache-cold" if self.mode in ("cold", "adds") else self.warm_cache
        return {"KERNODECK_CACHE_DIR": str(cache)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[3:])
        return 0
    from benchmarks.lock import REQUIREMENTS, STACK_50, base_env, load

    from kernodeck.index.sources import builtin_index_url

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    args = ap.parse_args(argv)
    index_url = builtin_index_url()
    work = Path(tempfile.mkdtemp(prefix="kernodeck-internals-"))
    env = base_env()
    load_before = load()
    try:
        fast: list[Case] = [
            Validate(work),
            Lock("warm lock, 10 projects", work, index_url, REQUIREMENTS, ("httpmods", "leave"), "warm"),
            Lock(
                f"adding {ADDED} on a warm cache, 10 projects",
                work,
                index_url,
                REQUIREMENTS,
                ("httpmods", "leave"),
                "adds",
            ),
            Lock(
                "resolution on a warm cache, 10 projects",
                work,
                index_url,
                REQUIREMENTS,
                ("rounds-memo", "leave"),
                "resolves",
            ),
            Lock(
                "resolution on a warm cache, 50 projects",
                work,
                index_url,
                STACK_50,
                ("rounds-memo", "leave"),
                "resolves",
            ),
        ]
        for case in fast:
            if isinstance(case, Lock):
                case.prime(env)
        for i in range(args.runs):
            for case in fast:
                case.measure(i, env)
        if args.instructions:
            for case in fast:
                case.count(env)
        cases = list(fast)
        if not args.skip_cold:
            cold = Lock(
                "cold lock, 10 projects",
                work,
                index_url,
                REQUIREMENTS,
                ("leave", "httpmods"),
                "cold",
            )
            for i in range(args.cold_runs):
                cold.measure(i, env)
            cases.append(cold)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        f"load (1 min) before / after: {load_before} / {load()}; {args.runs} rounds "
        f"({args.cold_runs} for the cold lock), medians; gain = (off - on) / off",
        "",
        "| command | variant | wall s | CPU s | wall gain | CPU gain |",
        "|---|---|---|---|---|---|",
    ]
    for case in cases:
        lines += case.rows()
    if args.instructions:
        lines += ["", "| command | variant | instructions (10^9) | gain |", "|---|---|---|---|"]
        for case in fast:
            lines += case.instruction_rows()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
