"""Probes: facts about a target environment, gathered by scripts that run under its interpreter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernodeck.probe.facts import Facts
    from kernodeck.probe.runner import FakeProbe, Probe, ProbeFailed, ProbeRequest, RealProbe

__all__ = ["Facts", "FakeProbe", "Probe", "ProbeFailed", "ProbeRequest", "RealProbe"]


def __getattr__(name: str) -> Any:
    # Imported lazily: kernodeck.probe.launch starts the probe before pydantic is imported.
    if name == "Facts":
        from kernodeck.probe.facts import Facts

        return Facts
    if name not in __all__:
        raise AttributeError(f"module 'kernodeck.probe' has no attribute {name!r}")
    from kernodeck.probe import runner

    exported: dict[str, Any] = {
        "FakeProbe": runner.FakeProbe,
        "Probe": runner.Probe,
        "ProbeFailed": runner.ProbeFailed,
        "ProbeRequest": runner.ProbeRequest,
        "RealProbe": runner.RealProbe,
    }
    return exported[name]
