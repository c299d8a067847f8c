"""Kernodeck's own files are not code: the manifest may be committed after the revision it pins."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernodeck.gitstate import (
    GitState,
    git_state,
    later_commits_touch_only_kernodeck_files,
)
from kernodeck.lockfile.names import is_kernodeck_file

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "train.py").write_text("print(1)\n")
    (tmp_path / "app" / "repro.toml").write_text("# manifest\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "code")
    return tmp_path


@pytest.mark.parametrize(
    ("path", "own"),
    [
        ("repro.toml", True),
        ("app/repro.toml", True),
        ("app/requirements-rebuild-linux-x86_64-cu126.txt", True),
        ("pylock.macos-arm64.toml", True),
        ("installed-after.txt", True),  # rebuild's inventory, written beside the manifest
        ("app/installed-after.txt", True),
        ("app/installed-after.txt.orig", False),
        ("requirements.txt", False),
        ("app/train.py", False),
        ("app/repro.toml.bak", False),
        (".repro.toml.lock", True),  # capture/init/check --record's edit lock (manifest.edit.editing)
        ("app/.repro.toml.lock", True),
        ("app/repro.toml.lock", False),
    ],
)
def test_kernodeck_files(path: str, own: bool) -> None:
    assert is_kernodeck_file(path) is own


def test_manifest_commits_after_the_pinned_revision(repo: Path) -> None:
    pinned = _git(repo, "rev-parse", "HEAD")
    (repo / "app" / "repro.toml").write_text(f"# revision {pinned}\n")
    (repo / "app" / "requirements-rebuild-linux.txt").write_text("x==1\n")
    (repo / "app" / "installed-after.txt").write_text("x==1\n")  # `kernodeck rebuild` wrote it
    (repo / "app" / ".repro.toml.lock").write_text("")  # `kernodeck capture` left its edit lock
    state = git_state(repo / "app")
    assert isinstance(state, GitState) and not state.dirty and state.own_changed == ("app/repro.toml",)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "capture + lock")
    head = _git(repo, "rev-parse", "HEAD")
    assert later_commits_touch_only_kernodeck_files(repo, pinned, head) == [
        "app/.repro.toml.lock",
        "app/installed-after.txt",
        "app/repro.toml",
        "app/requirements-rebuild-linux.txt",
    ]
    (repo / "app" / "train.py").write_text("print(2)\n")
    state = git_state(repo)
    assert isinstance(state, GitState) and state.changed == ("app/train.py",)
    _git(repo, "commit", "-qam", "code change")
    assert later_commits_touch_only_kernodeck_files(repo, pinned, _git(repo, "rev-parse", "HEAD")) is None


def test_not_an_ancestor(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    assert later_commits_touch_only_kernodeck_files(repo, "f" * 40, head) is None


def test_outside_git(tmp_path: Path) -> None:
    assert isinstance(git_state(tmp_path), str)
