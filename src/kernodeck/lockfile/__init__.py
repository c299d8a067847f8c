"""Lock files: `write` renders requirements-rebuild-<platform>.txt and pylock.<platform>.toml;
`read` (beside it) parses them back for verify."""

from __future__ import annotations

from kernodeck.lockfile.names import pylock_filename, requirements_filename
from kernodeck.lockfile.write import (
    IndexLine,
    LockedFile,
    LockedPackage,
    PlatformLock,
    render_pylock,
    render_requirements,
)

__all__ = [
    "IndexLine",
    "LockedFile",
    "LockedPackage",
    "PlatformLock",
    "pylock_filename",
    "render_pylock",
    "render_requirements",
    "requirements_filename",
]
