"""Verify sees every tampering it can: a real wheel installed by pip into a real venv, then
tampered with the way an attacker would; each case must fail (or warn, where stated) naming what
was changed, and an untouched copy must pass under --strict."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.api import verify
from kernodeck.report import Report, Status, Step
from tests.fixtures.installed_env import NAME, VERSION, Env, build, copy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return build(tmp_path_factory.mktemp("tamper-base"))


@pytest.fixture
def env(base: Env, tmp_path: Path) -> Iterator[Env]:
    old = os.environ.get("KERNODECK_CACHE_DIR")
    os.environ["KERNODECK_CACHE_DIR"] = str(tmp_path / "cache")
    yield copy(base, tmp_path)
    if old is None:
        os.environ.pop("KERNODECK_CACHE_DIR", None)
    else:
        os.environ["KERNODECK_CACHE_DIR"] = old


def _verify(env: Env, *, strict: bool = False) -> Report:
    return verify(env.manifest, python=env.python, only=["packages"], compute=False, strict=strict)


def _step(report: Report, name: str) -> Step:
    found = [s for s in report.steps if s.name == name]
    assert found, f"no step {name!r} in {[s.name for s in report.steps]}"
    return found[0]


def _dist_info(env: Env) -> Path:
    return env.site / f"{NAME}-{VERSION}.dist-info"


def test_untouched_environment_passes_strict(env: Env) -> None:
    report = _verify(env, strict=True)
    assert report.ok, report.summary()
    names = {s.name for s in report.steps}
    assert "records" in names and "records-unlisted" not in names and "records-missing" not in names


def test_removed_record_and_edited_module_warns_then_fails_strict(env: Env) -> None:
    (_dist_info(env) / "RECORD").unlink()
    (env.site / NAME / "core.py").write_text("def answer():\n    return 41\n")
    report = _verify(env)
    missing = _step(report, "records-missing")
    assert missing.status is Status.WARNING and NAME in (missing.error or "")
    strict = _verify(env, strict=True)
    assert not strict.ok
    missing = _step(strict, "records-missing")
    assert missing.status is Status.FAILED and missing.observed == [NAME]


def test_py_row_without_hash_fails(env: Env) -> None:
    record = _dist_info(env) / "RECORD"
    rows = record.read_text().splitlines()
    rows = [f"{NAME}/core.py,," if r.startswith(f"{NAME}/core.py,") else r for r in rows]
    record.write_text("\n".join(rows) + "\n")
    (env.site / NAME / "core.py").write_text("import os\n")
    report = _verify(env)
    assert not report.ok
    step = _step(report, f"record:{NAME}")
    assert step.status is Status.FAILED and step.details["cause"] == "record-unhashed"
    assert f"{NAME}/core.py (no sha256 in RECORD)" in (step.error or "")


def test_unterminated_quote_in_record_fails(env: Env) -> None:
    record = _dist_info(env) / "RECORD"
    text = record.read_text()
    record.write_text('"' + text)  # the csv reader would take the whole file as one field
    (env.site / NAME / "core.py").write_text("import os\n")
    report = _verify(env)
    assert not report.ok
    step = _step(report, f"record:{NAME}")
    assert step.status is Status.FAILED and step.details["cause"] == "record-unreadable"
    assert "RECORD" in (step.error or "") and "cannot be read" in (step.error or "")


def test_new_pth_file_is_reported_and_fails_strict(env: Env) -> None:
    (env.site / "zz-evil.pth").write_text("import os; os.environ['PWNED'] = '1'\n")
    report = _verify(env)
    step = _step(report, "records-unlisted")
    assert step.status is Status.WARNING and "zz-evil.pth" in (step.error or "")
    assert step.details["pth"] == 1
    strict = _verify(env, strict=True)
    assert not strict.ok and _step(strict, "records-unlisted").status is Status.FAILED


def test_new_module_in_package_directory_is_reported_and_fails_strict(env: Env) -> None:
    (env.site / NAME / "sub" / "backdoor.py").write_text("import os\n")
    report = _verify(env)
    step = _step(report, "records-unlisted")
    assert step.status is Status.WARNING and f"{NAME}/sub/backdoor.py" in (step.error or "")
    strict = _verify(env, strict=True)
    assert not strict.ok and _step(strict, "records-unlisted").status is Status.FAILED


def test_new_top_level_module_is_reported(env: Env) -> None:
    (env.site / "sitecustomize.py").write_text("import os\n")
    report = _verify(env)
    step = _step(report, "records-unlisted")
    assert "sitecustomize.py" in (step.error or "")


def test_edited_module_with_its_record_row_removed_is_reported(env: Env) -> None:
    record = _dist_info(env) / "RECORD"
    rows = [r for r in record.read_text().splitlines() if not r.startswith(f"{NAME}/core.py,")]
    record.write_text("\n".join(rows) + "\n")
    (env.site / NAME / "core.py").write_text("import os\n")
    strict = _verify(env, strict=True)
    assert not strict.ok
    assert f"{NAME}/core.py" in (_step(strict, "records-unlisted").error or "")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_installed_file_replaced_by_fifo_fails_without_blocking(env: Env) -> None:
    target = env.site / NAME / "sub" / "helpers.py"
    target.unlink()
    os.mkfifo(target)
    report = _verify(env)  # the probe would block for ever if it opened the FIFO
    step = _step(report, f"record:{NAME}")
    assert step.status is Status.FAILED
    assert f"{NAME}/sub/helpers.py (not a regular file)" in (step.error or "")


def test_a_warm_records_cache_still_sees_a_new_module_and_a_dropped_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search for unlisted files is skipped while the RECORD rows and every searched folder's
    stat key are unchanged; a new file changes its folder, a dropped row changes the rows."""
    import base64
    import hashlib

    from kernodeck.probe import script

    monkeypatch.setattr(script, "RACY_NS", 0)  # files written a moment ago may be remembered
    site = tmp_path / "site"
    (site / "pkg" / "sub").mkdir(parents=True)
    files = {"pkg/__init__.py": b"", "pkg/sub/mod.py": b"X = 1\n"}
    rows = []
    for rel, data in files.items():
        (site / rel).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
    meta = site / "pkg-1.0.dist-info"
    meta.mkdir()
    (meta / "RECORD").write_text("\n".join([*rows, "pkg-1.0.dist-info/RECORD,,"]) + "\n")

    def run() -> list[str]:
        dist: dict[str, object]  # str values and a bool
        dist = {"name": "pkg", "version": "1.0", "location": str(site), "metadata_dir": str(meta)}
        dist.update(record=str(meta / "RECORD"), shadowed=False)
        cache = script.RecordsCache(str(tmp_path / "cache"), "env", read=True)
        stats = script.check_records([dist], cache, False, 1)
        cache.save()
        return [u["path"] for u in stats["unlisted"]]

    assert run() == [] and run() == []
    assert any(p.name.startswith("unlisted-") for p in (tmp_path / "cache").iterdir())  # remembered
    (site / "pkg" / "sub" / "evil.py").write_text("import os\n")
    assert run() == ["pkg/sub/evil.py"]
    (site / "pkg" / "sub" / "evil.py").unlink()
    assert run() == []
    (meta / "RECORD").write_text("\n".join([rows[0], "pkg-1.0.dist-info/RECORD,,"]) + "\n")
    assert run() == ["pkg/sub/mod.py"]
