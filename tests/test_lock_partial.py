"""Partial failure: a platform that cannot be locked (unreachable index, no wheel) leaves its old
files byte-identical, the other platforms are still written, exit 1 with one message per failed
platform naming the platform, the index (credentials removed) and the first cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

GPU = {"name": "gpu", "os": "linux", "arch": "x86_64", "backend": "cu126"}
UNREACHABLE = "http://${KD_USER}:${KD_TOKEN}@127.0.0.1:9/whl"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KD_USER", "alice")
    monkeypatch.setenv("KD_TOKEN", "s3cret-token")


def test_unreachable_backend_index_fails_only_its_platform(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = index_factory
    f.add_wheel("app", "1.0")
    f.add_wheel("app", "2.0")
    f.add_wheel("torch", "2.6.0")
    f.add_wheel("torch", "2.6.0+cu126", index="cu126")
    path = write_manifest(
        tmp_path / "proj",
        requirements=["app<2", "torch"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS, GPU],
        pytorch_index=served_index.pytorch_base,
    )
    assert main(["lock", str(path), "-q"]) == 0
    files = {n: path.parent / requirements_filename(n) for n in ("linux", "windows", "gpu")}
    assert pins(files["gpu"].read_text()) == {"app": "1.0", "torch": "2.6.0+cu126"}
    gpu_before = files["gpu"].read_bytes()

    text = path.read_text()
    path.write_text(text.replace('"app<2"', '"app>=2"').replace(served_index.pytorch_base, UNREACHABLE))
    capsys.readouterr()
    assert main(["lock", str(path)]) == 1
    err = capsys.readouterr().err
    assert files["gpu"].read_bytes() == gpu_before
    assert pins(files["linux"].read_text()) == {"app": "2.0", "torch": "2.6.0"}
    assert pins(files["windows"].read_text()) == {"app": "2.0", "torch": "2.6.0"}
    failed = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(failed) == 1
    assert failed[0].startswith("error: cannot lock platform gpu: ")
    assert failed[0].endswith("(index http://127.0.0.1:9/whl/cu126)")
    # why the page could not be read (the connection refused), under the error, and its hint
    lines = err.splitlines()
    at = lines.index(failed[0])
    assert lines[at + 1].startswith("  ConnectError: ") and "refused" in lines[at + 1].lower()
    assert lines[at + 2].startswith("hint: check the network")
    assert "  index: " not in err  # the index is named once, in the error line
    assert "s3cret-token" not in err and "alice" not in err
    assert "wrote requirements-rebuild-linux.txt" in err
    assert "Traceback" not in err


def test_platform_without_a_wheel_fails_alone(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = index_factory
    f.add_wheel("native", "1.0", tags="cp311-cp311-manylinux_2_17_x86_64")
    f.add_wheel("dep", "1.0")
    path = write_manifest(
        tmp_path / "proj",
        requirements=["native", "dep"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
    )
    old_windows = path.parent / requirements_filename("windows")
    old_windows.write_text("# an older lock\ndep==0.1\n")
    before = old_windows.read_bytes()
    result = lock_manifest(path)
    assert not result.ok
    assert [p.platform for p in result.platforms] == ["linux"]
    assert [f.platform for f in result.failed] == ["windows"]
    assert "native" in result.failed[0].cause
    assert result.failed[0].index_url == served_index.url()
    assert old_windows.read_bytes() == before
    assert pins((path.parent / requirements_filename("linux")).read_text()) == {"native": "1.0", "dep": "1.0"}

    capsys.readouterr()
    report = path.parent / "lock.json"
    assert main(["lock", str(path), "-q", "--json", str(report)]) == 1
    err = capsys.readouterr().err
    assert err.count("error: cannot lock platform windows: ") == 1
    # the first error's context follows it: what asked for the project, and the tags it has
    assert "\n  the manifest requires native\n" in err
    assert "\n  its wheels are tagged: cp311-cp311-manylinux_2_17_x86_64\n" in err
    (entry,) = json.loads(report.read_text())["failed"]
    assert entry["platform"] == "windows" and entry["index"] == served_index.url()
    assert entry["context"] == [
        "the manifest requires native",
        "its wheels are tagged: cp311-cp311-manylinux_2_17_x86_64",
    ]
    assert entry["hint"] is None
    assert served_index.url() in err
    assert old_windows.read_bytes() == before
    # --check reports the failure too, and exits 1
    assert main(["lock", str(path), "--check", "-q"]) == 1
    assert "error: cannot lock platform windows: " in capsys.readouterr().err
