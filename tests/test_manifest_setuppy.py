"""`kernodeck init` in a setuptools project that declares its dependencies only in setup.py (read,
never run) or setup.cfg (formats.setuppy)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.formats.setuppy import read_setup
from kernodeck.manifest import load_manifest

# lucidrains/vit-pytorch's setup.py at 1.12.2, shortened
_VIT = """\
from setuptools import setup, find_packages

with open('README.md') as f:
    long_description = f.read()

setup(
  name = 'vit-pytorch',
  packages = find_packages(exclude=['examples']),
  version = '1.12.2',
  install_requires=[
    'einops>=0.7.0',
    'torch>=1.10',
    'torchvision'
  ],
  setup_requires=['pytest-runner'],
  tests_require=['pytest'],
)
"""


def test_a_literal_install_requires_is_copied(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(_VIT)
    deps = read_setup(tmp_path)
    assert deps is not None and deps.file == "setup.py"
    assert deps.requirements == ["einops>=0.7.0", "torch>=1.10", "torchvision"]
    assert deps.notes == []


def test_a_name_bound_list_python_requires_and_extras(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "import setuptools\nREQS = ['numpy>=1.20', 'tqdm']\n"
        "setuptools.setup(name='x', install_requires=REQS, python_requires='>=3.12',\n"
        "    extras_require={'viz': ['matplotlib'], 'dev': ['pytest']})\n"
    )
    deps = read_setup(tmp_path)
    assert deps is not None and deps.requirements == ["numpy>=1.20", "tqdm"] and deps.python == ">=3.12"
    assert deps.notes == [
        "setup.py extras_require (viz, dev): not copied; add what the reproduction installs to requirements"
    ]


def test_a_computed_install_requires_is_named_not_guessed(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n\nsetup(\n    name='x',\n"
        "    install_requires=open('deps.txt').read().splitlines(),\n)\n"
    )
    deps = read_setup(tmp_path)
    assert deps is not None and deps.requirements == []
    assert deps.notes == [
        "setup.py:5: install_requires is computed, not a list Kernodeck can read without running "
        "setup.py: write the dependencies in requirements"
    ]


def test_setup_cfg(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nname = x\n\n[options]\npython_requires = >=3.9\ninstall_requires =\n"
        "    numpy>=1.22  # arrays\n    requests\n\n[options.extras_require]\ntest = pytest\n"
    )
    deps = read_setup(tmp_path)
    assert deps is not None and deps.file == "setup.cfg"
    assert deps.requirements == ["numpy>=1.22", "requests"] and deps.python == ">=3.9"
    assert "setup.cfg [options.extras_require] (test): not copied" in deps.notes[0]


def test_nothing_to_read_is_none(tmp_path: Path) -> None:
    assert read_setup(tmp_path) is None
    (tmp_path / "setup.py").write_text("print('no setup call')\n")
    assert read_setup(tmp_path) is None
    (tmp_path / "setup.py").write_text("def broken(:\n")
    assert read_setup(tmp_path) is None


def test_init_in_a_setup_py_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "setup.py").write_text(_VIT)
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n')
    assert main(["init", str(tmp_path)]) == 0
    assert "note:" not in capsys.readouterr().err  # not "found no dependency list"
    m = load_manifest(tmp_path / "repro.toml")
    assert m.packages.from_ == [] and m.packages.requirements == [
        "einops>=0.7.0",
        "torch>=1.10",
        "torchvision",
    ]
    text = (tmp_path / "repro.toml").read_text()
    assert "copied from setup.py install_requires" in text
    assert "has no [project] table" not in text  # setup.py said what that note only guessed


def test_python_requires_chooses_python_when_this_one_is_outside(tmp_path: Path) -> None:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    other = "3.12" if running != "3.12" else "3.11"
    (tmp_path / "setup.py").write_text(
        f"from setuptools import setup\nsetup(name='x', install_requires=['rich'], python_requires='=={other}.*')\n"
    )
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.python.version == other
    assert f"setup.py python_requires = '=={other}.*'" in (tmp_path / "repro.toml").read_text()


def test_a_requirements_file_wins_over_setup_py(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(_VIT)
    (tmp_path / "requirements.txt").write_text("rich\n")
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.packages.from_ == ["requirements.txt"] and m.packages.requirements == []


def test_a_requirements_file_installing_a_setup_py_project_says_what_to_do(tmp_path: Path) -> None:
    # `-e .` in requirements.txt of a setup.py project: the line cannot be read (setup.py is not
    # run); the file stays in `from` (rich is never lost), init copies setup.py's list and says
    # how to make the line readable, not "fix it"
    (tmp_path / "setup.py").write_text(_VIT)
    (tmp_path / "requirements.txt").write_text("rich\n-e .\n")
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.packages.from_ == ["requirements.txt"] and "einops>=0.7.0" in m.packages.requirements
    text = (tmp_path / "repro.toml").read_text()
    assert (
        "# requirements.txt:2: -e .: the project's dependencies are in setup.py, which Kernodeck "
        "does not run: `validate` and `lock` stop at this line until it is fixed (declare them under "
        "[project] dependencies in pyproject.toml, or list them in a requirements file (or [packages] "
        "requirements) and -e . under [packages] skip)"
    ) in " ".join(line.strip() for line in text.splitlines())
