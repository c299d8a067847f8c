"""`kernodeck init` on a project that keeps its environment in a conda file (environment.yml):
the PyPI requirements copied, conda's names and version syntax translated, Python taken from it,
and what cannot be a requirement named with where it belongs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.formats.condaenv import read_conda_env
from kernodeck.manifest import load_manifest

# As in CompVis/stable-diffusion: conda packages, a pip: list with VCS and editable lines.
_STABLE_DIFFUSION = """\
name: ldm
channels:
  - pytorch
  - defaults
dependencies:
  - python=3.8.5
  - pip=20.3
  - cudatoolkit=11.3
  - pytorch=1.11.0
  - torchvision=0.12.0
  - numpy=1.19.2
  - pip:
    - albumentations==0.4.3
    - diffusers
    - "test-tube>=0.7.5"  # quoted, with a comment
    - -e git+https://github.com/CompVis/taming-transformers.git@master#egg=taming-transformers
    - -e .
"""

# As `conda env export` writes it: build strings, system libraries, a prefix line after the list.
_EXPORTED = """\
name: base
channels:
  - conda-forge
dependencies:
  - _libgcc_mutex=0.1=conda_forge
  - libstdcxx-ng=13.2.0=hc0a3c3a_7
  - conda-forge::numpy=1.26.4=py311h64a7726_0
  - python=3.11.9=hb806964_0_cpython
  - py-opencv=4.9.0=py311h0ad2e3c_2
  - scipy 1.13.*
  - librosa=0.10.2
  - cuda-python=12.4.0
  - cuda-nvcc=12.4.131
  - pip:
      - -r pip-extra.txt
      - --extra-index-url https://example.invalid/simple
prefix: /home/someone/miniconda3/envs/base
"""


def test_init_copies_a_conda_environments_pypi_requirements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "environment.yaml").write_text(_STABLE_DIFFUSION, encoding="utf-8")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='ldm')\n", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    assert "note:" not in capsys.readouterr().err  # not "found no dependency list"
    m = load_manifest(tmp_path / "repro.toml")
    assert m.python.version == "3.8"
    assert m.packages.from_ == []
    assert m.packages.requirements == [
        "torch==1.11.0.*",
        "torchvision==0.12.0.*",
        "numpy==1.19.2.*",
        "albumentations==0.4.3",
        "diffusers",
        "test-tube>=0.7.5",
        # a VCS install is copied as what it is, so the lock stops at it instead of leaving it out
        "taming-transformers @ git+https://github.com/CompVis/taming-transformers.git@master",
    ]
    text = (tmp_path / "repro.toml").read_text(encoding="utf-8")
    assert 'version = "3.8" # environment.yaml: python=3.8.5' in text
    assert "copied from environment.yaml, a conda environment, which `from` cannot read" in text
    assert (
        'environment.yaml:8: cudatoolkit=11.3: not a requirement (the CUDA runtime, which torch\'s build brings: set backend = "cu113"'
        in text
    )
    assert "environment.yaml:7: pip=20.3: not a requirement" in text
    assert (
        "environment.yaml:16: -e git+https://github.com/CompVis/taming-transformers.git@master#egg=taming-transformers: "
        "copied as 'taming-transformers @ git+https://github.com/CompVis/taming-transformers.git@master', which no "
        "index can lock: `kernodeck validate` and `kernodeck lock` stop at it" in text
    )
    assert "environment.yaml:17: -e .: the project itself: its dependencies are in setup.py" in text


def test_an_exported_environment_and_its_pip_files(tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text(_EXPORTED, encoding="utf-8")
    (tmp_path / "pip-extra.txt").write_text("rich\n", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.packages.from_ == ["pip-extra.txt"]  # read at lock time, as pip would
    # librosa and cuda-python are Python packages, whatever their names start with; cuda-nvcc is not
    assert m.packages.requirements == [
        "numpy==1.26.4",
        "opencv-python==4.9.0",
        "scipy==1.13.*",
        "librosa==0.10.2.*",
        "cuda-python==12.4.0.*",
    ]
    assert m.python.version == "3.11"
    text = (tmp_path / "repro.toml").read_text(encoding="utf-8")
    assert "environment.yml:5: _libgcc_mutex=0.1=conda_forge: not a requirement" in text
    assert "environment.yml:13: cuda-nvcc=12.4.131: not a requirement" in text
    assert "environment.yml:16: --extra-index-url https://example.invalid/simple: a pip option" in text
    assert "/home/someone" not in text


def test_a_project_with_a_requirements_file_names_its_conda_file_only(tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text(_STABLE_DIFFUSION, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("rich\n", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.packages.from_ == ["requirements.txt"] and m.packages.requirements == []
    assert "also found environment.yml (a conda environment" in (tmp_path / "repro.toml").read_text()


@pytest.mark.parametrize(
    ("body", "note"),
    [
        ("dependencies: [numpy, scipy]\n", "`dependencies` is not a block list"),
        ("dependencies:\n  - numpy >=1.2|<1.0\n", "no PEP 508 equivalent"),
    ],
)
def test_what_is_not_read_is_said(tmp_path: Path, body: str, note: str) -> None:
    path = tmp_path / "environment.yml"
    path.write_text(body, encoding="utf-8")
    env = read_conda_env(path, "environment.yml")
    assert env.requirements == [] and any(note in n for n in env.notes), env.notes


@pytest.mark.parametrize(
    ("line", "copied", "note"),
    [
        (
            "pkg @ https://example.invalid/pkg-1.0.tar.gz",
            ["pkg @ https://example.invalid/pkg-1.0.tar.gz"],
            "copied as",
        ),
        (
            "-e git+https://example.invalid/org/tool.git@v1#egg=tool",
            ["tool @ git+https://example.invalid/org/tool.git@v1"],
            "copied as",
        ),
        # a VCS install without a name, and an editable path: named, not copied
        ("-e git+https://example.invalid/org/tool.git@v1", [], "not locked (an editable install)"),
        ("-e ../other", [], "not locked (an editable install)"),
    ],
)
def test_a_pip_line_no_index_can_lock_is_copied_when_it_names_its_project(
    tmp_path: Path, line: str, copied: list[str], note: str
) -> None:
    path = tmp_path / "environment.yml"
    path.write_text(f"dependencies:\n  - numpy=1.26\n  - pip:\n    - {line}\n", encoding="utf-8")
    env = read_conda_env(path, "environment.yml")
    assert env.requirements == ["numpy==1.26.*", *copied]
    assert any(n.startswith(f"environment.yml:4: {line}: {note}") for n in env.notes), env.notes


@pytest.mark.parametrize(
    ("beside", "note"),
    [
        ("pyproject.toml", 'add "pyproject.toml" to `from` to lock its dependencies'),
        ("setup.cfg", "its dependencies are in setup.cfg"),
        (None, "no pyproject.toml, setup.py or setup.cfg beside it: add its dependencies here"),
    ],
)
def test_the_project_itself_is_named_with_where_its_dependencies_really_are(
    tmp_path: Path, beside: str | None, note: str
) -> None:
    if beside is not None:
        (tmp_path / beside).write_text("", encoding="utf-8")
    path = tmp_path / "environment.yml"
    path.write_text("dependencies:\n  - pip:\n    - -e .\n", encoding="utf-8")
    env = read_conda_env(path, "environment.yml")
    assert any(f"-e .: the project itself: {note}" in n for n in env.notes), env.notes
