"""bundle warns when a [[check]] runs a file the receiver will not have: untracked, outside the
pinned revision, outside the project or missing (real git checkouts)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernodeck.handover.bundle import write_bundle
from kernodeck.handover.checkfiles import scripts_of, warnings
from kernodeck.manifest.load import load_manifest
from tests.fixtures.fresh_lock import empty_lock


def _git(folder: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        ["git", *env_args, *args], cwd=folder, capture_output=True, text=True, check=True
    ).stdout.strip()


def _project(tmp_path: Path, run: str, *, pin: bool = True) -> Path:
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    (proj / "scripts" / "train.py").write_text("print('train')\n")
    (proj / "app").mkdir()
    (proj / "app" / "evaluate.py").write_text("print('eval')\n")
    _git(proj, "init", "-q")
    _git(proj, "add", "-A")
    _git(proj, "commit", "-qm", "code")
    revision = _git(proj, "rev-parse", "HEAD")
    (proj / "scripts" / "eval.py").write_text("print('eval')\n")  # written after the commit, untracked
    code = f'[code]\nrevision = "{revision}"\nallow-dirty = true\n' if pin else ""
    (proj / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "s"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
        f'{code}[[check]]\nname = "sample"\nrun = {run}\n'
    )
    empty_lock(proj / "repro.toml", "linux-x86_64")  # a bundle needs a usable lock per platform
    return proj


def test_the_scripts_a_command_runs() -> None:
    argv = [
        "python",
        "-u",
        "scripts/eval.py",
        "--config=configs/a.yaml",
        "--hook=./hooks/post.sh",
        "{out}/x.py",
    ]
    assert scripts_of(argv, Path("/nonexistent")) == ["scripts/eval.py", "./hooks/post.sh"]
    assert scripts_of(["python", "-m", "json.tool"], Path("/nonexistent")) == []


def test_an_untracked_script_is_named_with_no_code(tmp_path: Path) -> None:
    proj = _project(tmp_path, '["python", "scripts/eval.py"]')
    (found,) = warnings(load_manifest(proj / "repro.toml"), proj, carried=None)
    assert found.startswith(
        "check 'sample' runs scripts/eval.py, which is untracked and the bundle does not carry it"
    )
    assert "can't open file" in found


def test_a_committed_script_and_a_local_module_are_fine(tmp_path: Path) -> None:
    proj = _project(tmp_path, '["python", "scripts/train.py"]')
    assert warnings(load_manifest(proj / "repro.toml"), proj, carried=None) == []
    proj2 = _project(tmp_path / "b", '["python", "-m", "app.evaluate"]')
    assert warnings(load_manifest(proj2 / "repro.toml"), proj2, carried=None) == []


def test_a_script_committed_after_the_pinned_revision_is_named(tmp_path: Path) -> None:
    proj = _project(tmp_path, '["python", "scripts/eval.py"]')
    _git(proj, "add", "scripts/eval.py")
    _git(proj, "commit", "-qm", "later")
    (found,) = warnings(load_manifest(proj / "repro.toml"), proj, carried={"scripts/eval.py"})
    pinned = load_manifest(proj / "repro.toml").code.revision[:12]  # type: ignore[union-attr]
    assert found.startswith(
        f"check 'sample' runs scripts/eval.py, which is not in revision {pinned}: the bundle carries a copy"
    )


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ('["python", "../elsewhere.py"]', "check 'sample' runs ../elsewhere.py, outside the project"),
        (
            '["bash", "scripts/missing.sh"]',
            "check 'sample' runs scripts/missing.sh, which does not exist in the project",
        ),
    ],
)
def test_outside_and_missing_scripts_are_named(tmp_path: Path, run: str, expected: str) -> None:
    proj = _project(tmp_path, run)
    (found,) = warnings(load_manifest(proj / "repro.toml"), proj, carried=None)
    assert found.startswith(expected)


def test_bundle_no_code_warns_about_the_untracked_script(tmp_path: Path) -> None:
    proj = _project(tmp_path, '["python", "scripts/eval.py"]')
    result = write_bundle(tmp_path / "out", manifest=proj, include_code=False, environ={}, home=tmp_path)
    assert any(
        w.startswith("check 'sample' runs scripts/eval.py, which is untracked") for w in result.warnings
    )
    assert not (tmp_path / "out" / "scripts").exists()
