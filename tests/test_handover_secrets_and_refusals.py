"""Hand-over commands: secrets a user really has (reports, netrc, percent-encoding), and refusals a user really hits."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.handover.bundle import BundleError, write_bundle
from kernodeck.handover.scrub import Scrubber
from kernodeck.report import Report, Step
from tests.fixtures.bundle_project import bundle_project
from tests.fixtures.fresh_lock import stamp_lock

NETRC_PW = "NetrcPassw0rd-4711"


def _bundle_bytes(out: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())


def _report(proj: Path, **inventory: object) -> None:
    r = Report(manifest="repro.toml", reference_id="2026-01-01.1", platform="linux-x86_64")
    r.add(Step.passed("device", "cpu"))
    r.inventory = dict(inventory)
    r.write_json(proj / "verify-report.json")


def test_secret_named_values_in_a_report_inventory_are_redacted_not_refused(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    home = tmp_path / "author"
    # recorded in another shell: these values are not in the environment the bundle runs in
    _report(
        proj,
        environment={
            "HF_TOKEN": "hf-value-from-yesterday",
            "SOME_SECRET": "zz-secret-zz",
            "PATH": f"{home}/bin",
        },
    )
    out = tmp_path / "out"
    write_bundle(out, manifest=proj, environ={"PATH": "/usr/bin"}, home=home)
    data = _bundle_bytes(out)
    assert b"hf-value-from-yesterday" not in data and b"zz-secret-zz" not in data
    assert str(home).encode() not in data
    report = Report.from_json((out / "observed" / "verify-report.json").read_text())
    assert report.inventory["environment"] == {
        "HF_TOKEN": "<redacted>",
        "SOME_SECRET": "<redacted>",
        "PATH": "<home>/bin",
    }


def test_placeholders_under_secret_names_survive() -> None:
    s = Scrubber()
    assert s.data({"CORP_TOKEN": "${CORP_TOKEN}", "X_KEY": "", "n": {"API_KEY": "v4lue"}}) == {
        "CORP_TOKEN": "${CORP_TOKEN}",
        "X_KEY": "",
        "n": {"API_KEY": "<redacted>"},
    }


def test_a_netrc_in_the_project_stays_out_of_the_bundle(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    (proj / ".netrc").write_text(f"machine pkgs.example\n  login bob\n  password {NETRC_PW}\n")
    (proj / ".env.example").write_text("CORP_TOKEN=${CORP_TOKEN}\n")
    out = tmp_path / "out"
    result = write_bundle(out, manifest=proj, environ={}, home=tmp_path / "author")
    assert NETRC_PW.encode() not in _bundle_bytes(out)
    assert not (out / ".netrc").exists() and (out / ".env.example").is_file()
    assert any(".netrc was left out" in w for w in result.warnings)


def test_a_netrc_password_in_a_named_config_file_stops_the_bundle(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path, config_text=f"machine pkgs.example login bob password {NETRC_PW}\n")
    out = tmp_path / "out"
    with pytest.raises(BundleError) as e:
        write_bundle(out, manifest=proj, environ={}, home=tmp_path / "elsewhere")
    assert "configs/run.yaml" in e.value.render() and "netrc password" in e.value.render()
    assert NETRC_PW not in e.value.render() and not out.exists()


def test_the_authors_netrc_passwords_are_known_secrets(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    home = tmp_path / "author"
    (home / ".netrc").write_text(f"machine pkgs.example login bob password {NETRC_PW}\n")
    _report(proj, last_error=f"401 from pkgs.example while using {NETRC_PW}")
    out = tmp_path / "out"
    write_bundle(out, manifest=proj, environ={}, home=home)
    assert NETRC_PW.encode() not in _bundle_bytes(out)
    assert b"<redacted:netrc>" in (out / "observed" / "verify-report.json").read_bytes()


def test_percent_encoded_paths_and_secrets_are_scrubbed(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    spaced = tmp_path / "author" / "my proj é"
    proj.rename(spaced)
    from urllib.parse import quote

    wheel_url = "file://" + quote(str(spaced / "wheels" / "local-1.0-py3-none-any.whl"))
    (spaced / "installed-after.txt").write_text(f"# observed\nlocal @ {wheel_url}\n")
    token = "p@ss/w0rd!x"
    _report(spaced, index=f"https://bob:{quote(token, safe='')}@pkgs.example/simple")
    out = tmp_path / "out"
    write_bundle(out, manifest=spaced, environ={"CORP_TOKEN": token}, home=tmp_path / "elsewhere")
    data = _bundle_bytes(out)
    assert b"my%20proj" not in data and quote(token, safe="").encode() not in data
    inv = (out / "observed" / "installed-after.txt").read_text()
    assert "local @ file://<project>/wheels/local-1.0-py3-none-any.whl" in inv


# --- rebuild ----------------------------------------------------------------------------------------


def _manifest(proj: Path, python: str) -> Path:
    proj.mkdir(parents=True, exist_ok=True)
    (proj / "repro.toml").write_text(
        f"""schema-version = 1
