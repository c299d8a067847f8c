"""`[packages] build-constraints`: the build requirements of allowed sdists constrained when the lock
builds their metadata and when rebuild builds them, with real pip (the venv's own, which takes them
from PIP_CONSTRAINT before 25.3) and real uv, from a local index over loopback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from kernodeck.errors import KernodeckError
from kernodeck.handover.installer_env import Installer
from kernodeck.handover.rebuild import build_constraints_route, rebuild
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from kernodeck.report import Report, Status, Step
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import write_manifest
from tests.fixtures.old_sdist import MISSING, publish_old_sdist

pytest_plugins = ["tests.fixtures.index_fixtures"]


def _manifest(tmp_path: Path, server: Server, constraints: list[str]) -> Path:
    path = write_manifest(
        tmp_path / "proj", requirements=["oldsrc"], default_url=server.url(), allow_sdist=["oldsrc"]
    )
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    if constraints:
        doc["packages"]["build-constraints"] = constraints
    doc["platform"][0]["name"] = "linux-x86_64"
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


def _verify(path: Path, **_: Any) -> Report:
    r = Report(platform="linux-x86_64")
    r.add(Step.passed("interpreter", "python"))
    return r


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"  # a fresh pip and uv cache: nothing built before
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}


def test_lock_with_build_constraints_builds_what_the_newest_build_requirement_breaks(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    publish_old_sdist(index_factory)
    plain = _manifest(tmp_path / "a", served_index, [])
    with pytest.raises(KernodeckError) as e:
        lock_manifest(plain, cache_dir=tmp_path / "cache-a")
    assert any(MISSING in line for line in e.value.context)
    assert e.value.hint and "build-constraints" in e.value.hint
    fixed = _manifest(tmp_path / "b", served_index, ["kd-build-helper<2"])
    result = lock_manifest(fixed, cache_dir=tmp_path / "cache-b")
    assert [p.status for p in result.platforms] == ["written"]
    text = (fixed.parent / requirements_filename("linux-x86_64")).read_text(encoding="utf-8")
    assert "oldsrc==0.4" in text
    # build-constraints are a lock input: dropping them makes the lock stale
    doc = tomlkit.parse(fixed.read_text(encoding="utf-8"))
    del doc["packages"]["build-constraints"]
    fixed.write_text(tomlkit.dumps(doc), encoding="utf-8")
    check = lock_manifest(fixed, cache_dir=tmp_path / "cache-b", check=True)
    assert [p.status for p in check.platforms] != ["unchanged"]


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_rebuild_builds_the_sdist_within_the_build_constraints(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, installer: Installer
) -> None:
    publish_old_sdist(index_factory)
    manifest = _manifest(tmp_path, served_index, ["kd-build-helper<2"])
    lock_manifest(manifest, cache_dir=tmp_path / "cache")
    report = rebuild(
        manifest, dest=tmp_path / "venv", installer=installer, verify=_verify, environ=_env(tmp_path)
    )
    install = next(s for s in report.steps if s.name == "install")
    assert install.status is Status.PASSED, report.summary()
    command = " ".join(install.details["command"])
    if installer == "uv":
        assert "--build-constraints" in command
    elif "PIP_CONSTRAINT" in install.details["environment"]:  # the venv's pip is older than 25.3
        assert "--build-constraint" not in command
    else:
        assert "--build-constraint" in command
    site = next((tmp_path / "venv" / "lib").glob("python3.*/site-packages"))
    assert (site / "oldsrc" / "__init__.py").is_file()


def test_rebuild_without_them_names_what_the_sdist_build_said(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    publish_old_sdist(index_factory)
    manifest = _manifest(tmp_path, served_index, ["kd-build-helper<2"])
    lock_manifest(manifest, cache_dir=tmp_path / "cache")
    # the lock stays; the manifest loses its constraint (as a teammate's copy without it)
    doc = tomlkit.parse(manifest.read_text(encoding="utf-8"))
    del doc["packages"]["build-constraints"]
    manifest.write_text(tomlkit.dumps(doc), encoding="utf-8")
    # the lock is stale now: rebuild refuses it unless told to use it as it is
    refused = rebuild(manifest, dest=tmp_path / "venv", verify=_verify, environ=_env(tmp_path))
    assert [s.status for s in refused.steps if s.name == "lock"] == [Status.FAILED]
    assert not (tmp_path / "venv").exists()
    report = rebuild(
        manifest, dest=tmp_path / "venv", verify=_verify, environ=_env(tmp_path), allow_stale=True
    )
    assert [s.status for s in report.steps if s.name == "lock"] == [Status.WARNING]
    install = next(s for s in report.steps if s.name == "install")
    assert install.status is Status.FAILED
    assert install.error == f"building a source distribution failed: ModuleNotFoundError: {MISSING}"
    assert install.hint and "build-constraints" in install.hint
    assert install.details["cause"] == "build"


@pytest.mark.parametrize(
    ("installer", "pip", "route"),
    [
        ("uv", None, "option"),
        ("pip", "pip 23.2.1 (python 3.11)", "environment"),
        ("pip", "pip 25.2 (python 3.12)", "environment"),
        ("pip", "pip 25.3 (python 3.12)", "option"),
        ("pip", "pip 26.3 (python 3.13)", "option"),
        ("pip", None, "environment"),
    ],
)
def test_build_constraints_route(installer: Installer, pip: str | None, route: str) -> None:
    assert build_constraints_route(installer, pip) == route
