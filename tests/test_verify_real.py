"""Real runs: a fresh venv with tiny local wheels, verified with --python pointing at it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernodeck.api import verify
from kernodeck.report import Report, Status
from tests.fixtures.index_factory import build_wheel_bytes

pytestmark = pytest.mark.slow

WHEELS = {
    ("alpha", "1.0"): ["beta>=1.0", "gamma"],
    ("beta", "1.0"): [],
    ("beta", "0.9"): [],
    ("gamma", "1.0"): [],
}


def _metadata(name: str, version: str, requires: list[str]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        *(f"Requires-Dist: {r}" for r in requires),
    ]
    return "\n".join(lines) + "\n\n"


def _pip(python: Path, *args: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            *args,
            "--isolated",
            "--disable-pip-version-check",
            "-q",
        ],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("real")
    wheels = root / "wheels"
    wheels.mkdir()
    hashes: dict[tuple[str, str], str] = {}
    for (name, version), requires in WHEELS.items():
        filename, data = build_wheel_bytes(name, version, metadata=_metadata(name, version, requires))
        (wheels / filename).write_bytes(data)
        hashes[(name, version)] = hashlib.sha256(data).hexdigest()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    _pip(
        python, "install", "--no-index", "--find-links", str(wheels), "alpha==1.0", "beta==1.0", "gamma==1.0"
    )
    project = root / "project"
    project.mkdir()
    (project / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "real"\nid = "1"\n[python]\n'
        f'version = "{sys.version_info.major}.{sys.version_info.minor}"\n'
        '[packages]\nrequirements = ["alpha"]\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    lines = ["# platform: linux-x86_64", "--only-binary :all:", ""]
    for name in ("alpha", "beta", "gamma"):
        lines += [f"{name}==1.0 \\", f"    --hash=sha256:{hashes[(name, '1.0')]}", "    # via -r repro.toml"]
    (project / "requirements-rebuild-linux-x86_64.txt").write_text("\n".join(lines) + "\n")
    os.environ["KERNODECK_CACHE_DIR"] = str(root / "cache")
    yield python, project
    os.environ.pop("KERNODECK_CACHE_DIR", None)


def _verify(python: Path, project: Path, **kw: Any) -> Report:
    return verify(project / "repro.toml", python=python, compute=False, **kw)


def _wheels(python: Path) -> str:
    return str(python.parent.parent.parent / "wheels")


@pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64", reason="the manifest declares linux x86_64"
)
def test_fresh_venv_passes_then_breaks_on_the_right_step(env: tuple[Path, Path]) -> None:
    python, project = env
    report = _verify(python, project)
    assert report.ok, report.summary()
    assert report.platform == "linux-x86_64"
    assert {d["name"] for d in report.inventory["distributions"]} == {"alpha", "beta", "gamma"}
    assert all(d["installer"] == "pip" for d in report.inventory["distributions"])
    assert "files of 3 distributions match" in next(s for s in report.steps if s.name == "records").observed

    # 1. edit one installed file
    site = next((python.parent.parent / "lib").glob("python3*/site-packages"))
    target = site / "gamma" / "__init__.py"
    original = target.read_bytes()
    target.write_bytes(original + b"# edited\n")
    try:
        report = _verify(python, project)
        rec = next(s for s in report.steps if s.name == "record:gamma")
        assert rec.status is Status.FAILED and rec.details["cause"] == "record-mismatch"
        assert "gamma/__init__.py (size differs)" in (rec.error or "")
        assert report.failed_layers() == ["packages"]
    finally:
        target.write_bytes(original)
    assert _verify(python, project).ok

    # 2. uninstall one dependency
    _pip(python, "uninstall", "-y", "beta")
    report = _verify(python, project)
    assert next(s for s in report.steps if s.name == "pin:beta").details["cause"] == "missing"
    assert next(s for s in report.steps if s.name == "alpha->beta").status is Status.FAILED
    assert report.failed_layers() == ["packages", "contract"]

    # 3. a wrong version
    _pip(python, "install", "--no-index", "--find-links", _wheels(python), "beta==0.9")
    report = _verify(python, project)
    wrong = next(s for s in report.steps if s.name == "pin:beta")
    assert wrong.details["cause"] == "wrong-version" and wrong.observed == "0.9"
    contract = next(s for s in report.steps if s.name == "alpha->beta")
    assert "alpha 1.0 requires beta>=1.0, but beta 0.9 is installed" in (contract.error or "")

    _pip(python, "install", "--no-index", "--find-links", _wheels(python), "beta==1.0")
    assert _verify(python, project).ok


@pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64", reason="the manifest declares linux x86_64"
)
def test_cli_exit_codes_and_json(env: tuple[Path, Path], tmp_path: Path) -> None:
    python, project = env
    out = tmp_path / "report.json"
    cli = [
        sys.executable,
        "-m",
        "kernodeck",
        "verify",
        str(project / "repro.toml"),
        "--python",
        str(python),
        "--no-compute",
    ]
    p = subprocess.run([*cli, "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().splitlines()[-1].startswith("OK:")
    data = json.loads(out.read_text())
    assert data["schema"] == "kernodeck-report/1" and data["platform"] == "linux-x86_64"
    p = subprocess.run([*cli, "--json", "-", "--only", "contract"], capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["steps"][0]["layer"] == "contract"
    p = subprocess.run([*cli, "--only", "gpu"], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown layer 'gpu'" in p.stderr
    p = subprocess.run(
        [*cli[:5], "--python", str(tmp_path / "nope" / "python")], capture_output=True, text=True
    )
    assert p.returncode == 2 and "no interpreter" in p.stderr
    p = subprocess.run([*cli, "--platform", "linux-aarch64"], capture_output=True, text=True)
    assert p.returncode == 2
    p = subprocess.run(
        [sys.executable, "-m", "kernodeck", "doctor", "--python", str(python), "--json", "-"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["kind"] == "doctor"
