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


def test_a_preferred_pin_without_a_local_label_keeps_its_release_on_a_backend_index(
    tmp_path: Path,
    pytorch_index: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A project lock of the default index's build names `torch 2.6.0`; the cu126 index lists it
    as `2.6.0+cu126` beside a newer `2.7.0+cu126`: the first lock keeps the release (not the
    newer one) and says it kept it (before: 2.7.0+cu126, "another version was needed")."""
    import tomlkit

    from kernodeck.lockfile.names import requirements_filename
    from kernodeck.manifest.init import HostFacts, starter_document
    from tests.fixtures.lock_project import pins, with_default_index

    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    for py in ("310", "311", "312"):
        pytorch_index.add_wheel(
            "torch",
            "2.7.0+cu126",
            tags=f"cp{py}-cp{py}-manylinux_2_28_x86_64",
            requires=["filelock"],
            index="cu126",
            upload_time="2025-04-01T00:00:00Z",
        )
    proj = tmp_path / "proj"
    _write(proj / "requirements.txt", f"--extra-index-url {served_index.pytorch_base}/cu126\ntorch>=2.6\n")
    _write(
        proj / "pylock.toml",
        'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "torch"\nversion = "2.6.0"\n',
    )
    facts = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
    doc = starter_document(proj, facts=facts, git=None)
    (proj / "repro.toml").write_text(tomlkit.dumps(doc))
    with_default_index(proj / "repro.toml", served_index.url())
    assert [str(p["name"]) for p in doc["platform"]] == ["linux-x86_64-cu126"]
    capsys.readouterr()
    assert main(["lock", str(proj / "repro.toml")]) == 0
    locked = pins((proj / requirements_filename("linux-x86_64-cu126")).read_text())
    assert locked["torch"] == "2.6.0+cu126"
    err = capsys.readouterr().err
    assert "linux-x86_64-cu126: kept 1 of 1 pins from pylock.toml" in err, err
