"""`kernodeck init` writes a commented starter that validates, and never overwrites silently."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.manifest import load_manifest
from kernodeck.manifest.init import HostFacts, starter_document, torch_backend
from kernodeck.manifest.sources import read_sources


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "1"\ndependencies = ["numpy>=1.26", "requests==2.32.3; python_version >= \'3.8\'"]\n'
    )
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "first")
    return tmp_path


def test_init_writes_valid_manifest(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(project)]) == 0
    m = load_manifest(project / "repro.toml")
    assert m.code is not None and m.code.revision == _git(project, "rev-parse", "HEAD")
    assert m.code.allow_dirty is False
    assert m.packages.from_ == ["pyproject.toml"] and m.packages.requirements == []  # referred to, not copied
    assert read_sources(m, project / "repro.toml").requirements == (
        "numpy>=1.26",
        'requests==2.32.3; python_version >= "3.8"',
    )
    assert len(m.platform) == 1
    text = (project / "repro.toml").read_text()
    assert "# Reproduction manifest written by `kernodeck init`" in text
    assert "DESIGN.md" not in text


def test_init_refuses_to_overwrite(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "repro.toml").write_text("keep me")
    assert main(["init", str(project)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (project / "repro.toml").read_text() == "keep me"
    assert main(["init", str(project), "--force"]) == 0
    assert "keep me" not in (project / "repro.toml").read_text()


def test_init_dirty_tree_and_requirements_txt(project: Path) -> None:
    (project / "pyproject.toml").unlink()
    (project / "requirements.txt").write_text(
        "# pinned\n--index-url https://example.org/simple\nrich==13.7.1 \\\n    --hash=sha256:abc\nclick>=8\n"
    )
    assert main(["init", str(project)]) == 0
    text = (project / "repro.toml").read_text()
    assert "uncommitted changes" in text
    m = load_manifest(project / "repro.toml")
    assert m.packages.from_ == ["requirements.txt"]
    assert read_sources(m, project / "repro.toml").requirements == ("rich==13.7.1", "click>=8")


def test_init_outside_git(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.code is None
    assert "not a git checkout" in (tmp_path / "repro.toml").read_text()


@pytest.mark.parametrize(
    ("os_name", "version", "backend"),
    [
        ("linux", "2.6.0+cu126", "cu126"),
        ("linux", "2.5.1+rocm6.2", "rocm6.2"),
        ("linux", "2.13.0+cpu", "cpu"),
        ("linux", "2.6.0", None),
        ("macos", "2.6.0", "mps"),
        ("linux", None, None),
    ],
)
def test_torch_backend_from_local_label(os_name: str, version: str | None, backend: str | None) -> None:
    assert torch_backend(os_name, version)[0] == backend


@pytest.mark.parametrize(
    "facts",
    [
        HostFacts("3.12", "cpython", "macos", "arm64", macos="14.5", backend="mps"),
        HostFacts("3.10", "cpython", "windows", "x86_64"),
        HostFacts("3.11", "cpython", "linux", "aarch64", glibc="2.35", backend="cu126"),
    ],
)
def test_starter_for_other_machines_validates(tmp_path: Path, facts: HostFacts) -> None:
    import tomlkit

    from kernodeck.manifest import loads_manifest

    m = loads_manifest(tomlkit.dumps(starter_document(tmp_path, facts=facts, git=None)))
    assert m.platform[0].os == facts.os
    assert m.system.require_accelerator is (facts.backend not in (None, "cpu"))


def test_init_takes_python_and_torch_from_the_projects_venv_not_kernodecks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernodeck installed apart (here: the test's interpreter, whose torch is 2.13.0+cpu) and a
    project whose own .venv holds a CUDA torch: the starter describes the project's environment."""
    import os
    import shutil
    import sys

    from tests.fixtures.index_factory import build_wheel_bytes

    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    proj = tmp_path / "proj"
    proj.mkdir()
    venv = proj / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=240)
    name, data = build_wheel_bytes(
        "torch", "2.5.1+cu121", metadata="Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cu121\n\n"
    )
    (tmp_path / name).write_bytes(data)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--isolated",
            "-q",
            "--no-index",
            str(tmp_path / name),
        ],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        timeout=240,
    )
    assert main(["init", str(proj)]) == 0
    text = (proj / "repro.toml").read_text()
    assert 'backend = "cu121" # torch 2.5.1+cu121 is installed' in text, text
    m = load_manifest(proj / "repro.toml")
    assert m.python.version == f"{sys.version_info.major}.{sys.version_info.minor}"
    # without a project environment, the interpreter running Kernodeck describes it, as before
    (proj / "repro.toml").unlink()
    shutil.rmtree(venv)
    assert main(["init", str(proj)]) == 0
    assert 'backend = "cu121"' not in (proj / "repro.toml").read_text()


