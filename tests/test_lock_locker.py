"""The same bytes on every locker's machine: the files depend on the manifest and the indexes'
contents only, never on the locker's pip configuration, PIP_*/UV_* variables, home folder or cache
location; pip settings that are not used are named once, with how to declare them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernodeck.index.sources import builtin_index_url
from kernodeck.lockfile.names import requirements_filename
from kernodeck.lockfile.read import read_lockfile
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


def _lock(manifest: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "KERNODECK_"))}
    return subprocess.run(
        [sys.executable, "-m", "kernodeck", "lock", str(manifest), "--output-dir", str(out)],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_files_do_not_depend_on_the_lockers_pip_settings(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    f = index_factory
    for ix in ("default", "mirror"):
        f.add_wheel("app", "1.0", requires=["dep"], index=ix)
        f.add_wheel("dep", "1.0", index=ix)
    # what a locker's own index would offer: newer releases, a private package
    f.add_wheel("app", "2.0", requires=["dep"], index="mirror")
    f.add_wheel("dep", "2.0", index="mirror")
    f.add_wheel("private", "1.0", index="mirror")
    links = tmp_path / "links"
    links.mkdir()
    # The manifest declares its index for the projects it uses and no default index: the
    # default written into the file is pip's built-in one, whatever the locker's pip says.
    manifest = write_manifest(
        tmp_path / "proj",
        requirements=["app"],
        indexes=[{"name": "team", "url": served_index.url(), "packages": ["app", "dep"]}],
        platforms=[LINUX, WINDOWS],
    )
    pip_conf = tmp_path / "pip.conf"
    pip_conf.write_text(f"[global]\nextra-index-url = {served_index.url('mirror')}\n", encoding="utf-8")
    for home in ("home1", "home2"):
        (tmp_path / home).mkdir()

    configured = _lock(
        manifest,
        tmp_path / "out1",
        {
            "PIP_CONFIG_FILE": str(pip_conf),
            "PIP_INDEX_URL": served_index.url("mirror"),
            "PIP_EXTRA_INDEX_URL": served_index.url("mirror"),
            "PIP_FIND_LINKS": str(links),
            "UV_INDEX_URL": served_index.url("mirror"),
            "UV_EXTRA_INDEX_URL": served_index.url("mirror"),
            "KERNODECK_CACHE_DIR": str(tmp_path / "cache1"),
            "HOME": str(tmp_path / "home1"),
        },
    )
    assert configured.returncode == 0, configured.stderr
    clean = _lock(
        manifest,
        tmp_path / "out2",
        {
            "PIP_CONFIG_FILE": os.devnull,
            "KERNODECK_CACHE_DIR": str(tmp_path / "cache2"),
            "HOME": str(tmp_path / "home2"),
        },
    )
    assert clean.returncode == 0, clean.stderr

    for platform in ("linux", "windows"):
        name = requirements_filename(platform)
        first = (tmp_path / "out1" / name).read_bytes()
        assert first == (tmp_path / "out2" / name).read_bytes()
        lock = read_lockfile(tmp_path / "out1" / name)
        assert {p.name: p.version for p in lock.pins} == {"app": "1.0", "dep": "1.0"}
        assert f"--index-url {builtin_index_url()}" in lock.options
        assert served_index.url("mirror") not in first.decode()

    notes = [line for line in configured.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, configured.stderr
    note = notes[0]
    for named in (
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_FIND_LINKS",
        "pip config global.extra-index-url",
    ):
        assert named in note
    assert str(links) in note and served_index.url("mirror") in note
    assert "[[packages.index]]" in note
    assert "note: " not in clean.stderr
