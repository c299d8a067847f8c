"""Run the probes under a target interpreter, or replay recorded facts.

`Probe` is the one interface through which every host fact reaches the verifier: `RealProbe`
runs probe/script.py under the interpreter that kernodeck.interpreters chose, in its own process,
and gathers torch's facts with probe/torch_probe.py: in this process, on the torch the script
imports anyway, when the chosen interpreter is the running one (`require()`, verify without
`--python` in the project's venv), else (a `--python` target, or `isolate_torch=True`) in a process
of its own with a timeout. Both paths run the same `torch_probe.stages` and the same
`torch_facts`; the facts say which was used (`TorchFacts.mode`). `FakeProbe` returns recorded
fixtures in tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from packaging.utils import canonicalize_name

from kernodeck.errors import EXIT_FAILED, KernodeckError, UsageError
from kernodeck.fingerprint import FingerprintCache
from kernodeck.interpreters import Interpreter, choose, is_running
from kernodeck.probe import launch
from kernodeck.probe.facts import Facts, TorchCompute, TorchFacts
from kernodeck.probe.launch import PROBE_DIR, SCRIPT
from kernodeck.probe.torch_probe import Imported, import_ahead
from kernodeck.support.envvars import TORCH_TIMEOUT
from kernodeck.support.firsterror import first_error

__all__ = [
    "SCRIPT",
    "FakeProbe",
    "Probe",
    "ProbeFailed",
    "ProbeRequest",
    "RealProbe",
    "parse_torch_output",
    "torch_facts",
    "torch_in_process",
]

TORCH_SCRIPT = PROBE_DIR / "torch_probe.py"

#: File in the cache directory holding in-process control-computation verdicts (see TorchVerdicts).
TORCH_VERDICTS = "torch-verdicts-v1.json"

DEFAULT_TIMEOUT = 600.0
DEFAULT_TORCH_TIMEOUT = TORCH_TIMEOUT.number(180.0)


class ProbeFailed(KernodeckError):
    """The environment probe could not run under the target interpreter or printed no facts."""

    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class ProbeRequest:
    """What to collect. `records`: hash installed files against RECORD; `torch`: run the torch
    probe; `device`: the device kind the control computation must use ("auto" picks the best)."""

    records: bool = True
    locate: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    env_present: tuple[str, ...] = ()
    torch: bool = True
    compute: bool = True
    device: str = "auto"
    smi: bool = True


class Probe(Protocol):
    """Where facts come from. `collect` gathers the environment (torch left "not-run");
    `collect_torch` imports torch in its own process and lists devices and computes."""

    @property
    def python(self) -> str: ...

    def collect(self, request: ProbeRequest) -> Facts: ...

    def collect_torch(self, request: ProbeRequest) -> TorchFacts: ...


class FakeProbe:
    """Replays recorded facts (a fixture file, its JSON text, a dict or a Facts)."""

    def __init__(
        self, fixture: str | Path | dict[str, Any] | Facts, *, python: str = "/fixture/bin/python"
    ) -> None:
        if isinstance(fixture, Facts):
            self._facts = fixture
        elif isinstance(fixture, dict):
            self._facts = Facts.model_validate(fixture)
        elif isinstance(fixture, Path) or (isinstance(fixture, str) and not fixture.lstrip().startswith("{")):
            self._facts = Facts.model_validate_json(Path(fixture).read_text("utf-8"))
        else:
            self._facts = Facts.model_validate_json(fixture)
        self._python = python
        self.requests: list[ProbeRequest] = []

    @property
    def python(self) -> str:
        return self._python

    def collect(self, request: ProbeRequest) -> Facts:
        self.requests.append(request)
        facts = self._facts.model_copy(deep=True)
        facts.torch = TorchFacts()
        return facts

    def collect_torch(self, request: ProbeRequest) -> TorchFacts:
        self.requests.append(request)
        torch = self._facts.torch.model_copy(deep=True)
        if not request.compute and torch.compute.status != "not-run":
            torch.compute = TorchCompute(status="skipped", error="--no-compute")
        return torch


class RealProbe:
    """Runs the probes as subprocesses of the target interpreter."""

    def __init__(
        self,
        python: str | os.PathLike[str] | Interpreter | None = None,
        *,
        cache: FingerprintCache | None = None,
        rehash: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        torch_timeout: float = DEFAULT_TORCH_TIMEOUT,
        isolate_torch: bool = False,
    ) -> None:
        self.interpreter = choose(python)
        #: torch's facts are gathered in this process (on the torch it imports) when the chosen
        #: interpreter is the running one and no isolation was asked for
        self.torch_in_process = not isolate_torch and is_running(self.interpreter)
        self._facts: Facts | None = None
        self._python = self.interpreter.path
        self.cache = cache
        self.rehash = rehash
        self.timeout = timeout
        self.torch_timeout = torch_timeout
        self._torch_absent = False
        #: `import torch` done ahead (import_torch_ahead), reported by collect_torch
        self._ahead: Imported | None = None

    def import_torch_ahead(self) -> None:
        """Import torch in this process now, while the environment probe runs on another core
        (require() before the script's `import torch`); collect_torch reports its outcome and
        time as the import stage's. Nothing happens where torch is probed in a process of its own."""
        if self.torch_in_process and self._ahead is None:
            self._ahead = import_ahead()

    @property
    def python(self) -> str:
        return self._python

    def _env(self) -> dict[str, str]:
        return launch.probe_env()

    def collect(self, request: ProbeRequest) -> Facts:
        self._facts = self._run_script(request)
        return self._facts

    def collect_torch(self, request: ProbeRequest) -> TorchFacts:
        if self._torch_absent and not self.torch_in_process:
            # The environment probe found no torch to import (no distribution, no module); in
            # this process the import is tried instead (it is cheap, and sees the script's path).
            return TorchFacts(status="not-installed", error="ModuleNotFoundError: No module named 'torch'")
        if self.torch_in_process:
            verdicts = None
            if self.cache is not None and self.cache.path is not None and not self.rehash:
                verified = verified_torch(self._facts)
                if verified is not None:
                    verdicts = TorchVerdicts(self.cache.path.parent / TORCH_VERDICTS, verified)
            return torch_in_process(request, verdicts, self._ahead)
        proc = self._start_torch(request)
        facts = self._finish_torch(proc, self.torch_timeout, request)
        facts.mode = "isolated"
        return facts

    @property
    def records_cache(self) -> Path | None:
        """Where the probe keeps what it proved about installed files (None: no cache)."""
        if self.cache is None or self.cache.path is None:
            return None
        return launch.records_cache_dir(self.cache.path.parent)

    def script_command(self, request: ProbeRequest) -> list[str]:
        return launch.script_command(
            self._python,
            records=request.records,
            rehash=self.rehash,
            records_cache=self.records_cache,
            smi=request.smi,
        )

    def prestart(self, request: ProbeRequest) -> None:
        """Start the environment probe for `request` now (its locate/env parts come later)."""
        launch.prestart(self.script_command(request))

    def _run_script(self, request: ProbeRequest) -> Facts:
        cmd = self.script_command(request)
        rest = {
            "locate": list(request.locate),
            "env": list(request.env),
            "env_present": list(request.env_present),
        }
        try:
            proc = launch.take(cmd) or launch.spawn(cmd)
        except OSError as e:
            raise UsageError(f"cannot run {self._python}: {e.strerror or e}") from None
        # early: the probe saves its RECORD cache after it printed the facts (None: still saving)
        data = (json.dumps(rest) + "\n").encode("utf-8")
        done = launch.finish(proc, data, self.timeout, early=request.records)
        out, err = done.out, done.err
        if done.timed_out:
            raise ProbeFailed(f"the environment probe under {self._python} timed out after {self.timeout:g}s")
        if done.returncode not in (0, None):
            stderr = err.decode("utf-8", "replace")
            if _too_old(stderr):
                raise ProbeFailed(
                    f"{self._python} is older than Python 3.8, which the environment probe needs",
                    hint="pass --python an interpreter of Python 3.8 or later (the project's own environment)",
                )
            first = first_error(stderr, fallback=True)
            raise ProbeFailed(
                f"the environment probe failed under {self._python}: {first or f'exit status {done.returncode}'}",
                hint="the probe needs Python >= 3.8; check that the interpreter starts: PYTHON -c 'import sys'",
            )
        try:
            facts = Facts.model_validate_json(out)
        except ValueError as e:  # pydantic's ValidationError (pydantic is imported only for bad facts)
            raise ProbeFailed(
                f"the environment probe under {self._python} printed unreadable facts: {e}"
            ) from None
        tf = facts.torch_files
        self._torch_absent = not tf.installed and tf.importable is False
        return facts

    def _start_torch(self, request: ProbeRequest) -> subprocess.Popen[bytes]:
        cmd = [*launch.run_script(self._python, TORCH_SCRIPT), "--device", request.device]
        if not request.compute:
            cmd.append("--no-compute")
        return launch.spawn(cmd, self._env())

    def _finish_torch(
        self, proc: subprocess.Popen[bytes], timeout: float, request: ProbeRequest
    ) -> TorchFacts:
        done = launch.finish(proc, None, timeout)
        return parse_torch_output(
            done.out.decode("utf-8", "replace"),
            done.err.decode("utf-8", "replace"),
            done.returncode,
            timed_out=done.timed_out,
            timeout=timeout,
        )


#: What interpreters older than the probe's minimum say when started with it: Python 2 and < 3.4
#: do not know `-I`; 3.4-3.6 cannot compile `from __future__ import annotations`.
_TOO_OLD = ("Unknown option: -I", "unknown option -I", "future feature annotations is not defined")


def _too_old(stderr: str) -> bool:
    return any(marker in stderr for marker in _TOO_OLD)


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def verified_torch(facts: Facts | None) -> str | None:
    """The sha256 of torch's RECORD when this run checked every torch file against it and found
    nothing wrong (so the digest names the torch bits), else None."""
    if facts is None or not facts.records.checked:
        return None
    d = facts.dists().get(canonicalize_name("torch"))
    if d is None or d.record is None or d.record_problems or not d.record_files:
        return None
    try:
        with open(d.record, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


class TorchVerdicts:
    """Control-computation verdicts of earlier in-process runs, keyed on torch's verified RECORD
    digest, this interpreter, the import and devices stages (build, threads, every device and
    its properties, the visible devices) and the request; a verdict is reused only when all are
    equal. Only a passing verdict is kept: a failure is computed again every time."""

    def __init__(self, path: Path, record_sha256: str) -> None:
        self.path = path
        self.record_sha256 = record_sha256

    def key(self, request: ProbeRequest, stages: Mapping[str, dict[str, Any]]) -> str:
        imp = {k: v for k, v in stages["import"].items() if k != "seconds"}
        probe = hashlib.sha256(TORCH_SCRIPT.read_bytes()).hexdigest()
        text = json.dumps(
            [
                self.record_sha256,
                os.path.realpath(sys.executable),
                probe,
                request.device,
                imp,
                stages["devices"],
            ],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> dict[str, Any] | None:
        found = self._load().get(key)
        return found if isinstance(found, dict) and found.get("status") == "ok" else None

    def put(self, key: str, compute: dict[str, Any]) -> None:
        if compute.get("status") != "ok":
            return
        from kernodeck.support.fsio import atomic_write_text

        data = self._load()
        data = (
            {k: v for k, v in data.items() if v.get("record_sha256") == self.record_sha256}
            if len(data) > 64
            else data
        )
        data[key] = {**compute, "record_sha256": self.record_sha256}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps(data, sort_keys=True), fsync=False)
        except OSError:
            return  # a cache that cannot be written is a cache miss next time


def torch_in_process(
    request: ProbeRequest, verdicts: TorchVerdicts | None = None, ahead: Imported | None = None
) -> TorchFacts:
    """torch's facts gathered in this process, on the torch module it has imported (or imports
    now; `ahead`: the import done while the environment probe ran, its outcome and time reported
    as the import stage's): the same stages as the isolated probe, turned into facts the same way.
    With `verdicts`, the control computation's passing verdict of an earlier run is reused when
    nothing it depends on changed."""
    from kernodeck.probe import torch_probe

    stages: dict[str, dict[str, Any]] = {}
    key: str | None = None
    reused = False
    importer = ahead.importer if ahead is not None else torch_probe.import_torch
    for stage in torch_probe.stages(request.device, request.compute, importer=importer):
        if ahead is not None and stage["stage"] == "import":
            stage["seconds"] = ahead.seconds
        # as the isolated probe prints them: JSON, so that both paths give the same typed facts
        stages[stage["stage"]] = json.loads(json.dumps(stage, default=str))
        if stage["stage"] == "devices" and verdicts is not None and request.compute:
            key = verdicts.key(request, stages)
            cached = verdicts.get(key)
            if cached is not None:
                stages["compute"] = {k: v for k, v in cached.items() if k != "record_sha256"}
                reused = True
                break  # the generator is closed: no computation
    if key is not None and verdicts is not None and not reused and "compute" in stages:
        verdicts.put(key, stages["compute"])
    facts = torch_facts(stages, "", 0)
    facts.mode = "in-process"
    facts.compute.reused = reused
    return facts


def parse_torch_output(
    stdout: str, stderr: str, rc: int | None, *, timed_out: bool = False, timeout: float = 0
) -> TorchFacts:
    """Turn the torch probe's JSON lines (possibly cut short) into TorchFacts."""
    stages: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("stage"), str):
            stages[obj["stage"]] = obj
    return torch_facts(stages, stderr, rc, timed_out=timed_out, timeout=timeout)


def torch_facts(
    stages: Mapping[str, dict[str, Any]],
    stderr: str,
    rc: int | None,
    *,
    timed_out: bool = False,
    timeout: float = 0,
) -> TorchFacts:
    """TorchFacts from the torch probe's stages by name (torch_probe.stages), however they ran:
    `stderr`, `rc` and `timed_out` describe the process that ran them (in-process: "", 0)."""
    tail = "\n".join(stderr.strip().splitlines()[-20:]) or None
    imp = stages.get("import")
    reason = (
        f"timed out after {timeout:g}s"
        if timed_out
        else (f"killed by {_signal_name(rc)}" if rc is not None and rc < 0 else f"exited with status {rc}")
    )
    if imp is None:
        if timed_out:
            return TorchFacts(status="timeout", error=f"import torch hung: {reason}", stderr_tail=tail)
        first = first_error(stderr, fallback=True)
        return TorchFacts(
            status="crashed",
            error=f"import torch crashed ({reason})" + (f": {first}" if first else ""),
            stderr_tail=tail,
        )
    if imp.get("status") != "ok":
        err = str(imp.get("error") or "import failed")
        missing = err.startswith("ModuleNotFoundError: No module named 'torch'")
        return TorchFacts(status="not-installed" if missing else "import-failed", error=err, stderr_tail=tail)
    data: dict[str, Any] = {k: v for k, v in imp.items() if k not in ("stage", "status", "seconds")}
    data["import_seconds"] = imp.get("seconds")
    devs = stages.get("devices")
    if devs is not None:
        for k, v in devs.items():
            if k == "stage":
                continue
            data["devices_error" if k == "error" else k] = v
    comp = stages.get("compute")
    if comp is not None:
        data["compute"] = TorchCompute.model_validate({k: v for k, v in comp.items() if k != "stage"})
    elif rc != 0 or timed_out:
        where = "listing devices" if devs is None else "the control computation"
        first = first_error(stderr, fallback=True)
        data["compute"] = TorchCompute(
            status="failed", error=f"torch probe {reason} during {where}" + (f": {first}" if first else "")
        )
        if devs is None:
            data["devices_error"] = data["compute"].error
    return TorchFacts(status="ok", stderr_tail=tail if rc != 0 else None, **data)
