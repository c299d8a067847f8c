"""torch's backend and device checks in the interpreter being checked (`require()`, verify without
`--python`) versus the isolated torch probe (`--isolate-torch`, `isolate_torch=True`, `--python`
targets), on the real installed torch CPU build.

Which path ran is observed twice: the report's mode, and a counting hook at the launch boundary
(`kernodeck.probe.launch.spawn`, through which every probe process starts)."""

from __future__ import annotations

import hashlib
import json
import platform
import re
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernodeck.api import require, verify
from kernodeck.cli import cli
from kernodeck.interpreters import Interpreter, Source, choose, is_running
from kernodeck.probe import launch
from kernodeck.probe.facts import Facts
from kernodeck.probe.runner import (
    TORCH_VERDICTS,
    ProbeRequest,
    RealProbe,
    TorchVerdicts,
    torch_in_process,
    verified_torch,
)
from kernodeck.report import Report

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

#: The layers that use torch's facts, plus the interpreter and system layers (no RECORD hashing).
LAYERS = ("interpreter", "system", "backend", "device")

MANIFEST = """\
schema-version = 1

[reference]
name = "in-process"
id = "1"

[python]
version = "{py}"

[packages]
requirements = ["torch=={torch}"]

[[platform]]
name = "here"
os = "linux"
arch = "{arch}"
backend = "cpu"
"""


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if not sys.platform.startswith("linux"):
        pytest.fail("these tests declare a linux platform")  # the suite runs on linux
    # the interpreter running the tests is the one checked (no activated environment elsewhere)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "repro.toml"
    file.write_text(
        MANIFEST.format(
            py=f"{sys.version_info.major}.{sys.version_info.minor}",
            torch=torch.__version__.split("+")[0],
            arch=platform.machine(),
        )
    )
    return file


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """Every probe command started through the launch boundary (the real spawn still runs)."""
    seen: list[list[str]] = []
    real = launch.spawn

    def counting(cmd: list[str], *a: Any, **kw: Any) -> Any:
        seen.append(list(cmd))
        return real(cmd, *a, **kw)

    monkeypatch.setattr(launch, "spawn", counting)
    yield seen


def torch_runs(seen: list[list[str]]) -> list[list[str]]:
    return [c for c in seen if any(Path(part).name == "torch_probe.py" for part in c)]


