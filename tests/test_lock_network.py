"""`kernodeck lock` reaches an index the way the user's own pip would: the CA bundle from PIP_CERT,
pip's `cert` setting, REQUESTS_CA_BUNDLE or SSL_CERT_FILE, and the HTTPS_PROXY of the machine —
how the network is reached, never what is written."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.errors import KernodeckError
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.connect_proxy import ConnectProxy
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.test_ca import TestCA

CA_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT")
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


@pytest.fixture
def https_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Server, TestCA]]:
    for name in (*CA_VARIABLES, *PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    ca = TestCA(tmp_path / "ca")
    factory = IndexFactory(tmp_path / "index")
    factory.add_wheel("alpha", "1.0", requires=["beta>=2"])
    factory.add_wheel("beta", "2.0")
    with factory.serve(ssl_context=ca.server_context()) as srv:
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / "repro.toml").write_text(
            'schema-version = 1\n[reference]\nname = "tls"\nid = "1"\n[python]\nversion = "3.11"\n'
            f'[packages]\nrequirements = ["alpha"]\n[[packages.index]]\nname = "corp"\nurl = "{srv.url()}"\n'
            'default = true\n[[platform]]\nname = "here"\nos = "linux"\narch = "x86_64"\n'
        )
        yield proj, srv, ca


def _pins(proj: Path) -> str:
    return (proj / requirements_filename("here")).read_text()


@pytest.mark.parametrize("variable", ["PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"])
def test_the_ca_from_the_environment_is_trusted(
    https_project: tuple[Path, Server, TestCA], variable: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, ca = https_project
    monkeypatch.setenv(variable, str(ca.ca_pem))
    lock_manifest(proj, cache_dir=tmp_path / "cache")
    assert "alpha==1.0" in _pins(proj) and "beta==2.0" in _pins(proj)


def test_the_ca_from_pips_cert_setting_is_trusted(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, ca = https_project
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\ncert = {ca.ca_pem}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    lock_manifest(proj, cache_dir=tmp_path / "cache")
    assert "alpha==1.0" in _pins(proj)


def test_without_the_ca_the_error_says_certificate(
    https_project: tuple[Path, Server, TestCA], tmp_path: Path
) -> None:
    proj, _srv, _ca = https_project
    with pytest.raises(KernodeckError) as err:
        lock_manifest(proj, cache_dir=tmp_path / "cache")
    assert "certificate" in str(err.value).lower() or "certificate" in str(err.value.context).lower()
    assert not (proj / requirements_filename("here")).exists()


def test_the_machines_https_proxy_is_used(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, ca = https_project
    proxy = ConnectProxy()
    try:
        monkeypatch.setenv("PIP_CERT", str(ca.ca_pem))
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        lock_manifest(proj, cache_dir=tmp_path / "cache")
        assert proxy.connects, "the lock did not go through the proxy"
        assert all(c.startswith("127.0.0.1:") for c in proxy.connects)
        assert "alpha==1.0" in _pins(proj)
        assert proxy.url not in _pins(proj)  # how the network is reached is never written
    finally:
        proxy.close()


def test_a_handshake_the_proxy_drops_is_tried_again(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A TLS-inspecting proxy that answers one handshake with an alert ("decode error") does not
    fail the lock: the connection is made again after a pause."""
    proj, _srv, ca = https_project
    with ConnectProxy(refuse_handshakes=1) as proxy:
        monkeypatch.setenv("PIP_CERT", str(ca.ca_pem))
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        lock_manifest(proj, cache_dir=tmp_path / "cache")
        assert proxy.refused == 1 and len(proxy.connects) >= 2
    assert "alpha==1.0" in _pins(proj) and "beta==2.0" in _pins(proj)


