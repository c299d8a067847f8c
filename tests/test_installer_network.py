"""Installer runs in the field: network settings carried over, the real cause of a failure.

Real pip and uv against a loopback index served over HTTPS with a certificate from a test CA
(`tests/fixtures/test_ca.py`), and a loopback CONNECT proxy (`tests/fixtures/connect_proxy.py`);
unit tests of the environment filter and of the cause picker on outputs recorded from pip 23.2 and
uv 0.13 (ports and temporary folders normalised).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.handover.installer_env import (
    ISOLATION,
    Setting,
    installer_environment,
    network_settings,
    pip_config_files,
    read_pip_config,
)
from kernodeck.handover.installer_errors import installer_cause
from kernodeck.handover.rebuild import progress_line, rebuild
from kernodeck.report import Report, Status, Step
from tests.fixtures.connect_proxy import ConnectProxy
from tests.fixtures.fresh_lock import stamp_lock
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.test_ca import TestCA

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SRC = str(Path(__file__).resolve().parents[1] / "src")

# --- the environment filter --------------------------------------------------------------------


def _yes(_: str) -> bool:
    return True


def test_the_filter_drops_what_changes_the_install_and_keeps_network_reach() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/h",
        "PIP_INDEX_URL": "http://mirror/simple",
        "PIP_EXTRA_INDEX_URL": "http://other/simple",
        "PIP_FIND_LINKS": "/opt/wheels",
        "PIP_CONSTRAINT": "c.txt",
        "PIP_NO_BINARY": ":all:",
        "PIP_USER": "1",
        "UV_INDEX_URL": "http://mirror/simple",
        "UV_EXTRA_INDEX_URL": "http://other/simple",
        "UV_FIND_LINKS": "/opt/wheels",
        "PIP_SOMETHING_NEW": "x",
        "PYTHONPATH": "/src",
        "SECRET_TOKEN": "s3cr3t",
        "CORP_TOKEN": "t",
        "HTTPS_PROXY": "http://proxy:3128",
        "no_proxy": "localhost",
        "SSL_CERT_DIR": "/",
    }
    ienv = installer_environment(
        environ, ["CORP_TOKEN", "PIP_INDEX_URL"], settings=network_settings(environ, pip_config={})
    )
    assert ienv.env == {
        "PATH": "/bin",
        "HOME": "/h",
        "CORP_TOKEN": "t",
        "HTTPS_PROXY": "http://proxy:3128",
        "no_proxy": "localhost",
        "SSL_CERT_DIR": "/",
        **ISOLATION,
    }
    # a manifest naming an install-changing variable as a credential does not get it through
    assert "PIP_INDEX_URL" in ienv.dropped and "SECRET_TOKEN" not in ienv.dropped
    assert {"PIP_FIND_LINKS", "PIP_CONSTRAINT", "UV_INDEX_URL", "PIP_SOMETHING_NEW", "PYTHONPATH"} <= set(
        ienv.dropped
    )
    # SSL_CERT_DIR is the only CA given: pip takes a folder too; pip's patience is bounded by default
    assert ienv.pip_args == ["--cert", "/", "--timeout", "15", "--retries", "1"]


def test_ca_bundle_precedence_and_translation_for_each_installer() -> None:
    environ = {
        "SSL_CERT_FILE": "/ssl.pem",
        "REQUESTS_CA_BUNDLE": "/requests.pem",
        "PIP_CLIENT_CERT": "/client.pem",
        "PIP_TRUSTED_HOST": "a.example  b.example",
        "PIP_DEFAULT_TIMEOUT": "180",
    }
    config = {
        "cert": Setting("/config.pem", "pip config x [global] cert"),
        "proxy": Setting("http://u:pw@proxy:8080", "pip config x [install] proxy"),
    }
    net = network_settings(environ, pip_config=config, exists=_yes)
    assert net.ca == config["cert"]  # pip's own setting first
    assert net.describe() == {
        "ca": "pip config x [global] cert",
        "client-cert": "PIP_CLIENT_CERT",
        "trusted-host": "PIP_TRUSTED_HOST",
        "proxy": "pip config x [install] proxy",
        "timeout": "PIP_DEFAULT_TIMEOUT",
    }
    pip = installer_environment(environ, settings=net, installer="pip")
    assert pip.pip_args == [
        "--cert",
        "/config.pem",
        "--client-cert",
        "/client.pem",
        "--trusted-host",
        "a.example",
        "--trusted-host",
        "b.example",
        "--proxy",
        "http://u:pw@proxy:8080",
        "--timeout",
        "180",
        "--retries",
        "1",
    ]
    uv = installer_environment(environ, settings=net, installer="uv")
    assert uv.args("uv") == []
    assert uv.env["SSL_CERT_FILE"] == "/config.pem" and uv.env["SSL_CLIENT_CERT"] == "/client.pem"
    assert uv.env["UV_INSECURE_HOST"] == "a.example b.example"
    assert uv.env["HTTPS_PROXY"] == uv.env["HTTP_PROXY"] == "http://u:pw@proxy:8080"
    # PIP_CERT beats the configuration; without either, REQUESTS_CA_BUNDLE beats SSL_CERT_FILE
    assert network_settings({"PIP_CERT": "/env.pem"}, pip_config=config, exists=_yes).ca == Setting(
        "/env.pem", "PIP_CERT"
    )
    assert network_settings(environ, pip_config={}, exists=_yes).ca == Setting(
        "/requests.pem", "REQUESTS_CA_BUNDLE"
    )
    # a CA path that does not exist is skipped, and said so
    net = network_settings(environ, pip_config={}, exists=lambda p: p == "/ssl.pem")
    assert net.ca == Setting("/ssl.pem", "SSL_CERT_FILE")
    assert any("REQUESTS_CA_BUNDLE" in s and "does not exist" in s for s in net.ignored)


def test_pip_config_is_read_like_pip_reads_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    user = home / ".config" / "pip"
    user.mkdir(parents=True)
    (user / "pip.conf").write_text(
        "[global]\ncert = /user.pem\ntimeout = 60\nindex-url = http://mirror/simple\n"
    )
    site = tmp_path / "venv"
    site.mkdir()
    (site / "pip.conf").write_text("[global]\ntrusted-host = site.example\n[install]\ncert = /site.pem\n")
    env_file = tmp_path / "env.conf"
    env_file.write_text("[global]\nproxy = http://proxy:1\n")
    environ = {"HOME": str(home), "XDG_CONFIG_DIRS": str(tmp_path / "none")}
    system = tmp_path / "etc-pip.conf"
    system.write_text("[global]\ncert = /system.pem\nretries = 2\nfind-links = /opt/wheels\n")
    got = read_pip_config(environ, platform="linux", prefix=str(site), global_files=[str(system)])
    assert got["retries"].source == f"pip config {system} [global] retries"
    got = {k: v for k, v in got.items() if k != "retries"}
    assert {k: v.value for k, v in got.items()} == {
        "cert": "/site.pem",  # [install] of the later (site) file wins
        "timeout": "60",
        "trusted-host": "site.example",
    }  # index-url is not a network setting: never read
    # PIP_CONFIG_FILE naming an existing file turns the user files off and is read last
    got = read_pip_config(
        {**environ, "PIP_CONFIG_FILE": str(env_file)}, platform="linux", prefix=str(site), global_files=[]
    )
    assert {k: v.value for k, v in got.items()} == {
        "cert": "/site.pem",
        "trusted-host": "site.example",
        "proxy": "http://proxy:1",
    }
    assert pip_config_files({**environ, "PIP_CONFIG_FILE": os.devnull}) == []
    kinds = [k for k, _ in pip_config_files(environ, platform="linux", prefix=str(site))]
    assert kinds == ["global", "global", "user", "user", "site"]

    # the same files, as pip itself reads them
    probe = (
        "from pip._internal.configuration import Configuration\n"
        "c = Configuration(isolated=False); c.load()\n"
        "print(dict(c.items()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CONFIG_DIRS": str(tmp_path / "none")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "'global.cert': '/user.pem'" in proc.stdout, proc.stderr


# --- the cause picker, on recorded outputs -----------------------------------------------------

PIP_CERT_FAILED = """\
Looking in indexes: https://127.0.0.1:36265/default/simple
Could not fetch URL https://127.0.0.1:36265/default/simple/alpha/: There was a problem confirming the ssl certificate: HTTPSConnectionPool(host='127.0.0.1', port=36265): Max retries exceeded with url: /default/simple/alpha/ (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)'))) - skipping
Could not fetch URL https://127.0.0.1:36265/default/simple/pip/: There was a problem confirming the ssl certificate: HTTPSConnectionPool(host='127.0.0.1', port=36265): Max retries exceeded with url: /default/simple/pip/ (Caused by SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)'))) - skipping
ERROR: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none)
ERROR: No matching distribution found for alpha==1.0
"""

UV_CERT_FAILED = """\
Using Python 3.11.7 environment at: venv
error: Failed to fetch: https://127.0.0.1:36265/default/simple/alpha/
  cause: error sending request for url (https://127.0.0.1:36265/default/simple/alpha/)
  cause: client error (Connect)
  cause: invalid peer certificate: UnknownIssuer

hint: Consider enabling use of system TLS certificates with the `--system-certs` command-line flag
"""

PIP_REFUSED = """\
Looking in indexes: http://127.0.0.1:1/simple
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at 0x7f3bcfb6fe90>: Failed to establish a new connection: [Errno 111] Connection refused')': /simple/alpha/
ERROR: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none)
ERROR: No matching distribution found for alpha==1.0
"""

UV_REFUSED = """\
error: Failed to fetch: http://127.0.0.1:1/simple/alpha/
  cause: error sending request for url (http://127.0.0.1:1/simple/alpha/)
  cause: client error (Connect)
  cause: tcp connect error
  cause: Connection refused (os error 111)
"""

PIP_PROXY = """\
Looking in indexes: https://127.0.0.1:2/simple
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProxyError('Cannot connect to proxy.', NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f0b6a4c2450>: Failed to establish a new connection: [Errno 111] Connection refused'))': /simple/alpha/
ERROR: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none)
ERROR: No matching distribution found for alpha==1.0
"""

UV_PROXY = """\
error: Failed to fetch: https://127.0.0.1:2/simple/alpha/
  cause: error sending request for url (https://127.0.0.1:2/simple/alpha/)
  cause: client error (Connect)
  cause: tunnel error: failed to create underlying connection
  cause: tcp connect error
  cause: Connection refused (os error 111)
"""

PIP_DNS = """\
Looking in indexes: https://no-such-host.invalid/simple
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f194462bb50>: Failed to establish a new connection: [Errno -2] Name or service not known')': /simple/alpha/
ERROR: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none)
ERROR: No matching distribution found for alpha==1.0
"""

UV_DNS = """\
error: Failed to fetch: http://no-such-host.invalid/simple/alpha/
  cause: error sending request for url (http://no-such-host.invalid/simple/alpha/)
  cause: client error (Connect)
  cause: dns error
  cause: error resolving DNS
  cause: failed to lookup address information: Name or service not known
"""

PIP_401_VV = """\
Fetching project page and analyzing links: http://127.0.0.1:35249/default/simple/alpha/
Getting page http://127.0.0.1:35249/default/simple/alpha/
Starting new HTTP connection (1): 127.0.0.1:35249
http://127.0.0.1:35249 "GET /default/simple/alpha/ HTTP/1.1" 401 12
Could not fetch URL http://127.0.0.1:35249/default/simple/alpha/: 401 Client Error: Unauthorized for url: http://127.0.0.1:35249/default/simple/alpha/ - skipping
Skipping link: not a file: http://127.0.0.1:35249/default/simple/alpha/
 ERROR: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none)
ERROR: No matching distribution found for alpha==1.0
"""

UV_401 = """\
error: No solution found when resolving dependencies
  cause: Because alpha was not found in the package registry and you require alpha==1.0, we can conclude that your requirements are unsatisfiable.

hint: An index URL (http://127.0.0.1:43479/default/simple) could not be queried due to a lack of valid authentication credentials (401 Unauthorized)
"""

PIP_NO_WHEEL_VV = """\
Fetching project page and analyzing links: http://127.0.0.1:34173/default/simple/alpha/
Skipping link: none of the wheel's tags (cp39-cp39-win_amd64) are compatible (run pip debug --verbose to show compatible tags): http://127.0.0.1:34173/default/files/alpha-1.0-cp39-cp39-win_amd64.whl (from http://127.0.0.1:34173/default/simple/alpha/)
ERROR: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none)
ERROR: No matching distribution found for alpha==1.0
"""

UV_NO_WHEEL = """\
error: No solution found when resolving dependencies
  cause: Because alpha==1.0 has no wheels with a matching Python ABI tag (e.g., `cp311`) and you require alpha==1.0, we can conclude that your requirements are unsatisfiable.

hint: You require CPython 3.11 (`cp311`), but we only found wheels for `alpha` (v1.0) with the following Python ABI tag: `cp39`
"""

PIP_NOT_FOUND = """\
Looking in indexes: http://127.0.0.1:34173/default/simple
ERROR: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none)
ERROR: No matching distribution found for alpha==1.0
"""

PIP_HASHES = """\
Collecting alpha==1.0 (from -r requirements-rebuild-linux.txt (line 4))
ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.
    alpha==1.0 from http://127.0.0.1:1/default/files/alpha-1.0-py3-none-any.whl (from -r requirements-rebuild-linux.txt (line 4)):
        Expected sha256 aaaa
             Got        bbbb
