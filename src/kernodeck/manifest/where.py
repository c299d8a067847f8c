"""Where a manifest entry is written: the line of a `[[data]]`, `[[check]]` or `[[platform]]`
entry's table header (with its last line), of a `[packages]` or `[system]` table, or of one key,
as a step's `Where` (`kernodeck.report`). The lines come from the manifest loader's locator
(`kernodeck.manifest.load.Locator`), the one owner of "which line holds this key"."""

from __future__ import annotations

from pathlib import Path

from kernodeck.manifest.load import Locator
from kernodeck.report import Where

__all__ = ["ManifestLines", "lock_where"]


class ManifestLines:
    """The lines of one manifest file, read once; an unreadable file locates nothing."""

    def __init__(self, manifest_file: Path) -> None:
        try:
            text = manifest_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        self.name = manifest_file.name
        self._lines = text.splitlines()
        self._locator = Locator(text)

    def where(self, *loc: str | int) -> Where | None:
        """The entry at `loc` (`"data", 0`; `"determinism", "env", "PYTHONHASHSEED"`), or the
        nearest one holding it (a key inside an inline table: the table's line): its line, and
        for a table its last line; None when the manifest holds none of them."""
        line = next(
            (self._locator.lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in self._locator.lines),
            None,
        )
        if line is None:
            return None
        end = self._table_end(line)
        return Where(file=self.name, line=line, end_line=end if end > line else None)

    def _table_end(self, line: int) -> int:
        """The last line of the table whose header is on `line` (itself for a key's line)."""
        if not Locator._HEADER.match(self._lines[line - 1]):
            return line
        last = line
        for n in range(line + 1, len(self._lines) + 1):
            text = self._lines[n - 1]
            if Locator._HEADER.match(text) and not Locator._KEY.match(text):
                break
            stripped = text.strip()
            if stripped and not stripped.startswith("#"):
                last = n
        return last


def lock_where(lock_path: Path, folder: Path, line: int = 0) -> Where:
    """A line of a lock file (0: the whole file), the file relative to the manifest's `folder`."""
    try:
        file = lock_path.relative_to(folder).as_posix()
    except ValueError:
        file = lock_path.name
    return Where(file=file, line=line or None)
