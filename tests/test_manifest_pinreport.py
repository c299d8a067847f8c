"""The first `kernodeck lock` after `kernodeck init` says which preferred pins it kept and which
it changed, and why (on screen and in `lock --json`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from kernodeck.cli import main
from kernodeck.manifest.pinreport import RESOLVER_REASON, first_lock_report
from tests.fixtures.adopt_project import uv_lock as _uv_lock
from tests.fixtures.adopt_project import write as _write
from tests.fixtures.index_factory import IndexFactory, Server

pytest_plugins = ["tests.fixtures.index_fixtures"]


def test_first_lock_after_a_real_uv_lock_reports_kept_and_changed_pins(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    index_factory.add_wheel("extra", "1.0")
    proj = tmp_path / "proj"
    pyproject = '[project]\nname = "proj"\nversion = "1"\nrequires-python = ">=3.10"\ndependencies = [{}]\n'
    _write(proj / "pyproject.toml", pyproject.format('"app", "dep", "extra"'))
    _uv_lock(proj, served_index.url(), tmp_path)
    index_factory.add_wheel("app", "1.1", requires=["dep>=1"])
    index_factory.add_wheel("dep", "2.0")
    # the project moved on after uv locked: dep>=2 now, extra no longer needed
    _write(proj / "pyproject.toml", pyproject.format('"app", "dep>=2"'))
    _write(proj / "requirements.txt", f"--index-url {served_index.url()}\n-e .\n")
    assert main(["init", str(proj)]) == 0
    capsys.readouterr()
    out_json = tmp_path / "lock.json"
    assert main(["lock", str(proj / "repro.toml"), "--json", str(out_json)]) == 0
    err = capsys.readouterr().err
    assert (
        "kept 1 of 2 pins from uv.lock; changed: dep 1.0 \u2192 2.0 (dep>=2 excludes it); "
        "1 not needed on this platform" in err
    )
    (report,) = json.loads(out_json.read_text())["adopted"]
    assert report["source"] == "uv.lock" and (report["considered"], report["kept"]) == (2, 1)
    assert report["changed"] == [
        {"name": "dep", "preferred": "1.0", "locked": "2.0", "why": "dep>=2 excludes it"}
    ]
    assert report["not_needed"] == 1
    # a re-lock prefers Kernodeck's own lock: no first-lock report any more
    assert main(["lock", str(proj / "repro.toml"), "--json", str(out_json)]) == 0
    assert json.loads(out_json.read_text())["adopted"] == []
    assert "pins from uv.lock" not in capsys.readouterr().err


def test_a_change_no_requirement_explains_is_put_on_the_resolver() -> None:
    r = first_lock_report(
        "linux-x86_64",
        "kernodeck-env-pins.txt",
        {"numpy": Version("1.26.4"), "torch": Version("2.13.0"), "pip": Version("24.0")},
        {"numpy": Version("2.1.0"), "torch": Version("2.13.0")},
        ["torch==2.13.0", "numpy"],
    )
    assert (r.considered, r.kept, r.not_needed) == (2, 1, 1)
    assert r.changes[0].why == RESOLVER_REASON
    assert r.line().startswith(
        "linux-x86_64: kept 1 of 2 pins from kernodeck-env-pins.txt; changed: numpy 1.26.4"
    )
