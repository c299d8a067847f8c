"""Verify layers: one module per layer, each `check(manifest, facts, ctx) -> list[Step]`; run.py orders them."""

from __future__ import annotations

from kernodeck.layers import VERIFY_LAYERS as LAYERS
from kernodeck.verify.run import run_verify, select_platform

__all__ = ["LAYERS", "run_verify", "select_platform"]
