"""A missing extra's hint gives the command that reaches the environment Kernodeck runs from: pip for
a venv, `pipx inject` for pipx, `uv tool install --with` (from the same source) for `uv tool`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kernodeck.checks import readers
from kernodeck.interpreters import add_extra_hint, extra_requirements
from kernodeck.support.tomltext import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _declared(extra: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return sorted(project["optional-dependencies"][extra])


@pytest.mark.parametrize("extra", ["checks", "report"])
def test_an_extras_requirements_are_the_ones_pyproject_declares(extra: str) -> None:
    assert sorted(extra_requirements(extra)) == _declared(extra)


def test_a_venv_install_is_told_pip_with_its_own_interpreter(tmp_path: Path) -> None:
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    hint = add_extra_hint("report", prefix=tmp_path)
    assert (
        hint
        == f"add Kernodeck's [report] extra: {tmp_path / 'bin' / 'python'} -m pip install 'matplotlib>=3.8'"
    )


def test_pipx_is_told_pipx_inject(tmp_path: Path) -> None:
    (tmp_path / "pipx_metadata.json").write_text("{}")
    assert add_extra_hint("checks", prefix=tmp_path).endswith(
        "pipx inject kernodeck 'numpy>=1.26' 'safetensors>=0.4'"
    )


def test_uv_tool_is_told_to_reinstall_from_the_source_its_receipt_names(tmp_path: Path) -> None:
    (tmp_path / "uv-receipt.toml").write_text(
        '[tool]\nrequirements = [{ name = "kernodeck", directory = "/src/kernodeck" }]\n'
    )
    hint = add_extra_hint("report", prefix=tmp_path)
    assert hint.endswith("uv tool install --with 'matplotlib>=3.8' /src/kernodeck")
    (tmp_path / "uv-receipt.toml").write_text('[tool]\nrequirements = [{ name = "kernodeck" }]\n')
    assert add_extra_hint("report", prefix=tmp_path).endswith("--with 'matplotlib>=3.8' kernodeck")


def test_uvx_is_told_to_run_with_the_extra(tmp_path: Path) -> None:
    env = tmp_path / "archive-v0" / "abc123"
    env.mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nuv = 0.9.0\n")
    assert "uvx --with 'matplotlib>=3.8' kernodeck" in add_extra_hint("report", prefix=env)


def test_an_npy_output_without_numpy_names_the_checks_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "emb.npy"
    np.save(path, np.zeros((2, 3), dtype=np.float32))
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    result = readers.read_output(path)
    assert isinstance(result, readers.Unreadable)
    assert "needs numpy" in result.reason
    assert (
        f"[checks] extra: {sys.executable} -m pip install 'numpy>=1.26' 'safetensors>=0.4'" in result.reason
    )