[reference]
name = "tiny"
id = "2026-01-01.1"
[python]
version = "{python}"
[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"
"""
    )
    (proj / "requirements-rebuild-linux-x86_64.txt").write_text("--only-binary :all:\n")
    stamp_lock(proj / "repro.toml", "linux-x86_64")
    return proj


def test_a_python_version_that_does_not_satisfy_the_manifest_exits_2_and_creates_nothing(
    tmp_path: Path,
) -> None:
    have = f"{sys.version_info.major}.{sys.version_info.minor}"
    proj = _manifest(tmp_path / "proj", have)
    dest = tmp_path / "v"
    other = f"{sys.version_info.major}.{sys.version_info.minor + 1}"
    res = CliRunner().invoke(
        cli, ["rebuild", str(proj), "--dest", str(dest), "--python", other, "--no-compute"]
    )
    assert res.exit_code == 2, res.output
    flat = " ".join(res.output.split())
    assert f"--python {other} does not satisfy [python] version = '{have}'" in flat
    assert not dest.exists()
    # a path to an interpreter of the wrong version: also refused as bad input, before anything is created
    proj2 = _manifest(tmp_path / "proj2", "3.9")
    res = CliRunner().invoke(
        cli, ["rebuild", str(proj2), "--dest", str(dest), "--python", sys.executable, "--no-compute"]
    )
    assert res.exit_code == 2 and "does not satisfy" in res.output and not dest.exists()
    assert "Traceback" not in res.output


def test_force_never_deletes_home_or_the_manifest_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    proj = _manifest(home / "proj", "3.11")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for dest in (home, proj, home / ".."):
        res = CliRunner().invoke(cli, ["rebuild", str(proj), "--dest", str(dest), "--force"])
        assert res.exit_code == 2 and "refusing to delete" in res.output, (dest, res.output)
    assert (proj / "repro.toml").is_file()
    assert os.listdir(home) == ["proj"]


def test_capture_variant_twice_with_the_same_differences_changes_nothing(tmp_path: Path) -> None:
    import datetime as dt
    import shutil

    from kernodeck.capture import capture

    src = Path(__file__).resolve().parents[1] / "manifests" / "embeddings"
    proj = tmp_path / "emb"
    shutil.copytree(src, proj)
    data = proj / "data" / "samples.jsonl"
    data.write_text(data.read_text() + "\n")
    day = dt.date(2030, 1, 2)
    first = capture(proj, variant="more-data", system_probe=None, today=day)
    assert first.written and first.new_id == "2030-01-02.1"
    before = (proj / "repro.toml").read_bytes()
    again = capture(proj, variant="more-data", system_probe=None, today=day)
    assert not again.written and (proj / "repro.toml").read_bytes() == before
    assert "already records these differences (id 2030-01-02.1)" in again.render()
