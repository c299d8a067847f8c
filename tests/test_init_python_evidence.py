"""`[python]` from what the project says: `.python-version`, a conda file's `python=`, a Pipfile's
`python_version`, `requires-python`, Poetry's `python`; this machine's Python only when the
project names none. Every choice comes with a comment naming its evidence."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from kernodeck.manifest import load_manifest
from kernodeck.manifest.init import HostFacts, starter_document
from tests.fixtures.adopt_project import write as _write

HOST = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
CONDA = "name: research\nchannels: [pytorch, nvidia]\ndependencies:\n  - python=3.9\n  - pytorch-cuda=11.7\n"
POETRY = (
    '[tool.poetry]\nname = "app"\nversion = "1"\n[tool.poetry.dependencies]\npython = "{}"\nrich = "^13"\n'
)


def _python(directory: Path) -> tuple[str, str]:
    """(version, the comment beside it) of the starter init writes for `directory`."""
    path = directory / "repro.toml"
    text = tomlkit.dumps(starter_document(directory, facts=HOST, git=None))
    path.write_text(text, encoding="utf-8")
    version = load_manifest(path).python.version
    line = next(ln for ln in text.splitlines() if ln.startswith("version = "))
    return version, line.partition(" # ")[2]


def test_a_conda_files_python_is_taken_even_beside_requirement_files(tmp_path: Path) -> None:
    # the research layout of #43: requirement files are the sources, conda.yaml only names the Python
    _write(tmp_path / "requirements.txt", "rich\n")
    _write(tmp_path / "conda.yaml", CONDA)
    version, why = _python(tmp_path)
    assert (version, why) == ("3.9", "conda.yaml: python=3.9")
    text = (tmp_path / "repro.toml").read_text()
    assert "also found conda.yaml" in text and "its python=3.9 gives [python]" in text
    assert load_manifest(tmp_path / "repro.toml").packages.from_ == ["requirements.txt"]


def test_a_python_version_file_comes_before_a_conda_file(tmp_path: Path) -> None:
    _write(tmp_path / "requirements.txt", "rich\n")
    _write(tmp_path / "environment.yml", CONDA)
    _write(tmp_path / ".python-version", "3.10.14\n")
    assert _python(tmp_path) == ("3.10", ".python-version: 3.10.14")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (">=3.8,<3.10", ("3.9", "pyproject.toml requires-python <3.10,>=3.8; Kernodeck runs on 3.11")),
        (">=3.10", ("3.11", "pyproject.toml requires-python >=3.10: this machine's 3.11 fits")),
    ],
)
def test_requires_python_chooses_within_its_range(
    tmp_path: Path, spec: str, expected: tuple[str, str]
) -> None:
    _write(
        tmp_path / "pyproject.toml",
        f'[project]\nname = "p"\nversion = "1"\nrequires-python = "{spec}"\ndependencies = ["rich"]\n',
    )
    assert _python(tmp_path) == expected


def test_poetrys_python_is_taken_even_when_requirement_files_are_the_sources(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", POETRY.format(">=3.8,<3.10"))
    _write(tmp_path / "requirements.txt", "rich\n")
    version, why = _python(tmp_path)
    assert version == "3.9"
    assert why.startswith("pyproject.toml [tool.poetry.dependencies] python = '>=3.8,<3.10'")


def test_a_pipfiles_python_version(tmp_path: Path) -> None:
    _write(tmp_path / "Pipfile", '[packages]\nrich = "*"\n[requires]\npython_version = "3.10"\n')
    assert _python(tmp_path) == ("3.10", "Pipfile [requires] python_version = '3.10'")


def test_the_hosts_python_only_when_the_project_names_none_and_the_comment_says_so(tmp_path: Path) -> None:
    _write(tmp_path / "requirements.txt", "rich\n")
    version, why = _python(tmp_path)
    assert version == "3.11"
    assert why.startswith("this machine's: the project names no Python (.python-version, requires-python")
