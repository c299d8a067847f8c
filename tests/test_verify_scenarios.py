"""Scenario tests: verify over recorded probe fixtures (tests/fixtures/probes/*.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernodeck.api import require
from kernodeck.errors import CheckFailed, UsageError
from kernodeck.probe.runner import FakeProbe
from kernodeck.report import Report, Status
from tests.fixtures.verify_project import GPU_SYSTEM, load, project, run, statuses, step


def test_cpu_machine_cpu_manifest_passes(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    report = run(tmp_path, facts)  # platform matched automatically
    assert report.platform == "linux-x86_64-cpu"
    assert report.ok, report.summary()
    assert statuses(report, "backend") == {"torch-import": "passed", "build-kind": "passed"}
    assert step(report, "device", "compute").status is Status.PASSED
    assert "cpu" in step(report, "device", "compute").observed
    assert step(report, "contract", "requirements").status is Status.PASSED
    assert step(report, "packages", "records").status is Status.PASSED
    assert report.inventory["torch"]["build_kind"] == "cpu"
    assert {
        "name": "numpy",
        "version": "2.2.1",
        "installer": "pip",
        "requested": True,
        "editable": False,
    } in report.inventory["distributions"]


def test_the_contract_step_says_how_many_requirements_it_checked(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    observed = step(run(tmp_path, facts, only=["contract"]), "contract", "requirements").observed
    n = len(facts["distributions"])
    assert observed.endswith(f" requirements of {n} distributions met") and not observed.startswith("0 ")
    for d in facts["distributions"]:  # nothing requires anything: said so, not "0 requirements ... met"
        d["requires"] = []
    observed = step(run(tmp_path, facts, only=["contract"]), "contract", "requirements").observed
    assert observed == f"no requirement to check: none of the {n} distributions requires another"


def test_healthy_h100_cu126_passes(tmp_path: Path) -> None:
    facts = load("h100_cu126")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts)
    assert report.platform == "linux-x86_64-cu126"
    assert report.ok, report.summary()
    drv = step(report, "system", "nvidia-driver")
    assert drv.observed == "560.35.03" and drv.details["source"] == "/proc/driver/nvidia/version"
    assert step(report, "system", "driver-for-cuda").status is Status.PASSED
    assert "2 × NVIDIA H100 80GB HBM3" in step(report, "device", "accelerator").observed
    assert step(report, "device", "arch:0").status is Status.PASSED
    assert step(report, "device", "compute").details["device"] == "cuda:0"


def test_cuda_manifest_without_driver(tmp_path: Path) -> None:
    facts = load("cu126_no_driver")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    assert not report.ok
    assert step(report, "system", "nvidia-driver").details["cause"] == "no-driver"
    acc = step(report, "device", "accelerator")
    assert acc.status is Status.FAILED and acc.details["cause"] == "no-driver"
    comp = step(report, "device", "compute")
    assert comp.status is Status.SKIPPED and "never computed on the CPU" in (comp.error or "")
    assert (
        step(report, "packages", "pins").status is Status.PASSED
    )  # packages are fine: the system chain is not


def test_driver_too_old_for_torch_cuda(tmp_path: Path) -> None:
    facts = load("a100_driver_470_cu126")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    d = step(report, "system", "driver-for-cuda")
    assert d.status is Status.FAILED and d.details["cause"] == "driver-too-old"
    assert d.observed == "470.239.06" and "525.60.13" in d.expected
    assert step(report, "system", "nvidia-driver").status is Status.FAILED  # >=560.28 from the manifest
    acc = step(report, "device", "accelerator")
    assert acc.details["cause"] == "driver-too-old"
    assert step(report, "device", "compute").status is Status.SKIPPED


def test_cpu_torch_build_on_gpu_machine_is_wrong_label(tmp_path: Path) -> None:
    facts = load("h100_cpu_torch")
    cu = load("h100_cu126")
    pins = {d["name"]: d["version"] for d in cu["distributions"] if d["name"] not in ("pip", "setuptools")}
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM, pins=pins)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    bk = step(report, "backend", "build-kind")
    assert bk.status is Status.FAILED and bk.details["cause"] == "cpu-only-build"
    acc = step(report, "device", "accelerator")
    assert acc.status is Status.FAILED and acc.details["cause"] == "cpu-only-build"
    assert step(report, "device", "compute").status is Status.SKIPPED  # no CPU fallback passes for a GPU run
    label = step(report, "packages", "pin:torch")
    assert label.details["cause"] == "wrong-local-label"
    assert label.expected == "2.6.0+cu126" and label.observed == "2.6.0+cpu"
    assert "+cpu" in label.error and "+cu126" in label.error
    missing = step(report, "packages", "pin:nvidia-cudnn-cu12")
    assert missing.details["cause"] == "missing"


def test_rocm_build_on_amd_machine(tmp_path: Path) -> None:
    facts = load("mi300x_rocm62")
    project(
        tmp_path,
        facts,
        "linux-x86_64-rocm6.2",
        system='\n[system]\nrequire-accelerator = true\nrocm = "6.2"\n',
    )
    report = run(tmp_path, facts)
    assert report.platform == "linux-x86_64-rocm6.2"
    assert report.ok, report.summary()
    bk = step(report, "backend", "build-kind")
    assert bk.observed.startswith("ROCm") and bk.details["torch.version.hip"] == "6.2.41133-dd7f95766"
    assert bk.details["torch.version.cuda"] is None
    assert step(report, "backend", "rocm-version").status is Status.PASSED
    assert "ROCm" in step(report, "device", "accelerator").observed
    assert step(report, "device", "arch:0").expected == "gfx942"
    assert step(report, "system", "amdgpu-driver").status is Status.PASSED
    assert report.inventory["torch"]["hip"] == "6.2.41133-dd7f95766"


def test_devices_hidden_by_cuda_visible_devices(tmp_path: Path) -> None:
    facts = load("h100_hidden")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    acc = step(report, "device", "accelerator")
    assert acc.status is Status.FAILED and acc.details["cause"] == "devices-hidden"
    assert 'CUDA_VISIBLE_DEVICES=""' in acc.error
    assert step(report, "system", "nvidia-driver").status is Status.PASSED
    assert report.failed_layers() == ["device"]


def test_capability_not_in_arch_list(tmp_path: Path) -> None:
    facts = load("rtx5090_cu126_arch")
    project(tmp_path, facts, "linux-x86_64-cu126", system="\n[system]\nrequire-accelerator = true\n")
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    arch = step(report, "device", "arch:0")
    assert arch.status is Status.FAILED and arch.details["cause"] == "arch-missing"
    assert "sm_120" in arch.error
    comp = step(report, "device", "compute")
    assert comp.status is Status.SKIPPED and comp.details["cause"] == "arch-missing"


def test_torch_import_crash(tmp_path: Path) -> None:
    facts = load("h100_torch_import_error")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    imp = step(report, "backend", "torch-import")
    assert imp.status is Status.FAILED and imp.details["cause"] == "torch-import-failed"
    assert imp.error.startswith("ImportError: libcudnn.so.9")
    # the build is still known, from torch/version.py
    assert step(report, "backend", "build-kind").details["source"] == "torch/version.py"
    assert statuses(report, "device") == {"accelerator": "skipped", "compute": "skipped"}
    assert "torch did not import" in (step(report, "device", "accelerator").error or "")


def test_missing_package(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    facts["distributions"] = [d for d in facts["distributions"] if d["name"] != "networkx"]
    report = run(tmp_path, facts)
    miss = step(report, "packages", "pin:networkx")
    assert miss.status is Status.FAILED and miss.details["cause"] == "missing"
    broken = step(report, "contract", "torch->networkx")
    assert broken.status is Status.FAILED and "torch 2.6.0+cpu requires networkx" in broken.error
    assert report.failed_layers() == ["packages", "contract"]


def test_edited_file_in_site_packages(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    numpy = next(d for d in facts["distributions"] if d["name"] == "numpy")
    numpy["record_problems"] = [
        {
            "path": "numpy/linalg/_linalg.py",
            "problem": "hash",
            "expected": "sha256=2aY1k1uH4Yq2l7wQk3aV0u4mQ7t1w1Zl8bGm0Yk8f0s",
            "observed": "sha256=Hq9Jb0oW2cUjv9wq7p3Zk1cW1f1j3l3O2q4d6Vv2yQ8",
        }
    ]
    report = run(tmp_path, facts)
    rec = step(report, "packages", "record:numpy")
    assert rec.status is Status.FAILED and rec.details["cause"] == "record-mismatch"
    assert "numpy/linalg/_linalg.py (content differs)" in rec.error
    assert "1 installed file of numpy" in rec.error and " differs from its RECORD" in rec.error
    assert "-m pip install --force-reinstall --no-deps numpy==" in rec.hint
    # the same environment made by uv, without pip: the fix installs with uv
    facts["distributions"] = [d for d in facts["distributions"] if d["name"] != "pip"]
    report = run(tmp_path, facts)
    rec = step(report, "packages", "record:numpy")
    assert rec.hint.startswith("uv pip install --python ") and " --reinstall --no-deps numpy==" in rec.hint


def test_broken_dependency_contract(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    for d in facts["distributions"]:
        if d["name"] == "mpmath":
            d["version"] = "1.4.0"
    project(tmp_path, facts, "linux-x86_64-cpu")  # the lock agrees with what is installed...
    report = run(tmp_path, facts)
    assert step(report, "packages", "pins").status is Status.PASSED
    broken = step(report, "contract", "sympy->mpmath")  # ...but the metadata contract is broken
    assert broken.status is Status.FAILED and broken.details["cause"] == "broken-requirement"
    assert broken.details["required_by"] == "sympy 1.13.1"
    assert "1.4.0 is installed" in broken.error


def test_failed_layers_skip_application_checks(tmp_path: Path) -> None:
    facts = load("h100_hidden")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    text = (
        tmp_path / "repro.toml"
    ).read_text() + '\n[[check]]\nname = "embeddings"\nrun = ["python", "-c", "pass"]\n'
    (tmp_path / "repro.toml").write_text(text)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126")
    app = step(report, "application", "embeddings")
    assert app.status is Status.SKIPPED and "device" in (app.error or "")


def test_missing_lockfile_hint(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    (tmp_path / "requirements-rebuild-linux-x86_64-cpu.txt").unlink()
    report = run(tmp_path, facts)
    lock = step(report, "packages", "lockfile")
    assert lock.status is Status.FAILED and lock.hint == "kernodeck lock --platform linux-x86_64-cpu"


def test_unlocked_extra_is_warning_then_strict_failure(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    extra = dict(
        next(d for d in facts["distributions"] if d["name"] == "filelock"), name="tqdm", version="4.67.1"
    )
    facts["distributions"].append(extra)
    assert step(run(tmp_path, facts), "packages", "unlocked").status is Status.WARNING
    assert step(run(tmp_path, facts, strict=True), "packages", "unlocked").status is Status.FAILED


def test_the_report_says_which_platform_and_why(tmp_path: Path) -> None:
    facts = load("h100_cu126")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    report = run(tmp_path, facts)  # chosen from the facts: os, arch, then the live torch's build
    assert report.platform == "linux-x86_64-cu126"
    assert report.platform_reason is not None
    assert report.platform_reason.startswith(
        "matches this linux x86_64 machine and the live torch (cuda build)"
    )
    assert (
        "pass --platform to choose another: linux-x86_64-cpu, linux-x86_64-rocm6.2" in report.platform_reason
    )
    doc = json.loads(report.to_json())
    assert (doc["platform"], doc["platform_reason"]) == (report.platform, report.platform_reason)
    named = run(tmp_path, facts, platform="linux-x86_64-cu126")
    assert (named.platform, named.platform_reason) == ("linux-x86_64-cu126", "named with --platform")


def test_the_cli_report_shows_the_platform_reason(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    from kernodeck.render.terminal import report_lines

    report = run(tmp_path, facts)
    titles = [line.text for line in report_lines(report, width=200) if line.role == "title"]
    assert titles[0] == (
        "platform: linux-x86_64-cpu (matches this linux x86_64 machine "
        "(pass --platform to choose another: linux-x86_64-cu126, linux-x86_64-rocm6.2))"
    )


def test_platform_matching_errors(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    facts["torch_files"] = {"installed": False}
    facts["platform"]["machine"] = facts["markers"]["platform_machine"] = "aarch64"
    with pytest.raises(UsageError, match="no platform"):
        run(tmp_path, facts)
    with pytest.raises(UsageError, match="no platform 'nope'"):
        run(tmp_path, facts, platform="nope")


def test_only_and_skip(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cpu")
    report = run(tmp_path, facts, only=["system", "contract"])
    assert {s.layer for s in report.steps} == {"system", "contract"}
    report = run(tmp_path, facts, skip=["device", "backend", "packages"])
    assert not {s.layer for s in report.steps} & {"device", "backend", "packages"}
    with pytest.raises(UsageError, match="unknown layer"):
        run(tmp_path, facts, only=["gpu"])


def test_require_raises_with_summary(tmp_path: Path) -> None:
    facts = load("h100_hidden")
    project(tmp_path, facts, "linux-x86_64-cu126", system=GPU_SYSTEM)
    with pytest.raises(CheckFailed) as info:
        require(
            tmp_path / "repro.toml",
            probe=FakeProbe(facts),
            platform="linux-x86_64-cu126",
            cache_dir=tmp_path / "c",
        )
    assert info.value.message.startswith("FAILED:") and "device/accelerator" in info.value.message


def test_json_report_round_trip(tmp_path: Path) -> None:
    facts = load("mi300x_rocm62")
    project(tmp_path, facts, "linux-x86_64-rocm6.2")
    report = run(tmp_path, facts)
    report.write_json(tmp_path / "report.json")
    again = Report.from_json((tmp_path / "report.json").read_text())
    assert again == report
    text = (tmp_path / "report.json").read_text()
    assert "/srv/app" not in json.dumps(again.inventory)
    assert '"schema": "kernodeck-report/1"' in text


@pytest.mark.parametrize("locked", [True, False], ids=["torch-locked", "no-torch-in-the-lock"])
def test_torch_missing_says_whether_the_lock_has_one_to_install(tmp_path: Path, locked: bool) -> None:
    """A GPU platform (backend cu126) whose environment has no torch: install the locked build, or,
    when the lock has none, add torch to the requirements (installing "the locked torch build"
    was a hint nobody could follow)."""
    facts = load("cpu_linux")
    facts["torch"] = {"status": "not-installed", "error": "ModuleNotFoundError: No module named 'torch'"}
    facts["torch_files"] = {"installed": False}
    facts["distributions"] = [d for d in facts["distributions"] if d["name"] != "torch"]
    pins = {"numpy": "2.2.1", **({"torch": "2.6.0+cu126"} if locked else {})}
    project(tmp_path, facts, "linux-x86_64-cu126", pins=pins)
    report = run(tmp_path, facts, platform="linux-x86_64-cu126", only=["backend"])
    imp = step(report, "backend", "torch-import")
    assert imp.status is Status.FAILED and imp.details["cause"] == "torch-missing"
    if locked:
        assert imp.hint == "install the locked torch build"
    else:
        assert imp.hint == (
            "the lock has no torch to install: add torch to [packages] requirements (the platform's "
            "backend picks its build) and run `kernodeck lock`"
        )
