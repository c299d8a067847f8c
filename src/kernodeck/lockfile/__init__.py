"""Lock files: `write` renders requirements-rebuild-<platform>.txt and pylock.<platform>.toml;
`read` (beside it) parses them back for verify.

The renderers are imported when first asked for (PEP 562): verify and require() read lock files
and never render one, and `kernodeck.lockfile.names` is imported by every command."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kernodeck.lockfile.names import pylock_filename, requirements_filename

if TYPE_CHECKING:
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

_FROM_WRITE = frozenset(__all__) - {"pylock_filename", "requirements_filename"}


def __getattr__(name: str) -> Any:
    if name in _FROM_WRITE:
        return getattr(importlib.import_module("kernodeck.lockfile.write"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
