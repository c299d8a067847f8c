"""What `kernodeck capture` records about the system comes from verify's own probes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernodeck.capture import SystemObservation, capture, observation_from_facts, observe_system
from kernodeck.interpreters import env_python
from kernodeck.probe.facts import Facts
from kernodeck.probe.runner import FakeProbe, ProbeRequest

FIXTURES = Path(__file__).parent / "fixtures" / "probes"

MANIFEST = """\
schema-version = 1
[reference]
name = "cap"
id = "2026-01-01.1"
[python]
version = "3.11"
[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"
"""


def _facts(name: str) -> Facts:
    probe = FakeProbe(FIXTURES / name)
    facts = probe.collect(ProbeRequest())
    facts.torch = probe.collect_torch(ProbeRequest(compute=False))
    return facts


def test_observation_from_recorded_facts() -> None:
    h100 = observation_from_facts(_facts("h100_cu126.json"))
    assert h100.cuda == "12.6" and h100.rocm is None
    assert h100.nvidia_driver is not None and h100.nvidia_driver[:1].isdigit()
    assert h100.gpus and h100.gpus[0]["name"] == "NVIDIA H100 80GB HBM3"
    assert h100.gpus[0]["compute_capability"] == "9.0" and h100.gpus[0]["memory_gib"] == 79.2
    mi300 = observation_from_facts(_facts("mi300x_rocm62.json"))
    assert mi300.rocm is not None and mi300.rocm.startswith("6.2") and mi300.cuda is None
    cpu = observation_from_facts(_facts("cpu_linux.json"))
    assert cpu.gpus == [] and cpu.cuda is None and cpu.rocm is None


def test_observe_system_runs_the_real_probe_in_the_given_interpreter(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120
    )
    seen = observe_system(str(env_python(tmp_path / "v")))
    # no torch in a fresh venv: nothing about CUDA/ROCm or devices, whatever this machine has
    assert seen is not None and seen.cuda is None and seen.rocm is None and seen.gpus == []


def test_a_probe_that_cannot_run_is_a_note_not_a_failure(tmp_path: Path) -> None:
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no such interpreter really' >&2\nexit 3\n")
    broken.chmod(0o755)
    assert observe_system(str(broken)) is None
    manifest = tmp_path / "repro.toml"
    manifest.write_text(MANIFEST)
    result = capture(manifest, python=str(broken), dry_run=True)
    assert any(
        n.startswith(f"the system was not observed: the environment probe could not run under {broken}")
        for n in result.notes
    )
    # a system probe that answers is used as it is
    result = capture(manifest, python=str(broken), system_probe=lambda _p: SystemObservation(), dry_run=True)
    assert not any("the system was not observed" in n for n in result.notes)
