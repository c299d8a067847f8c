"""`kernodeck rebuild` installs the project itself when the lock holds its dependencies
(`[packages] from = ["pyproject.toml"]`, or a requirements file in `from` with `-e .`), editable, as the reference environment a developer made
with `pip install -e .` or `uv sync` has it; a project that cannot be installed so is a warning.
Real lock over a loopback index, real venvs, real pip and uv, real verify of the result; the
project builds with an in-tree PEP 660 backend, so nothing is fetched for it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.handover.rebuild import rebuild
from kernodeck.layers import Layer
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.report import Status
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.project_backend import BACKEND, PYPROJECT

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
ARCH = os.uname().machine


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    f = IndexFactory(tmp_path / "index")
    f.add_wheel("app", "1.0")
    with f.serve() as srv:
        yield srv


def _project(tmp_path: Path, server: Server, backend: str = BACKEND) -> Path:
    project = tmp_path / "trainer"
    (project / "src" / "trainer").mkdir(parents=True)
    (project / "src" / "trainer" / "__init__.py").write_text("ANSWER = 42\n")
    (project / "backend.py").write_text(backend)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "repro.toml").write_text(
        f'schema-version = 1\n[reference]\nname = "trainer"\nid = "1"\n[python]\nversion = "{PY}"\n'
        f'[packages]\nfrom = ["pyproject.toml"]\n[[packages.index]]\nname = "local"\nurl = "{server.url()}"\n'
        f'default = true\n[[platform]]\nname = "linux"\nos = "linux"\narch = "{ARCH}"\n'
    )
    result = lock_manifest(project / "repro.toml", cache_dir=tmp_path / "cache")
    assert result.ok
    return project


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "KERNODECK_CACHE_DIR": str(tmp_path / "cache")}


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_the_project_itself_is_installed_editable(tmp_path: Path, served: Server, installer: str) -> None:
    project = _project(tmp_path, served)
    dest = tmp_path / "rebuilt"
    report = rebuild(project, dest=dest, installer=installer, environ=_env(tmp_path), compute=False)  # type: ignore[arg-type]
    steps = {(Layer(s.layer).value, s.name): s for s in report.steps}
    assert report.ok, report.summary()
    step = steps[("rebuild", "project")]
    assert step.status is Status.PASSED and step.observed == "trainer installed editable"
    assert "--no-deps" in step.details["command"] and "project.txt" in step.details["command"]
    # verify of the rebuilt environment finds the project as the reference had it
    assert steps[("packages", "project:trainer")].status is Status.PASSED
    pth = list((dest / "lib").glob("python*/site-packages/_trainer.pth"))
    assert pth and pth[0].read_text().strip() == str(project / "src")


FAILING = BACKEND.replace(
    "def build_editable(wheel_directory, config_settings=None, metadata_directory=None):\n",
    "def build_editable(wheel_directory, config_settings=None, metadata_directory=None):\n"
    "    raise RuntimeError('Multiple top-level packages discovered in a flat-layout')\n",
)


def test_a_project_that_cannot_be_installed_is_a_warning(tmp_path: Path, served: Server) -> None:
    project = _project(tmp_path, served, FAILING)
    report = rebuild(project, dest=tmp_path / "rebuilt", environ=_env(tmp_path), compute=False)
    step = next(s for s in report.steps if s.name == "project")
    assert step.status is Status.WARNING and not step.required
    # the backend's own error, not pip's `subprocess-exited-with-error` around it
    assert "RuntimeError: Multiple top-level packages discovered in a flat-layout" in (step.error or "")
    assert "the locked dependencies are installed" in (step.hint or "")
    # the rest ran as before: the environment holds every locked dependency
    assert report.exit_code == 0
    assert {s.name: s.status for s in report.steps if s.layer == "rebuild"}["inventory"] is Status.PASSED


def test_a_lock_of_requirements_alone_installs_no_project(tmp_path: Path, served: Server) -> None:
    project = _project(tmp_path, served)
    text = (project / "repro.toml").read_text().replace('from = ["pyproject.toml"]', 'requirements = ["app"]')
    (project / "repro.toml").write_text(text)
    assert lock_manifest(project / "repro.toml", cache_dir=tmp_path / "cache").ok
    report = rebuild(project, dest=tmp_path / "rebuilt", environ=_env(tmp_path), compute=False)
    assert report.ok and "project" not in [s.name for s in report.steps if s.layer == "rebuild"]


def test_a_requirements_file_that_installs_the_project_makes_rebuild_install_it(
    tmp_path: Path, served: Server
) -> None:
    # `pip install -r requirements.txt` with `-e .` in it installs the project itself: so does
    # rebuild when `from` reads that file (the lock holds the project's dependencies through it)
    project = _project(tmp_path, served)
    (project / "requirements.txt").write_text("app\n-e .\n")
    text = (
        (project / "repro.toml")
        .read_text()
        .replace('from = ["pyproject.toml"]', 'from = ["requirements.txt"]')
    )
    (project / "repro.toml").write_text(text)
    assert lock_manifest(project / "repro.toml", cache_dir=tmp_path / "cache").ok
    dest = tmp_path / "rebuilt"
    report = rebuild(project, dest=dest, environ=_env(tmp_path), compute=False)
    steps = {(Layer(s.layer).value, s.name): s for s in report.steps}
    assert report.ok, report.summary()
    assert steps[("rebuild", "project")].observed == "trainer installed editable"
    assert steps[("packages", "project:trainer")].status is Status.PASSED
    # without `-e .` the file installs only its requirements, and so does rebuild
    (project / "requirements.txt").write_text("app\n")
    assert lock_manifest(project / "repro.toml", cache_dir=tmp_path / "cache").ok
    report = rebuild(project, dest=tmp_path / "rebuilt2", environ=_env(tmp_path), compute=False)
    assert report.ok and "project" not in [s.name for s in report.steps if s.layer == "rebuild"]


def test_a_bundle_rebuilds_the_locked_dependencies_and_says_how_to_add_the_project(
    tmp_path: Path, served: Server
) -> None:
    """The hand-over folder holds the code beside Kernodeck's own folders (observed/, _kernodeck/),
    which setuptools would take for packages of a flat-layout project, and its files are checked
    against BUNDLE.sha256: rebuild leaves the project out there, and REBUILD.md says how to add it."""
    import subprocess

    from kernodeck.handover.bundle import write_bundle

    project = _project(tmp_path, served)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "trainer"]):
        subprocess.run([*git, *args], cwd=project, check=True, capture_output=True)
    out = tmp_path / "handover"
    write_bundle(out, manifest=project / "repro.toml")
    md = (out / "REBUILD.md").read_text()
    assert "installs those, not the project itself" in md
    assert "python -m pip install --isolated --no-input --disable-pip-version-check --no-deps -e ." in md
    report = rebuild(out, dest=tmp_path / "rebuilt", environ=_env(tmp_path), compute=False)
    assert report.ok, report.summary()
    assert "project" not in [s.name for s in report.steps if s.layer == "rebuild"]


# The same project described the way Poetry describes it: no [project] table; `kernodeck init`
# copies its dependencies into requirements, and `poetry install` installs the project itself.
POETRY_PYPROJECT = """[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[tool.poetry]
name = "trainer"
version = "0.3"

[tool.poetry.dependencies]
python = ">=3.8"
app = "*"
"""


@pytest.mark.parametrize("package_mode", [True, False])
def test_a_poetry_project_is_installed_as_poetry_install_does(
    tmp_path: Path, served: Server, package_mode: bool
) -> None:
    from kernodeck.cli import main

    project = tmp_path / "trainer"
    (project / "src" / "trainer").mkdir(parents=True)
    (project / "src" / "trainer" / "__init__.py").write_text("ANSWER = 42\n")
    (project / "backend.py").write_text(BACKEND)
    mode = "" if package_mode else "package-mode = false\n"
    (project / "pyproject.toml").write_text(
        POETRY_PYPROJECT.replace("[tool.poetry]\n", f"[tool.poetry]\n{mode}")
    )
    assert main(["init", str(project)]) == 0
    text = (project / "repro.toml").read_text()
    assert 'from = ["pyproject.toml"]' in text  # Poetry's table, read at lock time
    text = text.replace(
        "[packages]\n", f'[packages]\nindex = [{{name = "local", url = "{served.url()}", default = true}}]\n'
    )
    # this machine's torch build, which init notes as the platform's backend, is not the point here
    text = "\n".join(line for line in text.splitlines() if not line.startswith("backend ="))
    (project / "repro.toml").write_text(text)
    assert lock_manifest(project / "repro.toml", cache_dir=tmp_path / "cache").ok
    dest = tmp_path / "rebuilt"
    report = rebuild(project, dest=dest, environ=_env(tmp_path), compute=False)
    assert report.ok, report.summary()
    steps = {(Layer(s.layer).value, s.name): s for s in report.steps}
    if not package_mode:  # a Poetry project that is not a package: nothing to install
        assert ("rebuild", "project") not in steps
        return
    assert steps[("rebuild", "project")].status is Status.PASSED
    assert steps[("packages", "project:trainer")].status is Status.PASSED
