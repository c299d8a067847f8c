"""Bytecode an installer compiled over the bytecode a wheel shipped (numpy 2.1's wheels ship
`numpy/distutils/__pycache__/conv_template.cpython-311.pyc`): real pip lists the file twice in
RECORD, with the wheel's hash and without one; real uv `--compile-bytecode` keeps the wheel's
hash only. Either way the file on disk is what the interpreter compiles from the source beside
it, and the RECORD check accepts it; bytecode with other code, or a header for another source,
is still a problem. Real wheels, real installers, the real probe in the target venv."""

from __future__ import annotations

import importlib.util
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from kernodeck.fingerprint import FingerprintCache
from kernodeck.probe.runner import ProbeRequest, RealProbe
from kernodeck.probe.script import recompiled_pyc
from tests.fixtures.index_factory import build_wheel_bytes

TAG = sys.implementation.cache_tag  # e.g. cpython-311
SOURCE = b"def render(x):\n    return f'<{x}>'\n\nLIMIT = 3\n"
PYC = f"shipspyc/__pycache__/tmpl.{TAG}.pyc"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    meta = "Metadata-Version: 2.1\nName: shipspyc\nVersion: 1.0\n\n"
    # the build machine's bytecode: compiled at another path, so not the bytes an install makes
    shipped = (
        importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(compile(SOURCE, "/build/tmpl.py", "exec"))
    )
    name, data = build_wheel_bytes(
        "shipspyc", "1.0", metadata=meta, files={"shipspyc/tmpl.py": SOURCE, PYC: shipped}
    )
    (folder / name).write_bytes(data)
    return folder


def _venv(path: Path, *, pip: bool) -> str:
    args = [sys.executable, "-m", "venv", str(path)] + ([] if pip else ["--without-pip"])
    subprocess.run(args, check=True, timeout=240)
    return str(path / "bin" / "python")


def _install(installer: str, tmp_path: Path, wheels: Path) -> tuple[str, Path]:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    if installer == "pip":
        python = _venv(tmp_path / "venv", pip=False)
        cmd = [sys.executable, "-m", "pip", "--python", python, "install", "--isolated", "-q"]
        cmd += ["--no-index", "--find-links", str(wheels), "shipspyc"]
    else:
        python = _venv(tmp_path / "venv", pip=False)
        uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
        cmd = [uv, "pip", "install", "--python", python, "--no-config", "--compile-bytecode", "-q"]
        cmd += ["--no-index", "--find-links", str(wheels), "shipspyc"]
        env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    subprocess.run(cmd, check=True, env=env, timeout=240)
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return python, Path(site)


def _problems(python: str) -> list[tuple[str, str]]:
    facts = RealProbe(python, cache=FingerprintCache.open(enabled=False)).collect(ProbeRequest(torch=False))
    dist = facts.dists()[canonicalize_name("shipspyc")]
    return [(p.path, p.problem) for p in dist.record_problems]


@pytest.mark.parametrize("installer", ["pip", "uv --compile-bytecode"])
def test_bytecode_compiled_over_the_shipped_one_is_accepted(
    installer: str, tmp_path: Path, wheels: Path
) -> None:
    python, site = _install(installer, tmp_path, wheels)
    record = next(site.glob("shipspyc-1.0.dist-info")) / "RECORD"
    rows = [line for line in record.read_text().splitlines() if line.startswith(PYC + ",")]
    # how each installer really leaves it
    assert len(rows) == (2 if installer == "pip" else 1) and any(",sha256=" in r for r in rows), rows
    on_disk = (site / PYC).read_bytes()
    assert on_disk[16:] != marshal.dumps(compile(SOURCE, "/build/tmpl.py", "exec"))  # not the shipped bytes
    assert _problems(python) == []

    # other code under the same valid header: refused
    other = compile(SOURCE.replace(b"<{x}>", b"[{x}]"), str(site / "shipspyc" / "tmpl.py"), "exec")
    (site / PYC).write_bytes(on_disk[:16] + marshal.dumps(other))
    assert not recompiled_pyc(str(site / PYC))
    assert _problems(python) in ([(PYC, "hash")], [(PYC, "size")])
    # the source's own bytecode, with a header for another version of the source: refused too
    stale = bytearray(on_disk)
    stale[12:16] = (len(SOURCE) + 1).to_bytes(4, "little")
    (site / PYC).write_bytes(bytes(stale))
    assert not recompiled_pyc(str(site / PYC))
    (site / PYC).write_bytes(on_disk)
    assert recompiled_pyc(str(site / PYC))
    # an edited source is its own row's problem, and its old bytecode is no longer its bytecode
    (site / "shipspyc" / "tmpl.py").write_bytes(SOURCE + b"# edited\n")
    assert ("shipspyc/tmpl.py", "size") in _problems(python)
    assert not recompiled_pyc(str(site / PYC))