"""


@pytest.mark.parametrize(
    ("installer", "output", "kind", "in_error", "in_hint"),
    [
        ("pip", PIP_CERT_FAILED, "certificate", "unable to get local issuer certificate", "PIP_CERT"),
        ("uv", UV_CERT_FAILED, "certificate", "UnknownIssuer", "SSL_CERT_FILE"),
        ("pip", PIP_REFUSED, "connection", "Connection refused", "reachable"),
        ("uv", UV_REFUSED, "connection", "Connection refused", "reachable"),
        ("pip", PIP_PROXY, "proxy", "Cannot connect to proxy", "HTTPS_PROXY"),
        ("uv", UV_PROXY, "proxy", "tunnel error", "HTTPS_PROXY"),
        ("pip", PIP_DNS, "dns", "Name or service not known", "resolve"),
        ("uv", UV_DNS, "dns", "dns error", "resolve"),
        ("pip", PIP_401_VV, "auth", "401 Client Error", "CORP_TOKEN"),
        ("uv", UV_401, "auth", "401 Unauthorized", "CORP_TOKEN"),
        ("pip", PIP_NO_WHEEL_VV, "no-wheel", "cp39-cp39-win_amd64", "--python"),
        ("uv", UV_NO_WHEEL, "no-wheel", "cp39", "--python"),
        ("pip", PIP_NOT_FOUND, "not-found", "requirement alpha==1.0", "index"),
        ("pip", PIP_HASHES, "hash", "Expected sha256 aaaa", "changed"),
    ],
)
def test_the_cause_is_picked_from_recorded_output(
    installer: str, output: str, kind: str, in_error: str, in_hint: str
) -> None:
    cause = installer_cause(
        output, installer=installer, requirements="r.txt", platform="linux", credentials=["CORP_TOKEN"]
    )
    assert cause.kind == kind, cause
    assert in_error in cause.error and in_hint in cause.hint, cause


def test_progress_lines_are_short_and_carry_no_credentials() -> None:
    assert (
        progress_line(
            "pip", "  Downloading https://u:pw@127.0.0.1:1/default/files/alpha-1.0-py3-none-any.whl (1.2 kB)"
        )
        == "pip: Downloading alpha-1.0-py3-none-any.whl (1.2 kB)"
    )
    assert progress_line("uv", " + alpha==1.0") == "uv: + alpha==1.0"
    assert progress_line("pip", "   ") is None
    assert "pw" not in (progress_line("pip", "Looking in indexes: https://u:pw@host/simple/") or "")


def test_the_cause_comes_first_and_the_consequence_follows() -> None:
    cause = installer_cause(PIP_CERT_FAILED)
    assert cause.error.startswith("TLS certificate verification failed: certificate verify failed")
    assert "https://127.0.0.1:36265/default/simple/alpha/" in cause.error
    assert cause.error.endswith(
        "(then: Could not find a version that satisfies the requirement alpha==1.0 (from versions: none))"
    )
    assert "HTTPSConnectionPool" not in cause.error and "_ssl.c" not in cause.error
    # credentials in a proxy URL never reach the message
    leaky = PIP_PROXY.replace("https://127.0.0.1:2/simple", "https://user:pw@127.0.0.1:2/simple")
    assert (
        "pw@"
        not in installer_cause(
            leaky.replace("/simple/alpha/", "https://user:pw@127.0.0.1:2/simple/alpha/")
        ).error
    )
    assert installer_cause("something odd\n").kind == "other"


# --- rebuild against an HTTPS index with a test CA ---------------------------------------------


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def https_index(tmp_path: Path) -> Iterator[tuple[Path, Server, TestCA]]:
    """A project locked against a loopback HTTPS index whose certificate comes from a test CA."""
    ca = TestCA(tmp_path / "ca")
    factory = IndexFactory(tmp_path / "index")
    factory.add_wheel("alpha", "1.0", requires=["beta>=2"])
    factory.add_wheel("beta", "2.0")
    with factory.serve(ssl_context=ca.server_context()) as srv:
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / "repro.toml").write_text(
            f"""schema-version = 1
