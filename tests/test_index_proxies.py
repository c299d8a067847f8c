"""`kernodeck.index.proxies.proxy_for` names the proxy a request goes through as httpx picks it
(pip's `proxy` setting, else the *_PROXY variables, lower case first, NO_PROXY), never its
credentials. The lock's messages built on it are tested in test_lock_network.py."""

from __future__ import annotations

import pytest

from kernodeck.handover.installer_env import Setting
from kernodeck.index.proxies import proxy_for

ENV = {"HTTPS_PROXY": "http://alice:pw@proxy.corp:3128", "HTTP_PROXY": "proxy.corp:8080"}


@pytest.mark.parametrize(
    ("url", "no_proxy", "expected"),
    [
        ("https://files.example/simple/x/", "", ("http://***@proxy.corp:3128", "HTTPS_PROXY")),
        ("http://files.example/simple/x/", "", ("http://proxy.corp:8080", "HTTP_PROXY")),
        ("https://files.example/", "*", None),
        ("https://files.example/", "other.example, files.example", None),
        ("https://a.files.example/", "files.example", None),  # a name covers its subdomains
        ("https://files.example/", ".files.example", ("http://***@proxy.corp:3128", "HTTPS_PROXY")),
        ("https://a.files.example/", ".files.example", None),
        ("https://a.files.example/", "*.files.example", None),
        ("https://notfiles.example/", "files.example", ("http://***@proxy.corp:3128", "HTTPS_PROXY")),
        ("https://10.1.2.3:8443/", "10.1.2.3", None),
        ("https://files.example:8443/", "files.example:8443", None),
        ("file:///srv/index/", "", None),
    ],
)
def test_the_variables_are_read_as_httpx_reads_them(
    url: str, no_proxy: str, expected: tuple[str, str] | None
) -> None:
    got = proxy_for(url, None, {**ENV, "NO_PROXY": no_proxy})
    assert (None if got is None else (got.url, got.source)) == expected


def test_lower_case_wins_whatever_the_order() -> None:
    for env in (
        {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:1"},
        {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:1"},
    ):
        got = proxy_for("https://x.example/", None, env)
        assert got is not None and (got.url, got.source) == ("http://lower:1", "https_proxy")


def test_all_proxy_when_no_scheme_variable() -> None:
    got = proxy_for("https://x.example/", None, {"ALL_PROXY": "socks5://s.corp:1080"})
    assert got is not None and (got.url, got.source) == ("socks5://s.corp:1080", "ALL_PROXY")
    assert proxy_for("https://x.example/", None, {}) is None


def test_pips_proxy_setting_wins_and_names_its_file() -> None:
    setting = Setting("bob:pw@proxy.corp:3128", "pip config /etc/pip.conf [global] proxy")
    got = proxy_for("https://x.example/", setting, {**ENV, "NO_PROXY": "*"})
    assert got is not None
    assert got.url == "http://***@proxy.corp:3128" and got.source == setting.source
    assert "pw" not in got.said() and "(set by pip config /etc/pip.conf [global] proxy)" in got.said()
