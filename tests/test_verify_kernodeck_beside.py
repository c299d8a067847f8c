"""Kernodeck installed into the project's environment (scripts call kernodeck.require()): it and
the distributions it requires that the lock does not name are said once as what they are, not
as strangers in the `unlocked` warning; a stray package still is one. Real wheels, a real venv,
real pip, the real probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.api import verify
from kernodeck.report import Status
from tests.fixtures.bare_venv import app_project, bare_venv, pip, wheel_folder

WHEELS = {
    "app": ("1.0", []),
    # what a Kernodeck brings: a dependency with an extra that brings one more
    "kernodeck": ("0.1.0", ["helper[fast]>=1", "app"]),
    "helper": ("1.0", ['speedup>=1; extra == "fast"']),
    "speedup": ("1.0", []),
    "stray": ("1.0", []),
}


def _meta(name: str, version: str, requires: list[str]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    if name == "helper":
        lines.append("Provides-Extra: fast")
    return "\n".join(lines) + "\n\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("beside")
    hashes = wheel_folder(root / "wheels", WHEELS, _meta)
    python = bare_venv(root / "venv")
    pip(python, "install", "--find-links", str(root / "wheels"), "kernodeck", "stray")
    project = root / "project"
    project.mkdir()
    app_project(project, 'requirements = ["app"]', hashes["app"])
    return project, python


def test_kernodeck_and_what_it_brings_are_said_once_a_stray_package_still_warns(
    world: tuple[Path, str], tmp_path: Path
) -> None:
    project, python = world
    report = verify(project / "repro.toml", python=python, compute=False, cache_dir=tmp_path / "cache")
    steps = {s.name: s for s in report.steps if s.layer == "packages"}
    own = steps["kernodeck"]
    assert own.status is Status.PASSED
    assert own.details["distributions"] == ["helper", "speedup"]  # app is locked: the project's
    assert own.observed == (
        "kernodeck 0.1.0 is installed beside them, with the 2 distributions it requires that the lock does not name"
    )
    extra = steps["unlocked"]
    assert extra.status is Status.WARNING and extra.observed == ["stray"]
    assert steps["pins"].status is Status.PASSED


def test_a_locked_kernodeck_is_one_of_the_projects_packages(world: tuple[Path, str], tmp_path: Path) -> None:
    project, python = world
    lock = next(project.glob("requirements-rebuild-*.txt"))
    text = lock.read_text()
    try:
        lock.write_text(text + "kernodeck==0.1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
        report = verify(project / "repro.toml", python=python, compute=False, cache_dir=tmp_path / "cache")
    finally:
        lock.write_text(text)
    names = {s.name for s in report.steps if s.layer == "packages"}
    assert "kernodeck" not in names
    unlocked = next(s for s in report.steps if s.name == "unlocked")
    assert unlocked.observed == ["helper", "speedup", "stray"]