def test_without_a_project_environment_the_python_version_fits_requires_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernodeck installed apart on a Python the project does not support, and no project venv
    yet: the starter names the newest Python the project's requires-python allows, and says why."""
    import sys

    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    major, minor = sys.version_info[:2]
    running, below = f"{major}.{minor}", f"{major}.{minor - 1}"
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "1"\nrequires-python = ">=3.8,<{running}"\ndependencies = []\n'
    )
    assert main(["init", str(proj)]) == 0
    text = (proj / "repro.toml").read_text()
    assert (
        f'version = "{below}" # pyproject.toml requires-python <{running},>=3.8; Kernodeck runs on {running}'
        in text
    )
    assert load_manifest(proj / "repro.toml").python.version == below
    # a requires-python the running Python meets changes nothing
    (proj / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "1"\nrequires-python = ">={running}"\n'
    )
    assert main(["init", str(proj), "--force"]) == 0
    assert (
        f'version = "{running}" # pyproject.toml requires-python >={running}: this machine\'s {running} fits'
        in (proj / "repro.toml").read_text()
    )


POETRY_PYPROJECT = (
    '[tool.poetry]\nname = "app"\nversion = "1"\n[tool.poetry.dependencies]\npython = "^3.9"\nrich = "^13"\n'
)


@pytest.mark.parametrize(
    ("files", "note"),
    [
        ({"pyproject.toml": '[build-system]\nrequires = ["setuptools"]\n'}, "has no [project] table"),
        ({}, "found no requirements*.txt, requirements*.in or pyproject.toml [project] table"),
        ({"requirements.txt": "rich\n"}, None),
        ({"pyproject.toml": POETRY_PYPROJECT, "requirements.txt": "rich\n"}, None),
    ],
)
def test_init_says_when_it_finds_no_dependency_list_a_lock_can_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], note: str | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert main(["init", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    m = load_manifest(tmp_path / "repro.toml")
    if note is None:
        assert "note:" not in err and m.packages.from_ == ["requirements.txt"]
        return
    assert "note: " in err and note in err and m.packages.from_ == []
    if "pyproject.toml" in files:  # the reason stays in repro.toml, beside [packages]
        assert note in (tmp_path / "repro.toml").read_text()


def test_a_lock_of_no_requirements_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.lock_project import write_manifest

    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    path = write_manifest(tmp_path, requirements=[], default_url=(tmp_path / "index").as_uri())
    assert main(["lock", str(path), "--offline"]) == 0
    out = capsys.readouterr()
    assert "note: repro.toml lists no requirements" in out.err + out.out
    assert "0 pins" in out.err + out.out


@pytest.mark.parametrize("written", ["3.9\n", "3.9.18\n", "cpython-3.9\n", "# pyenv\n3.9\n"])
def test_init_takes_the_python_of_a_python_version_file(tmp_path: Path, written: str) -> None:
    """pyenv and uv run the project with the Python its `.python-version` names: so does the
    manifest init writes (when no project environment says otherwise)."""
    (tmp_path / "requirements.txt").write_text("rich\n")
    (tmp_path / ".python-version").write_text(written)
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.python.version == "3.9"
    first = next(ln for ln in written.splitlines() if not ln.startswith("#"))
    assert f'version = "3.9" # .python-version: {first}' in (tmp_path / "repro.toml").read_text()


def test_a_python_version_file_that_names_no_cpython_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("rich\n")
    (tmp_path / ".python-version").write_text("pypy3.10\n")
    assert main(["init", str(tmp_path)]) == 0
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert load_manifest(tmp_path / "repro.toml").python.version == running


@pytest.mark.parametrize(
    ("requirements", "backend"),
    [("rich\n", None), ("torch==2.13.0\nrich\n", "cpu")],
)
def test_an_installed_torch_gives_a_backend_only_to_a_project_that_requires_torch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    requirements: str,
    backend: str | None,
) -> None:
    """torch installed where init looks (here: beside Kernodeck, no project environment) says
    which build that environment has; a project whose requirements name no torch gets no backend
    (verify would look for a torch nothing installs), and repro.toml says why."""
    import kernodeck.manifest.init as init

    facts = init.HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
    facts.backend, note = init.torch_backend("linux", "2.13.0+cpu")
    facts.notes.append(note or "")
    monkeypatch.setattr(init, "project_interpreter", lambda directory: None)
    monkeypatch.setattr(
        init, "host_facts", lambda python=None: dataclasses.replace(facts, notes=list(facts.notes))
    )
    (tmp_path / "requirements.txt").write_text(requirements, encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    (platform,) = load_manifest(tmp_path / "repro.toml").platform
    assert platform.backend == backend
    said = "# torch 2.13.0+cpu is installed, but the project requires no torch: no backend"
    assert (said in (tmp_path / "repro.toml").read_text()) is (backend is None)
