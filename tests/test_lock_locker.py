"""The same bytes on every locker's machine: the files depend on the manifest and the indexes'
contents only, never on the locker's pip configuration, PIP_*/UV_* variables, home folder or cache
location; pip settings that are not used are named once, with how to declare them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.index.sources import builtin_index_url
from kernodeck.lock.orchestrate import lock_manifest
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


def test_a_mirror_changes_where_pages_come_from_not_what_is_written(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    f = index_factory
    f.add_wheel("app", "1.0", requires=["dep"])
    f.add_wheel("dep", "1.0")
    for artifact in [*f.artifacts("app"), *f.artifacts("dep")]:
        f.add_file(artifact.path, index="mirror")  # the same files, served elsewhere
    manifest = write_manifest(
        tmp_path / "proj",
        requirements=["app"],
        indexes=[{"name": "team", "url": served_index.url(), "default": True}],
        platforms=[LINUX, WINDOWS],
    )
    direct = lock_manifest(manifest, output_dir=tmp_path / "direct", cache_dir=tmp_path / "c1", fmt="pylock")
    assert direct.ok
    served_index.reset()
    assert (
        main(
            [
                "lock",
                str(manifest),
                "-q",
                "--mirror",
                f"team={served_index.url('mirror')}",
                "--output-dir",
                str(tmp_path / "mirrored"),
                "--cache-dir",
                str(tmp_path / "c2"),
            ]
        )
        == 0
    )
    assert served_index.count(contains="/mirror/") > 0
    assert served_index.count(contains="/default/") == 0
    for platform in ("linux", "windows"):
        name = requirements_filename(platform)
        assert (tmp_path / "direct" / name).read_bytes() == (tmp_path / "mirrored" / name).read_bytes()

    # the same through KERNODECK_MIRRORS; pylock names the declared index too (its wheel URLs are
    # where the files were fetched from when a mirror serves them outside its index URL)
    served_index.reset()
    monkeypatch.setenv("KERNODECK_MIRRORS", f"team={served_index.url('mirror')}")
    env_lock = lock_manifest(manifest, output_dir=tmp_path / "env", cache_dir=tmp_path / "c3", fmt="pylock")
    assert env_lock.ok and served_index.count(contains="/default/") == 0
    pylock = (tmp_path / "env" / "pylock.linux.toml").read_text()
    assert f'index = "{served_index.url()}"' in pylock
    for platform in ("linux", "windows"):
        name = requirements_filename(platform)
        assert (tmp_path / "direct" / name).read_bytes() == (tmp_path / "env" / name).read_bytes()

    capsys.readouterr()
    assert main(["lock", str(manifest), "--mirror", "nosuch=http://127.0.0.1:9/simple"]) == 2
    assert "mirror for unknown index 'nosuch'" in capsys.readouterr().err
