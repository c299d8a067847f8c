"""Where the paths a manifest names lead once symlinks are resolved.

`[[data]]`, `[[weights]]`, `[[code.config]]`, `[resume.checkpoint]` and `[[check.output]]
reference` are relative to the manifest's folder and must stay inside it: the schema refuses an
absolute path or one that climbs out with `..` (`schema.leaves_project`); here a symlink that
leads out of the project is caught when the path is used. An entry with `external = true` (a
shared dataset mount) may lead anywhere, and is reported as external.
"""

from __future__ import annotations

import os
from pathlib import Path


def escapes(root: Path, path: Path) -> Path | None:
    """Where `path` really leads when that is outside `root` (after resolving symlinks, those of
    `root` too); None when it stays inside (or does not exist yet: nothing to follow)."""
    try:
        real = Path(os.path.realpath(path))
        base = Path(os.path.realpath(root))
    except (OSError, ValueError):
        return None
    if real == base or real.is_relative_to(base):
        return None
    return real


def outside_message(rel: str, real: Path) -> str:
    return f"{rel} leads outside the project (to {real}) through a symlink"


OUTSIDE_HINT = (
    "keep the file inside the project, or add `external = true` to the entry if it is a shared mount"
)


def escaping_link(root: Path, folder: Path) -> tuple[Path, Path] | None:
    """The first symlink below `folder` (in sorted walk order) that leads outside `root`, and where
    it leads; None when every link stays inside. Only links are resolved: the walk costs no stat."""
    base = Path(os.path.realpath(root))
    stack = [str(folder)]
    while stack:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                real = Path(os.path.realpath(entry.path))
                if real != base and not real.is_relative_to(base):
                    return Path(entry.path), real
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return None
