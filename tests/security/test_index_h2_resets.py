"""Load does not break a lock: HTTP/2 stream resets (RST_STREAM) from an overloaded files host are
retried on a fresh HTTP/1.1 connection, and the lock succeeds with the right hashes, even from a host
that resets every HTTP/2 stream five times over."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.h2_index import H2ResetServer
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.lock_project import lock, pins, write_manifest


def test_stream_resets_fall_back_to_http11_and_the_lock_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = IndexFactory(tmp_path / "ix")
    f.add_wheel("foo", "1.0", requires=["bar"])
    f.add_wheel("bar", "1.0")
    ca = tmp_path / "ca.pem"
    with H2ResetServer(f, resets=5, ca_file=ca) as srv:
        for other in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_DIR"):
            monkeypatch.delenv(other, raising=False)  # the machine's own CA settings come first
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("SSL_CERT_FILE", str(ca))
        monkeypatch.setenv("KERNODECK_HTTP2", "1")  # HTTP/2 is opt-in
        m = write_manifest(tmp_path / "proj", requirements=["foo"], default_url=srv.url())
        lock(m, tmp_path / "cache")
        text = (m.parent / requirements_filename("linux")).read_text()
        assert srv.h2_requests > 0  # the client did speak HTTP/2
        assert srv.stream_resets >= 1  # and was reset
        assert srv.h1_requests >= 1  # then went on over HTTP/1.1
    assert pins(text) == {"foo": "1.0", "bar": "1.0"}
    for fn in ("foo-1.0-py3-none-any.whl", "bar-1.0-py3-none-any.whl"):
        assert f.artifact(fn).sha256 in text


def test_http2_is_off_unless_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads sharing one HTTP/2 connection race inside httpcore/h2; the default is a pool of
    HTTP/1.1 connections, so the same server sees no HTTP/2 request and no reset."""
    f = IndexFactory(tmp_path / "ix")
    f.add_wheel("foo", "1.0", requires=["bar"])
    f.add_wheel("bar", "1.0")
    ca = tmp_path / "ca.pem"
    with H2ResetServer(f, resets=5, ca_file=ca) as srv:
        for other in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_DIR", "KERNODECK_HTTP2"):
            monkeypatch.delenv(other, raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("SSL_CERT_FILE", str(ca))
        m = write_manifest(tmp_path / "proj", requirements=["foo"], default_url=srv.url())
        lock(m, tmp_path / "cache")
        text = (m.parent / requirements_filename("linux")).read_text()
        assert srv.h2_requests == 0 and srv.stream_resets == 0
        assert srv.h1_requests >= 1
    assert pins(text) == {"foo": "1.0", "bar": "1.0"}


def test_h2_races_are_told_apart_from_index_errors() -> None:
    from kernodeck.index.transport import _h2_race, _http2_wanted

    assert _h2_race(RuntimeError("deque mutated during iteration"))
    assert _h2_race(KeyError(7))
    assert not _h2_race(ValueError("a bad page"))
    assert not _http2_wanted({})
    assert not _http2_wanted({"KERNODECK_HTTP2": "0"})