[reference]
name = "tls"
id = "2026-01-01.1"
[python]
version = "{PY}"
[[packages.index]]
name = "corp"
url = "{srv.url()}"
default = true
[[platform]]
name = "here"
os = "linux"
arch = "x86_64"
"""
        )
        lines = [f"--index-url {srv.url()}", "--only-binary :all:", ""]
        for name, version in (("alpha", "1.0"), ("beta", "2.0")):
            whl = factory.files_dir() / f"{name}-{version}-py3-none-any.whl"
            lines += [f"{name}=={version} \\", f"    --hash=sha256:{_sha(whl)}"]
        (proj / "requirements-rebuild-here.txt").write_text("\n".join(lines) + "\n")
        stamp_lock(proj / "repro.toml", "here")
        yield proj, srv, ca


def _base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A machine with no CA of its own for the test index, and no pip configuration."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "PIP_CONFIG_FILE": os.devnull, **extra}


class _NoVerify:
    def __call__(self, path: Path, **kw: object) -> Report:
        r = Report()
        r.add(Step.passed("application", "not run here"))
        return r


def _install(report: Report) -> Step:
    return next(s for s in report.steps if s.layer == "rebuild" and s.name == "install")


def _cli_rebuild(
    proj: Path, dest: Path, env: dict[str, str], json_out: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    argv = ["rebuild", str(proj), "--dest", str(dest), "--no-compute", "--json", str(json_out), *extra]
    return subprocess.run(
        [sys.executable, "-m", "kernodeck", *argv],
        env={**env, "PYTHONPATH": SRC, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_rebuild_trusts_the_ca_from_ssl_cert_file_and_names_the_certificate_when_missing(
    tmp_path: Path, https_index: tuple[Path, Server, TestCA]
) -> None:
    proj, srv, ca = https_index
    out = tmp_path / "ok.json"
    proc = _cli_rebuild(proj, tmp_path / "v1", _base_env(tmp_path, SSL_CERT_FILE=str(ca.ca_pem)), out)
    install = next(s for s in json.loads(out.read_text())["steps"] if s["name"] == "install")
    assert install["status"] == "passed", proc.stdout + proc.stderr
    assert install["details"]["network"] == {"ca": "SSL_CERT_FILE"}
    assert "--cert" in install["details"]["command"] and "ca.pem" in install["details"]["command"]
    assert srv.count(suffix=".whl", method="GET") == 2
    # not a terminal: the platform choice is explained, and the installer's progress shown as lines
    assert "platform here: matches this linux x86_64 machine" in proc.stderr
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("  pip: ")]
    assert "  pip: Collecting alpha==1.0 (from -r requirements-rebuild-here.txt (line 5))" in progress
    assert any(ln.startswith("  pip: Downloading beta-2.0-py3-none-any.whl (") for ln in progress)
    assert any("Successfully installed alpha-1.0 beta-2.0" in ln for ln in progress)
    assert all(str(tmp_path) not in ln for ln in progress)  # file names, not this machine's paths
    ok_report = proc.stdout

    out = tmp_path / "bad.json"
    proc = _cli_rebuild(proj, tmp_path / "v2", _base_env(tmp_path), out, "--quiet")
    assert proc.returncode == 1
    assert "pip:" not in proc.stderr and "rebuilding" not in proc.stderr  # --quiet: the report only
    assert proc.stderr == ""
    # the report itself is the same with or without progress
    for text in (proc.stdout, ok_report):
        assert any(line.startswith("kernodeck rebuild") for line in text.splitlines()), text
    install = next(s for s in json.loads(out.read_text())["steps"] if s["name"] == "install")
    assert install["status"] == "failed" and install["details"]["cause"] == "certificate"
    assert install["error"].startswith("TLS certificate verification failed: certificate verify failed")
    assert "PIP_CERT" in install["hint"] and "index and its credentials" not in install["hint"]
    screen = " ".join(proc.stdout.split())
    assert "TLS certificate verification failed" in screen and "hint: the index's certificate" in screen


@pytest.mark.parametrize("how", ["REQUESTS_CA_BUNDLE", "PIP_CERT", "pip config cert"])
def test_rebuild_with_pip_trusts_the_ca_given_the_usual_ways(
    tmp_path: Path, https_index: tuple[Path, Server, TestCA], how: str
) -> None:
    proj, _srv, ca = https_index
    if how == "pip config cert":
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\ncert = {ca.ca_pem}\nindex-url = http://127.0.0.1:9/elsewhere\n")
        env = _base_env(tmp_path, PIP_CONFIG_FILE=str(conf))
    else:
        env = _base_env(tmp_path, **{how: str(ca.ca_pem)})
    report = rebuild(proj, dest=tmp_path / "v", verify=_NoVerify(), environ=env, compute=False)
    install = _install(report)
    assert install.status is Status.PASSED, install.error
    source = install.details["network"]["ca"]
    assert source == how if how != "pip config cert" else source == f"pip config {conf} [global] cert"
    assert report.ok, report.summary()


def test_rebuild_with_uv_gets_pip_cert_as_ssl_cert_file(
    tmp_path: Path, https_index: tuple[Path, Server, TestCA]
) -> None:
    proj, _srv, ca = https_index
    env = _base_env(tmp_path, PIP_CERT=str(ca.ca_pem))
    report = rebuild(proj, dest=tmp_path / "v", installer="uv", verify=_NoVerify(), environ=env)
    assert _install(report).status is Status.PASSED, _install(report).error
    bad = rebuild(proj, dest=tmp_path / "w", installer="uv", verify=_NoVerify(), environ=_base_env(tmp_path))
    step = _install(bad)
    assert step.status is Status.FAILED and "certificate" in (step.error or "")
    assert step.details["cause"] == "certificate"


def test_rebuild_goes_through_the_https_proxy(
    tmp_path: Path, https_index: tuple[Path, Server, TestCA]
) -> None:
    proj, srv, ca = https_index
    with ConnectProxy() as proxy:
        env = _base_env(tmp_path, SSL_CERT_FILE=str(ca.ca_pem), HTTPS_PROXY=proxy.url)
        report = rebuild(proj, dest=tmp_path / "v", verify=_NoVerify(), environ=env)
        assert _install(report).status is Status.PASSED, _install(report).error
        assert f"127.0.0.1:{srv.port}" in proxy.connects
        assert "HTTPS_PROXY" in _install(report).details["environment"]
        n = len(proxy.connects)
        # a proxy that is not there is the cause named, not "no matching distribution"
        dead = _base_env(
            tmp_path,
            SSL_CERT_FILE=str(ca.ca_pem),
            HTTPS_PROXY="http://127.0.0.1:9",
            PIP_RETRIES="1",  # passed on as --retries: one retry, and pip says why it retried
        )
        bad = rebuild(proj, dest=tmp_path / "w", verify=_NoVerify(), environ=dead)
        assert _install(bad).details["cause"] == "proxy", _install(bad).error
        assert "--retries" in _install(bad).details["command"]
        assert len(proxy.connects) == n


def test_on_a_terminal_progress_is_one_status_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the installer's lines update one rich status line (no plain lines); stage
    lines stop it; --quiet shows nothing."""
    import io

    from kernodeck.commands import handover

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    display = handover._StageDisplay(quiet=False)
    assert display._console is not None
    display._console.file = err
    display.progress("pip: Downloading alpha-1.0-py3-none-any.whl (1.2 kB)")
    assert display._status is not None
    display.progress("pip: Installing collected packages: alpha")
    display.log("rebuild: contract ...")
    assert display._status is None
    display.close()
    shown = err.getvalue()
    assert "rebuild: contract ..." in shown and "  pip: " not in shown

    quiet_err = Tty()
    monkeypatch.setattr(sys, "stderr", quiet_err)
    quiet = handover._StageDisplay(quiet=True)
    quiet.log("rebuild: venv ...")
    quiet.progress("pip: Collecting alpha")
    quiet.close()
    assert quiet_err.getvalue() == ""