def comparable(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts without what differs by nature between two runs: times, and the mode itself."""
    out = {k: v for k, v in facts.items() if k not in ("import_seconds", "mode")}
    out["compute"] = {k: v for k, v in facts["compute"].items() if k != "seconds"}
    return out


def verdicts(report: Report) -> list[tuple[Any, ...]]:
    """Each step's verdict; what it observed with its timing masked (the matmul's milliseconds)."""
    return [
        (
            s.layer,
            s.name,
            s.status.value,
            re.sub(r"in [0-9.]+ ms", "in … ms", s.observed) if s.observed else s.observed,
            s.expected,
            s.error,
            s.details.get("cause"),
        )
        for s in report.steps
    ]


def torch_step(report: Report) -> Any:
    return next(s for s in report.steps if s.layer == "backend" and s.name == "torch-import")


def test_in_process_and_isolated_probes_give_the_same_facts(manifest: Path, spawned: list[list[str]]) -> None:
    here = choose(None)
    assert here.source is Source.RUNNING
    request = ProbeRequest(device="cpu")
    inproc = RealProbe(here).collect_torch(request)
    assert torch_runs(spawned) == []
    isolated = RealProbe(here, isolate_torch=True).collect_torch(request)
    assert len(torch_runs(spawned)) == 1
    assert (inproc.mode, isolated.mode) == ("in-process", "isolated")
    assert inproc.status == "ok" and inproc.compute.status == "ok"
    assert comparable(inproc.model_dump()) == comparable(isolated.model_dump())


def test_in_process_and_isolated_verify_give_the_same_verdicts(
    manifest: Path, spawned: list[list[str]]
) -> None:
    inproc = verify(manifest, only=LAYERS)
    assert torch_runs(spawned) == []
    isolated = verify(manifest, only=LAYERS, isolate_torch=True)
    assert len(torch_runs(spawned)) == 1
    assert inproc.ok and isolated.ok, (inproc.summary(), isolated.summary())
    assert verdicts(inproc) == verdicts(isolated)
    assert torch_step(inproc).details["mode"] == "in-process"
    assert torch_step(isolated).details["mode"] == "isolated"
    assert inproc.inventory["torch"]["mode"] == "in-process"
    assert isolated.inventory["torch"]["mode"] == "isolated"


def test_require_checks_torch_in_this_process(manifest: Path, spawned: list[list[str]]) -> None:
    torch.set_float32_matmul_precision("medium")
    try:
        report = require(manifest, only=LAYERS)
        # the control computation set "highest" for itself and put the script's setting back
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision("highest")
    assert torch_runs(spawned) == []
    assert [c for c in spawned if any(Path(p).name == "script.py" for p in c)], (
        spawned
    )  # the environment probe ran
    assert torch_step(report).details["mode"] == "in-process"
    assert report.inventory["torch"]["compute"]["status"] == "ok"
    assert report.inventory["torch"]["mode"] == "in-process"


def test_require_isolate_torch_starts_the_torch_probe(manifest: Path, spawned: list[list[str]]) -> None:
    report = require(manifest, only=LAYERS, isolate_torch=True)
    runs = torch_runs(spawned)
    assert len(runs) == 1 and runs[0][0] == sys.executable
    assert report.inventory["torch"]["mode"] == "isolated"


@pytest.mark.parametrize(
    ("flags", "mode", "probes"), [((), "in-process", 0), (("--isolate-torch",), "isolated", 1)]
)
def test_cli_verify_mode(
    manifest: Path, spawned: list[list[str]], tmp_path: Path, flags: tuple[str, ...], mode: str, probes: int
) -> None:
    out = tmp_path / "report.json"
    res = CliRunner().invoke(
        cli,
        ["verify", str(manifest), "--only", ",".join(LAYERS), "--json", str(out), "--color", "never", *flags],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["inventory"]["torch"]["mode"] == mode
    assert len(torch_runs(spawned)) == probes


def test_python_option_uses_the_isolated_probe(
    manifest: Path, spawned: list[list[str]], tmp_path: Path
) -> None:
    """`--python` naming another interpreter (a venv that sees this torch through a .pth file),
    and `--python` naming this very interpreter: both isolated."""
    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    site = next((other / "lib").glob("python3*/site-packages"))
    (site / "host.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = other / "bin" / "python"
    report = verify(manifest, only=LAYERS, python=python)
    assert report.ok, report.summary()
    runs = torch_runs(spawned)
    assert len(runs) == 1 and runs[0][0] == str(python)
    assert report.inventory["torch"]["mode"] == "isolated"
    assert report.inventory["torch"]["version"] == torch.__version__

    again = verify(manifest, only=LAYERS, python=sys.executable)
    assert again.inventory["torch"]["mode"] == "isolated"
    assert len(torch_runs(spawned)) == 2


def test_an_activated_environment_is_this_one_only_when_this_process_runs_from_it(tmp_path: Path) -> None:
    here = Interpreter(sys.executable, Source.VIRTUAL_ENV, "activated venv (VIRTUAL_ENV)")
    assert is_running(here)  # this process runs from its own prefix, venv or not
    assert is_running(Interpreter(sys.executable, Source.RUNNING, "running"))
    assert not is_running(Interpreter(sys.executable, Source.OPTION, "--python"))
    other = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    chosen = choose(None, environ={"VIRTUAL_ENV": str(other)})
    assert chosen.source is Source.VIRTUAL_ENV
    assert not is_running(chosen)  # the same binary, another environment


def test_a_passing_verdict_is_reused_only_for_the_same_verified_torch(tmp_path: Path) -> None:
    """The control computation's verdict, kept under torch's verified RECORD digest and the
    devices seen: reused (nothing computed) while they stay the same, computed again otherwise."""
    path = tmp_path / TORCH_VERDICTS
    request = ProbeRequest(device="cpu")
    first = torch_in_process(request, TorchVerdicts(path, "a" * 64))
    assert first.compute.status == "ok" and not first.compute.reused
    again = torch_in_process(request, TorchVerdicts(path, "a" * 64))
    assert again.compute.reused
    assert again.compute.model_dump(exclude={"reused"}) == first.compute.model_dump(exclude={"reused"})
    other_torch = torch_in_process(request, TorchVerdicts(path, "b" * 64))
    assert not other_torch.compute.reused
    other_request = torch_in_process(ProbeRequest(device="auto"), TorchVerdicts(path, "a" * 64))
    assert not other_request.compute.reused and other_request.compute.status == "ok"
    assert not torch_in_process(request).compute.reused  # no verdicts given: always computed


def test_a_failed_verdict_is_never_kept(tmp_path: Path) -> None:
    path = tmp_path / TORCH_VERDICTS
    verdicts = TorchVerdicts(path, "c" * 64)
    verdicts.put("k", {"status": "mismatch", "rel_err": 1.0})
    assert not path.exists() and verdicts.get("k") is None
    verdicts.put("k", {"status": "ok"})
    assert verdicts.get("k") == {"status": "ok", "record_sha256": "c" * 64}


def test_verdicts_need_a_torch_whose_files_were_checked_against_record(tmp_path: Path) -> None:
    record = tmp_path / "RECORD"
    record.write_text("torch/__init__.py,sha256=x,1\n")
    base: dict[str, Any] = {
        "interpreter": {"executable": sys.executable, "version": "3.11.7", "implementation": "cpython"},
        "platform": {"system": "Linux", "os": "linux", "machine": "x86_64"},
        "markers": {},
        "records": {"checked": True},
        "distributions": [{"name": "torch", "version": "2.13.0", "record": str(record), "record_files": 1}],
    }
    assert verified_torch(Facts.model_validate(base)) == hashlib.sha256(record.read_bytes()).hexdigest()
    assert verified_torch(Facts.model_validate({**base, "records": {"checked": False}})) is None
    broken = json.loads(json.dumps(base))
    broken["distributions"][0]["record_problems"] = [{"path": "torch/__init__.py", "problem": "hash"}]
    assert verified_torch(Facts.model_validate(broken)) is None
    assert verified_torch(Facts.model_validate({**base, "distributions": []})) is None
    assert verified_torch(None) is None
