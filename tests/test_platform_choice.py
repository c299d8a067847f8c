"""Platform selection from facts (`kernodeck.platforms`): one chooser for verify (probe facts) and
rebuild (host facts), with the reason it chose and what it rejected."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.errors import UsageError
from kernodeck.handover.rebuild import choose_platform
from kernodeck.layers.run import select_platform
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.schema import Platform
from kernodeck.platforms import PlatformFacts, choose, host_facts, norm_arch, os_of_sys_platform, probe_facts
from kernodeck.probe.facts import Facts
from tests.fixtures.verify_project import MANIFEST, load


def _plat(name: str, os: str = "linux", arch: str = "x86_64", backend: str | None = None) -> Platform:
    return Platform.model_validate({"name": name, "os": os, "arch": arch, "backend": backend})


CPU = _plat("cpu", backend="cpu")
CU126 = _plat("cu126", backend="cu126")
CU121 = _plat("cu121", backend="cu121")
ANY = _plat("any")
MAC = _plat("mac", os="macos", arch="arm64")
ARM = _plat("arm", arch="aarch64")


def _host(*kinds: str, os: str = "linux", machine: str = "x86_64") -> PlatformFacts:
    return PlatformFacts(os=os, machine=machine, kinds=kinds, kinds_from="host-devices")


def _live(kind: str, cuda: str | None = None) -> PlatformFacts:
    return PlatformFacts(os="linux", machine="x86_64", kinds=(kind,), kinds_from="live-torch", cuda=cuda)


def test_a_named_platform_wins_over_every_fact() -> None:
    choice = choose([CPU, CU126], _host("cpu"), "cu126")
    assert choice.platform is CU126 and choice.named and choice.reason == "named with --platform"
    # the name is looked up among every platform of the manifest, not only the candidates
    assert choose([], None, "mac", known=[CPU, MAC]).platform is MAC
    with pytest.raises(UsageError, match="no platform 'nope' in the manifest") as e:
        choose([CPU, CU126], _host("cpu"), "nope")
    assert e.value.hint == "platforms: cpu, cu126"


def test_os_and_arch_first_with_what_was_rejected() -> None:
    choice = choose([MAC, ARM, CPU], _host("cpu", machine="AMD64"), None)
    assert choice.platform is CPU
    assert choice.reason == "matches this linux x86_64 machine (pass --platform to choose another: mac, arm)"
    with pytest.raises(
        UsageError, match="no platform in the manifest matches this linux aarch64 machine"
    ) as e:
        choose([MAC, CPU], _host("cpu", machine="aarch64"), None)
    assert e.value.context == [
        "mac: os macos, this machine is linux",
        "cpu: arch x86_64, this machine is aarch64",
    ]


def test_a_lone_platform_is_taken_as_is_only_when_asked() -> None:
    # verify: the manifest's only platform is checked, and its layers report the difference
    assert choose([MAC], _host("cpu"), None, lone=True).reason == "the only platform in the manifest"
    assert choose([MAC], None, None, lone=True).platform is MAC
    # rebuild: nothing is built for another machine
    with pytest.raises(UsageError, match="no locked platform in the manifest matches"):
        choose([MAC], _host("cpu"), None, among="locked")
    with pytest.raises(UsageError, match="without facts"):
        choose([CPU, CU126], None, None, lone=True)


def test_host_devices_choose_the_backend_gpu_first() -> None:
    gpu = choose([CPU, CU126], _host("cuda", "cpu"), None)
    assert gpu.platform is CU126 and "and its cuda devices" in gpu.reason
    cpu = choose([CPU, CU126], _host("cpu"), None)
    assert cpu.platform is CPU and "devices" not in cpu.reason
    # no platform with a backend this host has: the one without a backend (any torch build)
    assert choose([CU126, ANY], _host("cpu"), None).platform is ANY
    with pytest.raises(UsageError, match="several platforms match this linux x86_64 machine: cu126, cu121"):
        choose([CU126, CU121], _host("cuda", "cpu"), None)
    with pytest.raises(UsageError, match="no platform") as e:
        choose([CU126, CU121], _host("cpu"), None)
    assert e.value.context == [
        "cu126: backend cu126, this machine's devices: cpu",
        "cu121: backend cu121, this machine's devices: cpu",
    ]


def test_the_live_torch_chooses_the_backend_and_its_cuda_version() -> None:
    choice = choose([CU121, CU126, CPU], _live("cuda", cuda="12.6"), None)
    assert choice.platform is CU126 and "and the live torch (cuda build)" in choice.reason
    assert choose([CU126, ANY], _live("cpu"), None).platform is ANY
    with pytest.raises(UsageError) as e:
        choose([CU121, CU126], _live("cuda", cuda="11.8"), None)
    assert "cu126: backend cu126, the live torch is built for CUDA 11.8" in e.value.context


def test_verify_and_rebuild_choose_alike_on_the_same_machine() -> None:
    """A CUDA machine with a CUDA torch: the host's devices (rebuild) and the probe (verify) agree."""
    cands = [CPU, CU126, MAC]
    assert (
        choose(cands, _host("cuda", "cpu"), None).platform
        is choose(cands, _live("cuda", "12.6"), None).platform
    )


