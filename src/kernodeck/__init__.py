"""Kernodeck: reproduction manifests for ML environments.

From Python::

    import kernodeck
    report = kernodeck.verify("repro.toml")      # -> kernodeck.report.Report
    kernodeck.require("repro.toml")              # raises kernodeck.CheckFailed when anything required failed
                                                 # (the environment only; checks=True adds [[check]] and [resume])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["CheckFailed", "__version__", "require", "verify"]

if TYPE_CHECKING:
    from kernodeck.api import require, verify
    from kernodeck.errors import CheckFailed


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import kernodeck` (and the CLI's start-up) stays cheap.
    if name == "verify":
        from kernodeck.api import verify

        return verify
    if name == "require":
        from kernodeck.api import require

        return require
    if name == "CheckFailed":
        from kernodeck.errors import CheckFailed

        return CheckFailed
    raise AttributeError(f"module 'kernodeck' has no attribute {name!r}")
