"""A redirect from an index to another origin never carries the index's credentials: neither an
Authorization header nor user-info. Two loopback servers stand for two hosts: the index on
127.0.0.2 holds the credentials and redirects every request to the other on 127.0.0.1 (another
address and another port: another origin, and another host for ~/.netrc), which serves the real
index."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.lock_project import pins, write_manifest

USER = "kd-user"
TOKEN = "kd-token-5e1f0c9a77"


class Redirector:
    """Answers every request with a redirect to the same path on `target`, recording the headers
    it was sent."""

    def __init__(self, target: str) -> None:
        self.headers_seen: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(302)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
        self._httpd.daemon_threads = True
        self.base = f"http://127.0.0.2:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Redirector, object]]:
    f = IndexFactory(tmp_path / "ix")
    f.add_wheel("foo", "1.0", requires=["bar"])
    f.add_wheel("bar", "1.0")
    with f.serve() as target:
        redirector = Redirector(target.base)
        try:
            yield redirector, target
        finally:
            redirector.close()


@pytest.mark.parametrize("given", ["placeholders", "netrc"])
def test_a_redirect_to_another_origin_carries_no_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: tuple[Redirector, object], given: str
) -> None:
    redirector, target = servers
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    host = redirector.base.removeprefix("http://")
    if given == "placeholders":
        monkeypatch.setenv("KD_IX_USER", USER)
        monkeypatch.setenv("KD_IX_TOKEN", TOKEN)
        url = f"http://${{KD_IX_USER}}:${{KD_IX_TOKEN}}@{host}/default/simple"
    else:
        netrc = tmp_path / "netrc"
        netrc.write_text(f"machine 127.0.0.2 login {USER} password {TOKEN}\n", encoding="utf-8")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
        url = f"{redirector.base}/default/simple"
    proj = tmp_path / "proj"
    m = write_manifest(proj, requirements=["foo"], default_url=url)
    assert main(["lock", str(m)]) == 0
    assert pins((proj / requirements_filename("linux")).read_text()) == {"foo": "1.0", "bar": "1.0"}
    # the index itself was sent the credentials (so they were there to leak) ...
    basic = "Basic " + base64.b64encode(f"{USER}:{TOKEN}".encode()).decode()
    assert redirector.headers_seen and all(h.get("authorization") == basic for h in redirector.headers_seen)
    # ... and the other origin, which served every page and file, never saw them
    seen = target.headers_seen  # type: ignore[attr-defined]
    assert len(seen) >= 2
    for headers in seen:
        assert "authorization" not in headers, headers
        assert not any(TOKEN in v or USER in v for v in headers.values()), headers
    assert not any(TOKEN in path or USER in path for _, path, _ in target.requests)  # type: ignore[attr-defined]
