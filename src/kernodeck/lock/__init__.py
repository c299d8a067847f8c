"""Locking: the orchestration and its API (`orchestrate`), the replay cache (`replay`), one platform's
resolution as a lock file (`convert`), the freshness digest (`inputs`) and `--mirror` (`mirrors`).

`from kernodeck.lock import lock_manifest` is the Python API (docs/lock-api.md). The names are
loaded on first use, so importing `kernodeck.lock.inputs` (verify's freshness check) does not import
the resolver and the HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernodeck.lock.orchestrate import (
        LockProgress,
        LockResult,
        PlatformFailure,
        PlatformResult,
        lock_manifest,
    )

__all__ = ["LockProgress", "LockResult", "PlatformFailure", "PlatformResult", "lock_manifest"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kernodeck.lock import orchestrate

        return getattr(orchestrate, name)
    raise AttributeError(f"module 'kernodeck.lock' has no attribute {name!r}")
