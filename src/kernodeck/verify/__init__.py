"""Verify layers: one module per layer, each `check(manifest, facts, ctx) -> list[Step]`; run.py orders them.

`kernodeck.verify` is two things: this subpackage and the API function `kernodeck.api.verify`.
Python's import system sets the package attribute `kernodeck.verify` to this module the first
time any `kernodeck.verify.*` module is imported, which would hide the function from
`kernodeck.verify(path)`. So this module is callable and forwards to the API function: the
documented call works whichever of the two the attribute holds.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from kernodeck.layers import VERIFY_LAYERS as LAYERS
from kernodeck.verify.run import run_verify, select_platform

if TYPE_CHECKING:
    from kernodeck.report import Report

__all__ = ["LAYERS", "run_verify", "select_platform"]


class _VerifyModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Report:
        from kernodeck.api import verify

        return verify(*args, **kwargs)


sys.modules[__name__].__class__ = _VerifyModule
