"""Lock files left over from a platform the manifest no longer declares.

A platform removed from repro.toml (or renamed) leaves its `requirements-rebuild-<old>.txt` and
`pylock.<old>.toml` behind, where a teammate could still install from them. A full `kernodeck
lock` removes them and says so; `kernodeck lock --check` names them and fails, as a lock would
change them. Only files whose first line says Kernodeck wrote them from a manifest of this name
count: a lock file of another manifest in the same folder, or a file someone wrote by hand, is
never touched.

    found = left_over(folder, "repro.toml", declared={"linux-x86_64"})
    found[0].platform, found[0].paths      # "linux-aarch64", (…/requirements-rebuild-linux-aarch64.txt,)
    remove(found)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernodeck.lockfile.header import generated_from
from kernodeck.lockfile.names import locked_platforms


@dataclass(frozen=True)
class LeftOver:
    platform: str
    paths: tuple[Path, ...]  # its requirements file and/or its pylock file

    def describe(self, manifest_name: str) -> str:
        return f"{manifest_name} declares no platform {self.platform} any more"


def written_from(path: Path) -> str | None:
    """The manifest name a lock file's first line says Kernodeck wrote it from; None for any other
    file (or one that cannot be read)."""
    try:
        if not path.is_file() or path.is_symlink():
            return None
        with path.open(encoding="utf-8", errors="replace") as f:
            first = f.readline(4096)
    except OSError:
        return None
    return generated_from(first)


def left_over(folder: Path, manifest_name: str, declared: Collection[str]) -> list[LeftOver]:
    """The lock files in `folder` written from `manifest_name` for platforms not in `declared`,
    one entry per platform, sorted."""
    found = []
    for platform, paths in locked_platforms(folder).items():
        ours = tuple(path for path in paths if written_from(path) == manifest_name)
        if platform not in declared and ours:
            found.append(LeftOver(platform, ours))
    return found


def remove(found: Sequence[LeftOver]) -> None:
    for entry in found:
        for path in entry.paths:
            path.unlink(missing_ok=True)