def test_probe_facts_from_recorded_probes() -> None:
    cpu = probe_facts(Facts.model_validate(load("cpu_linux")))
    assert (cpu.os, cpu.arch, cpu.kinds) == ("linux", "x86_64", ("cpu",))
    h100 = probe_facts(Facts.model_validate(load("h100_cu126")))
    assert h100.kinds == ("cuda",) and h100.cuda == "12.6" and h100.kinds_from == "live-torch"
    rocm = probe_facts(Facts.model_validate(load("mi300x_rocm62")))
    assert rocm.kinds == ("rocm",)


def test_verify_select_platform_goes_through_the_chooser(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text(MANIFEST.format(system=""))
    m = load_manifest(tmp_path / "repro.toml")
    assert select_platform(m, Facts.model_validate(load("h100_cu126")), None).name == "linux-x86_64-cu126"
    assert (
        select_platform(m, Facts.model_validate(load("mi300x_rocm62")), None).name == "linux-x86_64-rocm6.2"
    )
    assert select_platform(m, None, "linux-x86_64-cpu").name == "linux-x86_64-cpu"


def test_rebuild_chooses_among_the_locked_platforms_with_host_facts(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text(MANIFEST.format(system=""))
    m = load_manifest(tmp_path / "repro.toml")
    with pytest.raises(UsageError, match=r"no requirements-rebuild-<platform>\.txt"):
        choose_platform(m, tmp_path, None, _host("cuda", "cpu"))
    (tmp_path / "requirements-rebuild-linux-x86_64-cpu.txt").write_text("")
    (tmp_path / "requirements-rebuild-linux-x86_64-cu126.txt").write_text("")
    gpu = choose_platform(m, tmp_path, None, _host("cuda", "cpu"))
    assert gpu.platform.name == "linux-x86_64-cu126"
    assert gpu.reason == (
        "matches this linux x86_64 machine and its cuda devices "
        "(pass --platform to choose another: linux-x86_64-cpu, linux-x86_64-rocm6.2)"
    )
    # the rocm platform is not locked: a ROCm host rebuilds the cpu one
    assert choose_platform(m, tmp_path, None, _host("rocm", "cpu")).platform.name == "linux-x86_64-cpu"
    assert choose_platform(m, tmp_path, "linux-x86_64-rocm6.2").named


def test_host_facts_describe_this_host() -> None:
    facts = host_facts(kinds=("cpu",))
    assert facts.kinds == ("cpu",) and facts.kinds_from == "host-devices"
    assert facts.os in ("linux", "macos", "windows") and facts.arch
    assert host_facts().kinds[-1] == "cpu"  # every host can run the cpu build


def test_architecture_and_os_spellings_are_normalised_here() -> None:
    assert [norm_arch(a) for a in ("AMD64", "x64", "arm64", "aarch64", "i386", "x86", "riscv64")] == [
        "x86_64",
        "x86_64",
        "aarch64",
        "aarch64",
        "i686",
        "i686",
        "riscv64",
    ]
    assert [os_of_sys_platform(p) for p in ("linux", "linux2", "darwin", "win32", "cygwin", "freebsd14")] == [
        "linux",
        "linux",
        "macos",
        "windows",
        "windows",
        "freebsd14",
    ]
    assert PlatformFacts(os="windows", machine="AMD64", kinds=(), kinds_from="drivers").arch == "x86_64"


def test_the_chooser_does_not_import_the_verify_layers() -> None:
    """platforms.py is below verify/ and rebuild: importing it first (or alone) needs no verify
    module, so neither importer has to reach it through a half-initialised module."""
    code = (
        "import sys, kernodeck.platforms, kernodeck.layers.run, kernodeck.handover.rebuild; "
        "print(sorted(m for m in sys.modules if m.startswith('kernodeck.layers.')))"
    )
    alone = "import sys, kernodeck.platforms; print(sorted(m for m in sys.modules if m.startswith('kernodeck.layers.')))"
    env_path = str(Path(__file__).resolve().parents[1] / "src")
    out = [
        subprocess.run(
            [sys.executable, "-c", c],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
            check=True,
        ).stdout.strip()
        for c in (alone, code)
    ]
    assert out[0] == "[]"
    assert "'kernodeck.layers.run'" in out[1]
