"""The project installed into its own environment (`pip install -e .`, `uv sync`, `poetry install`)
is said once as what it is, not as a stranger in the `unlocked` warning; packages that come with a
PEP 735 dependency group the manifest does not select (uv installs `dev` by default) are named
with that group and the fix. Real wheels, a real PEP 660 editable install by real pip (an in-tree
build backend, so no index is needed), the real probe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernodeck.api import verify
from kernodeck.report import Status, Step
from tests.fixtures.bare_venv import app_project, bare_venv, pip, wheel_folder
from tests.fixtures.project_backend import BACKEND, PYPROJECT

WHEELS = {
    "plotter": ("1.0", []),
    "app": ("1.0", []),
    "testtool": ("2.0", ["toolhelper"]),
    "toolhelper": ("1.0", []),
    "stray": ("1.0", []),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("itself")
    hashes = wheel_folder(root / "wheels", WHEELS)
    project = root / "project"
    (project / "src").mkdir(parents=True)
    (project / "backend.py").write_text(BACKEND)
    (project / "pyproject.toml").write_text(PYPROJECT)
    python = bare_venv(root / "venv")
    # as `uv sync` leaves it: the project editable, its dependency and the dev group installed
    pip(python, "install", "--find-links", str(root / "wheels"), "-e", str(project), "testtool")
    app_project(project, 'from = ["pyproject.toml"]', hashes["app"])
    return project, python


def _packages(project: Path, python: str, cache: Path) -> dict[str, Step]:
    report = verify(project / "repro.toml", python=python, compute=False, cache_dir=cache)
    return {s.name: s for s in report.steps if s.layer == "packages"}


def _packages_with(world: tuple[Path, str], extra: str, cache: Path) -> dict[str, Step]:
    """The packages layer with one more wheel installed for the while."""
    project, python = world
    pip(python, "install", "--find-links", str(project.parent / "wheels"), extra)
    try:
        return _packages(project, python, cache)
    finally:
        pip(python, "uninstall", "-y", extra)


def test_the_project_is_itself_and_a_dev_group_is_named(world: tuple[Path, str], tmp_path: Path) -> None:
    project, python = world
    steps = _packages(project, python, tmp_path / "cache")
    itself = steps["project:trainer"]
    assert itself.status is Status.PASSED
    assert itself.observed == f"trainer 0.3 is this project, installed editable ({project})"
    assert itself.details == {"cause": "the-project-itself", "editable": True}
    unlocked = steps["unlocked"]
    assert unlocked.status is Status.WARNING
    assert unlocked.observed == ["testtool", "toolhelper"]  # the project is not among them
    assert unlocked.details["groups"] == {"dev": ["testtool", "toolhelper"]}
    assert unlocked.hint == (
        'they come with dependency group "dev" of pyproject.toml, which [packages] does not select: '
        'add groups = ["dev"] to [packages] and run `kernodeck lock`, or leave it out of this '
        "environment (`uv sync --no-group dev`)"
    )


def test_an_extra_installed_with_the_project_is_named(world: tuple[Path, str], tmp_path: Path) -> None:
    """`pip install -e .[all]`: plotter comes with the extras "viz" and "all" (which includes viz)."""
    steps = _packages_with(world, "plotter", tmp_path / "cache")
    unlocked = steps["unlocked"]
    assert unlocked.observed == ["plotter", "testtool", "toolhelper"]
    assert unlocked.details["extras"] == {"viz": ["plotter"], "all": ["plotter"]}
    assert unlocked.hint == (
        'they come with dependency group "dev", extra "viz", extra "all" of pyproject.toml, which '
        '[packages] does not select: add groups = ["dev"] and extras = ["viz", "all"] to [packages] '
        "and run `kernodeck lock`, or leave them out of this environment (`uv sync --no-group dev`)"
    )


def test_a_stray_package_beside_a_group_keeps_the_general_hint(
    world: tuple[Path, str], tmp_path: Path
) -> None:
    steps = _packages_with(world, "stray", tmp_path / "cache")
    unlocked = steps["unlocked"]
    assert unlocked.observed == ["stray", "testtool", "toolhelper"]
    assert unlocked.hint is not None
    assert unlocked.hint.startswith('testtool, toolhelper come with dependency group "dev"')
    assert unlocked.hint.endswith(
        "; the others: uninstall them, or add them to [packages] requirements and run "
        f"`kernodeck lock --platform linux-{os.uname().machine}`"
    )


def test_a_project_installed_from_elsewhere_is_not_this_project(tmp_path: Path) -> None:
    from kernodeck.layers.packages import project_distributions
    from kernodeck.probe.facts import Distribution

    def dist(name: str, url: str, dir_info: dict[str, bool] | None) -> Distribution:
        direct = {"url": url, **({"dir_info": dir_info} if dir_info is not None else {"archive_info": {}})}
        return Distribution(name=name, version="1", direct_url=direct)

    here = tmp_path / "repo" / "ml"
    here.mkdir(parents=True)
    found = project_distributions(
        [
            dist("inside", (here / "pkg").as_uri(), {"editable": True}),
            dist("root", (tmp_path / "repo").as_uri(), {}),  # the repository above the manifest
            dist("other", (tmp_path / "elsewhere").as_uri(), {"editable": True}),
            dist("archive", (here / "x.whl").as_uri(), None),
        ],
        here,
    )
    assert [d.name for d in found] == ["inside", "root"]


def test_the_egg_info_an_editable_build_leaves_in_the_project_is_no_second_copy(
    world: tuple[Path, str], tmp_path: Path
) -> None:
    """setuptools' editable build writes `src/<name>.egg-info` into a src-layout project, whose
    `src` the editable install puts on sys.path: that is the project's own build metadata, not a
    second copy of it. Another distribution's copy there still is one."""
    import shutil

    project, python = world
    leftovers = [project / "src" / "trainer.egg-info", project / "src" / "testtool.egg-info"]
    leftovers[0].mkdir()
    (leftovers[0] / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: trainer\nVersion: 0.3\n")
    try:
        steps = _packages(project, python, tmp_path / "cache")
        assert "duplicates" not in steps
        leftovers[1].mkdir()
        (leftovers[1] / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: testtool\nVersion: 1.0\n")
        steps = _packages(project, python, tmp_path / "cache2")
        assert steps["duplicates"].status is Status.WARNING
        assert steps["duplicates"].observed == ["testtool"]
    finally:
        for leftover in leftovers:
            shutil.rmtree(leftover, ignore_errors=True)
