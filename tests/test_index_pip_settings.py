"""The locker's pip settings (for the "not used for the lock" notice and pip's built-in default
index) are read from pip in-process for this interpreter, and from a second interpreter with the
same probe: both give the same answer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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
