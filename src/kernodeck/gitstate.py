"""What git says about a project folder, with Kernodeck's own files set apart.

A manifest cannot hold the revision of the commit that holds it. So Kernodeck's own files
(`repro.toml`, `requirements-rebuild-*.txt`, `pylock.*.toml`) do not count as code: a HEAD that is
the pinned revision plus commits that change only those files still runs the pinned code, and a
tree whose only local changes are those files is clean. Everything else counts.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from kernodeck.lockfile.names import is_kernodeck_file


@dataclass(frozen=True)
class GitState:
    revision: str
    changed: tuple[str, ...] = ()  # tracked code files with local changes
    own_changed: tuple[str, ...] = ()  # Kernodeck's own files with local changes (not code)

    @property
    def dirty(self) -> bool:
        return bool(self.changed)


def git_toplevel(path: Path) -> Path | None:
    """The nearest folder above `path` holding `.git`, found without running git."""
    for p in (path, *path.parents):
        if (p / ".git").exists():
            return p
    return None


def run_git(folder: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str] | None:
    """`git -C folder ARGS`; None when git cannot run at all."""
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None


def git_state(folder: Path) -> GitState | str:
    """HEAD and the local changes of the checkout holding `folder`, or why there is none."""
    head = run_git(folder, "rev-parse", "HEAD")
    if head is None:
        return "git is not installed"
    if head.returncode != 0:
        return (head.stderr.strip().splitlines() or ["not a git checkout"])[0]
    status = run_git(folder, "status", "--porcelain", "--untracked-files=no")
    paths = sorted(line[3:] for line in (status.stdout if status else "").splitlines() if line.strip())
    return GitState(
        revision=head.stdout.strip(),
        changed=tuple(p for p in paths if not is_kernodeck_file(p)),
        own_changed=tuple(p for p in paths if is_kernodeck_file(p)),
    )


def later_commits_touch_only_kernodeck_files(folder: Path, revision: str, head: str) -> list[str] | None:
    """The files changed between `revision` and `head` when `revision` is an ancestor of `head` and
    every change is one of Kernodeck's own files; None otherwise (the code itself differs)."""
    ancestor = run_git(folder, "merge-base", "--is-ancestor", revision, head)
    if ancestor is None or ancestor.returncode != 0:
        return None
    diff = run_git(folder, "diff", "--name-only", revision, head)
    if diff is None or diff.returncode != 0:
        return None
    files = [line for line in diff.stdout.splitlines() if line.strip()]
    return files if all(is_kernodeck_file(f) for f in files) else None
