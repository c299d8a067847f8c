"""Probes: facts about a target environment, gathered by scripts that run under its interpreter."""

from __future__ import annotations

from kernodeck.probe.facts import Facts
from kernodeck.probe.runner import FakeProbe, Probe, ProbeFailed, ProbeRequest, RealProbe

__all__ = ["Facts", "FakeProbe", "Probe", "ProbeFailed", "ProbeRequest", "RealProbe"]
