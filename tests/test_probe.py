"""The probes, for real under this interpreter and under fake broken torches, and their parsing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from kernodeck.probe.facts import Facts, NvidiaFacts, Nvml, Smi, TorchFacts
from kernodeck.probe.runner import FakeProbe, ProbeRequest, RealProbe, parse_torch_output

FIXTURES = Path(__file__).parent / "fixtures" / "probes"


@pytest.fixture(scope="module")
def real_torch() -> TorchFacts:
    """The torch CPU build of the test environment, probed once for the whole module."""
    pytest.importorskip("torch")
    return RealProbe(sys.executable).collect_torch(ProbeRequest(device="cpu"))


def test_real_torch_cpu_build(real_torch: TorchFacts) -> None:
    import torch

    assert real_torch.status == "ok", real_torch.error
    assert real_torch.version == torch.__version__
    assert real_torch.build_kind == "cpu" and real_torch.cuda is None and real_torch.hip is None
    assert real_torch.cuda_available is False and real_torch.devices == []
    c = real_torch.compute
    assert c.status == "ok" and c.device == "cpu"
    assert c.rel_err is not None and c.tolerance is not None and c.rel_err <= c.tolerance
    assert c.seconds is not None  # measured (its value depends on the machine: never asserted)


def test_real_environment_probe() -> None:
    facts = RealProbe(sys.executable).collect(
        ProbeRequest(records=False, torch=False, locate=("pytest:pytest/__init__.py", "nope:x"))
    )
    assert facts.interpreter.version.startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    assert facts.markers["sys_platform"] == sys.platform
    assert "pytest" in facts.dists()
    assert facts.located[0].found and facts.located[0].file is not None
    assert not facts.located[1].found and "not installed" in (facts.located[1].error or "")
    if "torch" in facts.dists():
        assert (
            facts.torch_files.installed
            and facts.torch_files.version == facts.dists()[canonicalize_name("torch")].version
        )


def _fake_torch_env(tmp_path: Path, init: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    site = next((tmp_path / "v" / "lib").glob("python3*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(init)
    (site / "torch-2.6.0+cu126.dist-info").mkdir()
    (site / "torch-2.6.0+cu126.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.6.0+cu126\n\n"
    )
    (site / "torch" / "version.py").write_text(
        "__version__ = '2.6.0+cu126'\ncuda: Optional[str] = '12.6'\nhip = None\n"
    )
    return tmp_path / "v" / "bin" / "python"


@pytest.mark.parametrize(
    ("init", "status", "error"),
    [
        (
            "raise ImportError('libcudnn.so.9: cannot open shared object file: No such file or directory')\n",
            "import-failed",
            "ImportError: libcudnn.so.9",
        ),
        ("import os\nos.abort()\n", "crashed", "import torch crashed (killed by SIGABRT)"),
        ("import time\ntime.sleep(60)\n", "timeout", "import torch hung: timed out after 2s"),
    ],
)
def test_broken_torch_becomes_a_recorded_failure(tmp_path: Path, init: str, status: str, error: str) -> None:
    python = _fake_torch_env(tmp_path, init)
    probe = RealProbe(python, torch_timeout=2)
    t = probe.collect_torch(ProbeRequest())
    assert t.status == status and (t.error or "").startswith(error)
    facts = probe.collect(ProbeRequest(torch=False))
    assert (
        facts.torch_files.version == "2.6.0+cu126" and facts.torch_files.cuda == "12.6"
    )  # read without importing


def test_torch_output_cut_short_keeps_earlier_stages() -> None:
    out = (
        '{"stage":"start"}\n{"stage":"import","status":"ok","seconds":1.2,"version":"2.6.0+cu126","cuda":"12.6",'
        '"hip":null,"build_kind":"cuda"}\n'
    )
    t = parse_torch_output(out, "Fatal Python error: Segmentation fault\n", -11)
    assert t.status == "ok" and t.version == "2.6.0+cu126"
    assert t.compute.status == "failed" and "SIGSEGV during listing devices" in (t.compute.error or "")
    assert "Fatal Python error" in (t.compute.error or "")


def test_not_installed() -> None:
    t = parse_torch_output(
        '{"stage":"import","status":"failed","error":"ModuleNotFoundError: No module named \'torch\'"}\n',
        "",
        0,
    )
    assert t.status == "not-installed"


def test_driver_sources_in_order() -> None:
    open_kernel = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.04  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Fri Mar  7 21:50:48 UTC 2025\n"
    )
    assert NvidiaFacts(proc_version=open_kernel).driver() == ("570.124.04", "/proc/driver/nvidia/version")
    assert NvidiaFacts(sys_module_version="560.35.03\n").driver() == (
        "560.35.03",
        "/sys/module/nvidia/version",
    )
    smi = Smi(
        fields=["index", "name", "uuid", "driver_version", "memory.total", "compute_cap", "pci.bus_id"],
        csv="0, NVIDIA A100-SXM4-80GB, GPU-7c1e2b9a, 550.90.07, 81920, 8.0, 00000000:07:00.0\n",
        ok=True,
    )
    n = NvidiaFacts(smi=smi)
    assert n.driver() == ("550.90.07", "nvidia-smi")
    assert n.smi_gpus()[0].memory_total_mib == 81920 and n.smi_gpus()[0].compute_cap == "8.0"
    assert NvidiaFacts(nvml=Nvml(ok=True, driver_version="535.183.01")).driver() == (
        "535.183.01",
        "NVML (nvidia-ml-py)",
    )
    assert NvidiaFacts().driver() is None


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_fixtures_are_valid_facts(fixture: str) -> None:
    facts = Facts.model_validate_json((FIXTURES / fixture).read_text())
    assert facts.platform.os == "linux"
    fake = FakeProbe(FIXTURES / fixture)
    assert fake.collect(ProbeRequest()).torch.status == "not-run"
    assert fake.collect_torch(ProbeRequest(compute=False)).compute.status in ("skipped", "not-run")
