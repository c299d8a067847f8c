"""The code layer in a git checkout, in a hand-over bundle outside git, and in neither."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.api import verify
from kernodeck.handover.bundle import BundleError, write_bundle
from kernodeck.report import Report, Status
from tests.fixtures.fresh_lock import stamp_lock

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(revision: str, conf_sha: str, *, allow_dirty: bool = False) -> str:
    return f"""schema-version = 1
[reference]
name = "c"
id = "2026-01-01.1"
[code]
revision = "{revision}"
allow-dirty = {str(allow_dirty).lower()}
config = [{{ path = "conf.yaml", sha256 = "{conf_sha}" }}]
[python]
version = "{PY}"
[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"
"""


def _project(tmp_path: Path, *, dirty: bool = False, allow_dirty: bool = False) -> tuple[Path, str]:
    """A git checkout with committed code; repro.toml (untracked) pins that commit."""
    proj = tmp_path / "author"
    (proj / "pkg").mkdir(parents=True)
    (proj / "app.py").write_text("print('hi')\n")
    (proj / "pkg" / "model.py").write_text("W = 1\n")
    (proj / "conf.yaml").write_text("a: 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run([*GIT, *args], cwd=proj, check=True, capture_output=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=proj, capture_output=True, text=True, check=True
    ).stdout.strip()
    (proj / "repro.toml").write_text(_manifest(head, _sha(proj / "conf.yaml"), allow_dirty=allow_dirty))
    (proj / "requirements-rebuild-linux-x86_64.txt").write_text("# empty lock\n")
    stamp_lock(proj / "repro.toml", "linux-x86_64")
    if dirty:
        (proj / "app.py").write_text("print('changed')\n")
    return proj, head


def _bundle(tmp_path: Path, proj: Path, *, allow_dirty: bool = False, warns: str = "") -> Path:
    result = write_bundle(tmp_path / "b", manifest=proj, environ={}, home=tmp_path, allow_dirty=allow_dirty)
    revision_warnings = [w for w in result.warnings if "code/revision" in w]
    assert revision_warnings == ([warns] if warns else []), result.warnings
    clean = tmp_path / "elsewhere" / "clean"
    shutil.copytree(tmp_path / "b", clean)
    return clean


def _code(folder: Path, tmp_path: Path) -> dict[str, tuple[str, object, str | None]]:
    report: Report = verify(folder / "repro.toml", only=["code"], cache_dir=tmp_path / "cache")
    return {s.name: (s.status.value, s.observed, s.error) for s in report.steps if s.layer == "code"}


def test_git_checkout(tmp_path: Path) -> None:
    proj, head = _project(tmp_path)
    got = _code(proj, tmp_path)
    assert got["revision"][:2] == ("passed", head)
    assert got["clean-tree"][0] == "passed"
    assert got["config:conf.yaml"][0] == "passed"
    assert "files" not in got


def test_bundle_outside_git_passes(tmp_path: Path) -> None:
    proj, head = _project(tmp_path)
    clean = _bundle(tmp_path, proj)
    got = _code(clean, tmp_path)
    assert got["revision"][:2] == ("passed", head)
    assert got["clean-tree"][0] == "passed"
    assert got["files"][:2] == ("passed", "2 files match")  # app.py, pkg/model.py
    assert got["config:conf.yaml"][0] == "passed"


def test_bundle_with_an_edited_code_file_fails(tmp_path: Path) -> None:
    proj, _ = _project(tmp_path)
    clean = _bundle(tmp_path, proj)
    (clean / "pkg" / "model.py").write_text("W = 2\n")
    (clean / "app.py").unlink()
    got = _code(clean, tmp_path)
    assert got["revision"][0] == "passed"
    status, observed, error = got["files"]
    assert status == "failed" and observed == ["app.py (missing)", "pkg/model.py (changed)"]
    assert "2 bundled code files differ from BUNDLE.sha256" in (error or "")


def test_bundle_with_a_forged_revision_fails(tmp_path: Path) -> None:
    proj, _ = _project(tmp_path)
    clean = _bundle(tmp_path, proj)
    refs = json.loads((clean / "references.json").read_text())
    refs[0]["revision"] = "f" * 40
    (clean / "references.json").write_text(json.dumps(refs))
    got = _code(clean, tmp_path)
    assert got["revision"][0] == "failed"
    assert "references.json does not match BUNDLE.sha256" in (got["revision"][2] or "")
    assert got["clean-tree"][0] == "skipped"


def test_bundle_of_a_dirty_tree(tmp_path: Path) -> None:
    proj, head = _project(tmp_path, dirty=True)
    with pytest.raises(BundleError, match=r"uncommitted changes \(1\): app.py") as err:
        _bundle(tmp_path, proj)
    assert "--allow-dirty" in (err.value.hint or "")
    assert not (tmp_path / "b").exists()  # nothing written

    got = _code(_bundle(tmp_path, proj, allow_dirty=True), tmp_path)
    assert got["revision"][:2] == ("passed", head)
    assert got["clean-tree"][0] == "warning"
    assert "written with --allow-dirty" in (got["clean-tree"][2] or "")
    assert "app.py" in (got["clean-tree"][2] or "")
    assert "--allow-dirty" in (tmp_path / "elsewhere" / "clean" / "REBUILD.md").read_text()

    # [code] allow-dirty = true in the manifest is the author's consent: bundled, then a warning
    proj2, _ = _project(tmp_path / "2", dirty=True, allow_dirty=True)
    got = _code(_bundle(tmp_path / "2", proj2), tmp_path)
    assert got["clean-tree"][0] == "warning"


def test_bundle_whose_manifest_pins_another_revision(tmp_path: Path) -> None:
    proj, head = _project(tmp_path)
    clean = _bundle(tmp_path, proj)
    text = (clean / "repro.toml").read_text().replace(head, "0" * 40)
    (clean / "repro.toml").write_text(text)
    (clean / "conf.yaml").write_text("a: 2\n")
    got = _code(clean, tmp_path)
    assert got["revision"][:2] == ("failed", head)
    assert f"the bundle's code is from {head[:12]}" in (got["revision"][2] or "")
    assert got["files"][0] == "passed"  # config files are checked by their own step
    assert got["config:conf.yaml"][0] == "failed"


def test_neither_git_nor_bundle(tmp_path: Path) -> None:
    proj, _ = _project(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("repro.toml", "conf.yaml", "app.py"):
        shutil.copy(proj / name, plain / name)
    report = verify(plain / "repro.toml", only=["code"], cache_dir=tmp_path / "cache")
    first = next(s for s in report.steps if s.status is Status.FAILED)
    assert first.name == "revision" and first.details["cause"] == "not-a-repository"
    assert "not a git checkout and not a kernodeck bundle" in (first.error or "")
    assert first.hint and "kernodeck bundle" in first.hint


def test_bundle_after_capture_and_committing_the_manifest(tmp_path: Path) -> None:
    """The normal workflow: capture pins HEAD, then repro.toml and the lock files are committed, so
    HEAD moves on by commits that change only Kernodeck's own files. The bundle's code layer passes,
    as verify in the repository does."""
    proj, pinned = _project(tmp_path)
    for args in (["add", "-A"], ["commit", "-q", "-m", "manifest and lock"]):
        subprocess.run([*GIT, *args], cwd=proj, check=True, capture_output=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=proj, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert head != pinned
    in_repo = _code(proj, tmp_path)
    assert in_repo["revision"][0] == "passed"
    got = _code(_bundle(tmp_path, proj), tmp_path)
    assert got["revision"][0] == "passed", got["revision"]
    assert "later commits change only" in str(got["revision"][1])
    assert got["clean-tree"][0] == "passed" and got["files"][0] == "passed"
    refs = json.loads((tmp_path / "b" / "references.json").read_text())
    assert refs[0]["pinned"] == pinned and refs[0]["revision"] == head


def test_bundle_whose_later_commits_change_code_still_fails_revision(tmp_path: Path) -> None:
    proj, pinned = _project(tmp_path)
    (proj / "app.py").write_text("print('moved on')\n")
    for args in (["add", "-A"], ["commit", "-q", "-m", "code moved on"]):
        subprocess.run([*GIT, *args], cwd=proj, check=True, capture_output=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=proj, capture_output=True, text=True, check=True
    ).stdout.strip()
    # bundle says so when it writes the folder, not only the rebuild on another machine
    said = (
        f"the code is at {head[:12]}, but repro.toml pins {pinned[:12]} and the commits between change "
        "more than Kernodeck's own files: a rebuild from this bundle fails its code/revision check; "
        "check out the pinned revision, or record this one with `kernodeck capture`, commit, and "
        "bundle again"
    )
    got = _code(_bundle(tmp_path, proj, warns=said), tmp_path)
    assert got["revision"][0] == "failed"
    assert f"the manifest pins {pinned[:12]}" in (got["revision"][2] or "")
