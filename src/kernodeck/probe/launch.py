"""Starting the environment probe early, before the manifest is read.

The probe (probe/script.py) runs in its own process under the target interpreter; its longest
part, checking every installed file against RECORD, does not depend on the manifest. `prestart`
launches it as soon as the interpreter (chosen by kernodeck.interpreters) and the selected layers
are known, so that it runs while Kernodeck imports its modules and loads the manifest; the probe then reads the manifest-dependent
rest of the request from stdin (`--request-stdin`). `RealProbe` takes a prestarted process whose
command line equals the one it would run, else starts its own.

This module imports only the standard library (and kernodeck.layers, kernodeck.errors): importing it costs nothing.
"""

from __future__ import annotations

import atexit
import os
import subprocess
from pathlib import Path

from kernodeck.layers import FACT_LAYERS, Layer, selected

PROBE_DIR = Path(__file__).resolve().parent
SCRIPT = PROBE_DIR / "script.py"

#: Sub-directory of the cache directory holding the RECORD verification cache (see script.py).
RECORDS_CACHE = "records-v1"

_started: dict[tuple[str, ...], subprocess.Popen[bytes]] = {}


def probe_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"
    env.pop("PYTHONPATH", None)
    return env


def script_command(
    python: str, *, records: bool, rehash: bool, records_cache: Path | None, smi: bool = True
) -> list[str]:
    """The probe's command line; the rest of the request goes to its stdin."""
    cmd = [python, "-I", str(SCRIPT), "--request-stdin"]
    if records:
        cmd.append("--records")
        if rehash:
            cmd.append("--rehash")
        if records_cache is not None:
            cmd += ["--records-cache", str(records_cache)]
    if not smi:
        cmd.append("--no-smi")
    return cmd


def spawn(cmd: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=probe_env()
    )


def prestart(cmd: list[str]) -> None:
    """Start the probe now; `take(cmd)` hands it over. Never raises: a probe that cannot start
    here is started (and its error reported) by RealProbe."""
    key = tuple(cmd)
    if key in _started:
        return
    try:
        _started[key] = spawn(cmd)
    except OSError:
        return
    if len(_started) == 1:
        atexit.register(_reap)


def take(cmd: list[str]) -> subprocess.Popen[bytes] | None:
    """The prestarted probe with exactly this command line, if any (each is taken once)."""
    return _started.pop(tuple(cmd), None)


def discard(cmd: list[str]) -> None:
    """Stop a prestarted probe nobody took (the run failed before it needed the facts)."""
    proc = take(cmd)
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _reap() -> None:
    """Probes started for a run that ended before it needed them (bad manifest, usage error)."""
    for proc in list(_started.values()):
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    _started.clear()


def records_cache_dir(cache_dir: Path | None) -> Path | None:
    return cache_dir / RECORDS_CACHE if cache_dir is not None else None


def wants_facts(only: tuple[str, ...] | list[str], skip: tuple[str, ...] | list[str]) -> tuple[bool, bool]:
    """(whether the selected layers need the environment probe, whether they check RECORD)."""
    chosen = selected(only, skip)
    return bool(FACT_LAYERS & set(chosen)), Layer.PACKAGES in chosen
