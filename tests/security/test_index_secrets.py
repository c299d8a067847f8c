"""Secrets never reach disk or screen: `${VAR}` placeholders in an index URL's path and query are
expanded only in requests, never in cache file names or contents, lock files or messages; literal
secrets in an index URL's query or a direct URL's user-info are refused without being echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.index.sources import expand
from kernodeck.lockfile.names import requirements_filename
from kernodeck.support.urls import redact, remember_secret
from tests.fixtures.hostile_index import HostileServer
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.lock_project import pins, write_manifest

PATH_TOKEN = "pathTok-7f3a9c21e5"
QUERY_TOKEN = "queryTok-b81d44e0aa"


def _all_bytes(root: Path) -> list[tuple[str, bytes]]:
    return [(str(p), p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()]


def test_placeholders_in_path_and_query_never_expanded_on_disk_or_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = IndexFactory(tmp_path / "ix")
    f.add_wheel("foo", "1.0", requires=["bar"])
    f.add_wheel("bar", "1.0")
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(cache))
    monkeypatch.setenv("KD_PATH_TOKEN", PATH_TOKEN)
    monkeypatch.setenv("KD_QUERY_TOKEN", QUERY_TOKEN)
    for metadata_files in (True, False):
        with HostileServer(f, path_token=PATH_TOKEN, metadata_files=metadata_files) as srv:
            url = f"{srv.base}/s/ok-${{KD_PATH_TOKEN}}/default/simple?token=${{KD_QUERY_TOKEN}}"
            proj = tmp_path / f"proj-{metadata_files}"
            m = write_manifest(proj, requirements=["foo"], default_url=url)
            assert main(["lock", str(m), "--format", "pylock"]) == 0
            assert pins((proj / requirements_filename("linux")).read_text()) == {"foo": "1.0", "bar": "1.0"}
            # the server was really asked with the token (the lock worked through it)
            assert all(p.startswith("/default/") for _, p, _ in srv.requests)
            # a failing lock prints the index URL: placeholders only
            m2 = write_manifest(tmp_path / f"fail-{metadata_files}", requirements=["nosuch"], default_url=url)
            assert main(["lock", str(m2)]) == 1
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "${KD_PATH_TOKEN}" in printed
    for secret in (PATH_TOKEN, QUERY_TOKEN):
        assert secret not in printed
        for root in (cache, tmp_path / "proj-True", tmp_path / "proj-False"):
            for name, data in _all_bytes(root):
                assert secret not in name and secret.encode() not in data, name


def test_redact_removes_userinfo_expanded_values_and_secret_query_params() -> None:
    remember_secret("KD_REDACT_T", "expanded-value-91f2")
    text = (
        "cannot read https://alice:hunter22@h.example/s/expanded-value-91f2/simple"
        "?sig=abc123&page=2&api_key=zz9&token=${OK} here"
    )
    out = redact(text)
    for secret in ("hunter22", "alice", "expanded-value-91f2", "abc123", "zz9"):
        assert secret not in out
    assert "${KD_REDACT_T}" in out and "page=2" in out and "token=${OK}" in out


@pytest.mark.parametrize(
    ("url_or_req", "secret"),
    [
        ("https://h.example/simple?token=litTok0123456789", "litTok0123456789"),
        ("https://h.example/simple?X-Amz-Signature=deadbeefcafe", "deadbeefcafe"),
        ("https://h.example/simple#frag-secret-77", "frag-secret-77"),
        ("foo @ https://user:pw-literal-55@h.example/foo-1.0-py3-none-any.whl", "pw-literal-55"),
    ],
)
def test_validate_refuses_literal_secrets_without_echoing_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url_or_req: str, secret: str
) -> None:
    if " @ " in url_or_req:
        m = write_manifest(tmp_path, requirements=[url_or_req], default_url="https://h.example/simple")
    else:
        m = write_manifest(tmp_path, requirements=["foo"], default_url=url_or_req)
    assert main(["validate", str(m)]) == 2
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert secret not in printed
    assert "placeholder" in printed or "fragment" in printed
    assert "Traceback" not in printed


def test_placeholder_values_go_only_to_their_own_index_host() -> None:
    r = expand("https://good.example/s/${KD_OWN_T}/simple", env={"KD_OWN_T": "own-value-3c9d"})
    assert r.url == "https://good.example/s/own-value-3c9d/simple"
    assert r.public == "https://good.example/s/${KD_OWN_T}/simple"
    assert r.for_request("https://good.example/s/${KD_OWN_T}/files/x.whl") == (
        "https://good.example/s/own-value-3c9d/files/x.whl"
    )
    # a page (evil or not) that links elsewhere with the placeholder gets nothing expanded
    assert r.for_request("https://evil.example/steal/${KD_OWN_T}") is None
    assert r.for_request("http://good.example/s/${KD_OWN_T}/x") is None  # another scheme
    assert "own-value-3c9d" not in repr(r)
