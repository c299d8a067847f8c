"""A company network where the default index is out of reach and the locker's pip reads a mirror:
the failed lock says how to lock through that mirror, and the command it gives works (the files
still name the declared index). Real loopback indexes: one served, one port with nobody there."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.index.sources import PipSetting, _pip_index_settings
from kernodeck.lock.mirrors import mirror_hint
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple"  # closed again: connections are refused


def test_an_unreachable_default_index_names_the_mirror_pip_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNODECK_HTTP_TIMEOUT", "5")
    factory = IndexFactory(tmp_path / "mirror")
    factory.add_wheel("alpha", "1.0", requires=["beta>=2"])
    factory.add_wheel("beta", "2.0")
    declared = _dead_url()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "m"\nid = "1"\n[python]\nversion = "3.11"\n'
        f'[packages]\nrequirements = ["alpha"]\n[[packages.index]]\nname = "corp"\nurl = "{declared}"\n'
        'default = true\n[[platform]]\nname = "here"\nos = "linux"\narch = "x86_64"\n'
    )
    with factory.serve() as srv:
        # the mirror as pip reads it, with credentials: never printed, never written
        with_credentials = srv.url().replace("http://", "http://ci-bot:s3cret-token@")
        monkeypatch.setenv("PIP_INDEX_URL", with_credentials)
        _pip_index_settings.cache_clear()  # read once per process: this test changes them
        report = tmp_path / "lock.json"
        res = CliRunner().invoke(cli, ["lock", str(proj / "repro.toml"), "--json", str(report)])
        assert res.exit_code == 1, res.output
        assert "Traceback" not in res.output
        # a script reading the JSON learns why nothing was locked
        data = json.loads(report.read_text())
        assert data["ok"] is False and data["error"]["exit_code"] == 1
        assert data["error"]["message"].startswith(f"cannot read the page of 'alpha' from {declared}/alpha/")
        assert '--mirror default="$PIP_INDEX_URL"' in data["error"]["hint"]
        assert f"index: {declared}" in res.output
        hint = next(line for line in res.output.splitlines() if line.startswith("hint:"))
        shown = srv.url().replace("http://", "http://***@")
        assert f"this machine's pip reads {shown} (PIP_INDEX_URL): if that mirrors {declared}" in hint
        assert "s3cret-token" not in res.output and "s3cret-token" not in report.read_text()
        command = re.search(r"`kernodeck lock (--mirror default=\S+)`", hint)
        assert command is not None and command.group(1) == '--mirror default="$PIP_INDEX_URL"'
        assert not (proj / requirements_filename("here")).exists()
        # the command it gives, as the shell expands it
        res = CliRunner().invoke(
            cli, ["lock", str(proj / "repro.toml"), "--mirror", f"default={with_credentials}"]
        )
        assert res.exit_code == 0, res.output
    _pip_index_settings.cache_clear()
    written = (proj / requirements_filename("here")).read_text()
    assert f"--index-url {declared}" in written and srv.url() not in written and "s3cret" not in written
    assert "alpha==1.0" in written and "beta==2.0" in written


def test_the_hint_is_only_for_the_default_index_and_a_pip_that_reads_another() -> None:
    mirror = PipSetting("index-url", "pip config global.index-url", "https://mirror.corp/simple")
    extra = PipSetting("extra-index-url", "PIP_EXTRA_INDEX_URL", "https://extra.corp/simple")
    hint = mirror_hint("https://pypi.example/simple", "https://pypi.example/simple/", [extra, mirror])
    assert hint is not None and "--mirror default=https://mirror.corp/simple`" in hint  # a file's URL as is
    assert mirror_hint("https://other.example/simple", "https://pypi.example/simple", [mirror]) is None
    assert mirror_hint("https://pypi.example/simple", "https://pypi.example/simple", [extra]) is None