def test_a_certificate_that_does_not_verify_is_not_tried_again(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, _ca = https_project
    with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        with pytest.raises(KernodeckError) as err:
            lock_manifest(proj, cache_dir=tmp_path / "cache")
        assert "certificate" in " ".join([str(err.value), *err.value.context]).lower()
        assert len(proxy.connects) == 1  # one handshake: retrying would not make it verify


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _said(err: KernodeckError) -> str:
    return " ".join([str(err), *err.context, err.hint or ""])


def test_a_proxy_that_does_not_answer_is_named_with_its_variable(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The user must learn that the proxy, not the index, did not answer, and which setting named
    it: the password in its URL is never shown."""
    proj, _srv, ca = https_project
    port = _closed_port()
    monkeypatch.setenv("PIP_CERT", str(ca.ca_pem))
    monkeypatch.setenv("https_proxy", f"http://alice:s3cret-pw@127.0.0.1:{port}")
    monkeypatch.setenv("KERNODECK_HTTP_TIMEOUT", "1")
    with pytest.raises(KernodeckError) as err:
        lock_manifest(proj, cache_dir=tmp_path / "cache")
    said = _said(err.value)
    assert f"cannot connect to the proxy http://***@127.0.0.1:{port} (set by https_proxy)" in str(err.value)
    assert "unset https_proxy" in (err.value.hint or "")
    assert "s3cret-pw" not in said and "alice" not in said
    assert not (proj / requirements_filename("here")).exists()


def test_no_proxy_sends_the_index_direct_and_the_error_names_no_proxy(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, ca = https_project
    monkeypatch.setenv("PIP_CERT", str(ca.ca_pem))
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    lock_manifest(proj, cache_dir=tmp_path / "cache")  # the proxy is down, and never asked
    assert "alpha==1.0" in _pins(proj)


def test_pips_proxy_setting_is_named_when_it_does_not_answer(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, ca = https_project
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\ncert = {ca.ca_pem}\nproxy = http://127.0.0.1:{_closed_port()}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("KERNODECK_HTTP_TIMEOUT", "1")
    with pytest.raises(KernodeckError) as err:
        lock_manifest(proj, cache_dir=tmp_path / "cache")
    assert f"(set by pip config {conf} [global] proxy)" in str(err.value)


def test_a_proxy_that_asks_for_credentials_is_asked_once_and_named(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, ca = https_project
    with ConnectProxy(credentials="alice:s3cret-pw") as proxy:
        monkeypatch.setenv("PIP_CERT", str(ca.ca_pem))
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        with pytest.raises(KernodeckError) as err:
            lock_manifest(proj, cache_dir=tmp_path / "cache")
        assert proxy.asked_for_credentials == 1  # asking again without credentials changes nothing
    assert f"the proxy {proxy.url} (set by HTTPS_PROXY) asks for credentials (407)" in str(err.value)
    assert "HTTPS_PROXY (http://USER:PASSWORD@host:port)" in (err.value.hint or "")


def test_proxy_credentials_in_its_url_are_sent_and_never_written(
    https_project: tuple[Path, Server, TestCA], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    proj, _srv, ca = https_project
    with ConnectProxy(credentials="alice:s3cret-pw") as proxy:
        monkeypatch.setenv("PIP_CERT", str(ca.ca_pem))
        monkeypatch.setenv("HTTPS_PROXY", f"http://alice:s3cret-pw@127.0.0.1:{proxy.port}")
        lock_manifest(proj, cache_dir=tmp_path / "cache")
        assert proxy.connects and proxy.asked_for_credentials == 0
    assert "alpha==1.0" in _pins(proj)
    written = [p for p in [*proj.rglob("*"), *(tmp_path / "cache").rglob("*")] if p.is_file()]
    assert written and not any(b"s3cret-pw" in p.read_bytes() for p in written)


def test_a_plain_http_index_behind_a_proxy_asking_for_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over plain HTTP the proxy's 407 is an answer, not a failed tunnel: the same message."""
    for name in (*CA_VARIABLES, *PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    factory = IndexFactory(tmp_path / "index")
    factory.add_wheel("alpha", "1.0")
    with factory.serve() as srv, ConnectProxy(credentials="alice:pw") as proxy:
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / "repro.toml").write_text(
            'schema-version = 1\n[reference]\nname = "p"\nid = "1"\n[python]\nversion = "3.11"\n'
            f'[packages]\nrequirements = ["alpha"]\n[[packages.index]]\nname = "corp"\nurl = "{srv.url()}"\n'
            'default = true\n[[platform]]\nname = "here"\nos = "linux"\narch = "x86_64"\n'
        )
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with pytest.raises(KernodeckError) as err:
            lock_manifest(proj, cache_dir=tmp_path / "cache")
        assert proxy.asked_for_credentials >= 1
    assert f"the proxy {proxy.url} (set by HTTP_PROXY) asks for credentials (407)" in str(err.value)
