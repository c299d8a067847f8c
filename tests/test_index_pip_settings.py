"""The locker's pip settings (for the "not used for the lock" notice and pip's built-in default
index) are read without importing pip for this interpreter, and with pip itself from a second
interpreter: both give the same answer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.errors import IndexError_
from kernodeck.index import sources
from kernodeck.index.sources import _pip_index_settings, locker_pip_settings


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    _pip_index_settings.cache_clear()
    yield
    _pip_index_settings.cache_clear()


def _conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nextra-index-url = http://127.0.0.1:9/extra/simple\n[install]\nfind-links = /srv/wheels\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "http://user:secret@127.0.0.1:9/env/simple")


def test_this_interpreter_is_read_without_starting_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _conf(tmp_path, monkeypatch)

    def no_subprocess(*a: object, **k: object) -> None:
        raise AssertionError("a subprocess was started")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    found = {(s.name, s.where, s.value) for s in locker_pip_settings()}
    assert (
        "extra-index-url",
        "pip config global.extra-index-url",
        "http://127.0.0.1:9/extra/simple",
    ) in found
    assert ("find-links", "pip config install.find-links", "/srv/wheels") in found
    env = [s for s in locker_pip_settings() if s.where == "PIP_EXTRA_INDEX_URL"]
    assert env and "secret" not in env[0].value  # credentials never reach a notice
    default = sources.builtin_index_url()
    assert default.startswith("https://") and default.rstrip("/").endswith("/simple")


def test_another_interpreter_gives_the_same_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _conf(tmp_path, monkeypatch)
    here = _pip_index_settings(sys.executable)
    _pip_index_settings.cache_clear()
    other = sources._pip_probe_subprocess(sys.executable)  # the same probe, in a second Python
    assert other == here
    assert here["settings"]["extra-index-url"]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("env_file", ["none", "existing", "missing", "devnull"])
def test_files_are_read_as_pip_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env_file: str
) -> None:
    """The reading without pip (this interpreter) against pip's own `Configuration` (a second
    interpreter): global files from XDG_CONFIG_DIRS, both user files, PIP_CONFIG_FILE in each of
    its states, [global]/[install]/[download] sections, keys spelt with '_' and capitals, and the
    PIP_* variables."""
    home = tmp_path / "home"
    _write(home / ".pip" / "pip.conf", "[global]\nindex-url = http://127.0.0.1:9/legacy/simple\n")
    _write(
        home / "xdg" / "pip" / "pip.conf",
        "[global]\nindex_url = http://127.0.0.1:9/user/simple\n"
        "[install]\nExtra_Index_URL = http://127.0.0.1:9/a/simple\n    http://127.0.0.1:9/b/simple\n",
    )
    system = [tmp_path / "sys1", tmp_path / "sys2"]
    _write(
        system[0] / "pip" / "pip.conf", "[download]\nfind-links = /srv/one\n[global]\nfind-links = /srv/g\n"
    )
    _write(system[1] / "pip" / "pip.conf", "[download]\nfind-links = /srv/two\n")
    env_conf = tmp_path / "env.conf"
    _write(env_conf, "[install]\nindex-url = http://127.0.0.1:9/env-file/simple\n")
    for name in [n for n in list(__import__("os").environ) if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", f"{system[0]}:{system[1]}")
    monkeypatch.setenv("PIP_FIND_LINKS", "/srv/env")
    where = {"existing": str(env_conf), "missing": str(tmp_path / "absent.conf"), "devnull": "/dev/null"}
    if env_file in where:
        monkeypatch.setenv("PIP_CONFIG_FILE", where[env_file])

    here = _pip_index_settings(sys.executable)
    other = sources._pip_probe_subprocess(sys.executable)  # pip's own reading
    assert other.get("settings") and other.get("default")  # the probe really ran
    assert here == other
    if env_file == "devnull":
        assert here["settings"] == {"find-links": [["PIP_FIND_LINKS", "/srv/env"]]}
    if env_file == "existing":
        assert here["config"] == "http://127.0.0.1:9/env-file/simple"  # user files not read
    if env_file == "none":
        assert here["config"] == "http://127.0.0.1:9/user/simple"  # the XDG file over the legacy one


def test_builtin_default_is_pips_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from pip._internal.models.index import PyPI

    assert sources._pip_builtin_default() == PyPI.simple_url
    monkeypatch.setattr(sources, "_pip_builtin_default", lambda: None)  # an unknown pip layout
    _pip_index_settings.cache_clear()
    assert _pip_index_settings(sys.executable)["default"] == PyPI.simple_url  # pip itself asked


def test_kernodeck_brings_pip_so_a_tool_install_knows_the_default_index(tmp_path: Path) -> None:
    """`uv tool install kernodeck` and pipx make an environment with only the dependencies: pip
    must be one of them, or `kernodeck lock` cannot tell pip's built-in default there."""
    import importlib.metadata

    from packaging.requirements import Requirement

    needs = [Requirement(r) for r in importlib.metadata.requires("kernodeck") or []]
    assert [r for r in needs if r.name == "pip" and r.marker is None]
    # what happens without it: an interpreter with no pip gets a located hint, not a traceback
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = str(tmp_path / "bare" / "bin" / "python")
    with pytest.raises(IndexError_) as e:
        sources.builtin_index_url(python=bare)
    assert e.value.message == f"cannot tell pip's built-in default index: pip is not importable by {bare}"
