"""What every layer gets besides the manifest and the facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from kernodeck.backends import Backend, parse_backend
from kernodeck.fingerprint import FingerprintCache
from kernodeck.manifest.schema import Platform
from kernodeck.manifest.where import ManifestLines
from kernodeck.report import Status, Step


@dataclass
class Context:
    """Per-run settings and the steps produced so far (for "needs" decisions)."""

    root: Path
    manifest_file: Path
    python: str
    platform: Platform | None = None
    strict: bool = False
    compute: bool = True
    cache: FingerprintCache = field(default_factory=FingerprintCache)
    steps: list[Step] = field(default_factory=list)
    #: The checked process is the application's (require()): its torch settings are observed.
    application: bool = False

    @cached_property
    def lines(self) -> ManifestLines:
        """Where the manifest's entries are written (read once, when a step first asks)."""
        return ManifestLines(self.manifest_file)

    @property
    def backend(self) -> Backend | None:
        if self.platform is None or self.platform.backend is None:
            return None
        return parse_backend(self.platform.backend)

    def failed(self, layer: str, name: str | None = None) -> Step | None:
        """The first required failed step of a layer (and name), if any."""
        for s in self.steps:
            if (
                s.layer == layer
                and s.status is Status.FAILED
                and s.required
                and (name is None or s.name == name)
            ):
                return s
        return None


def short(items: list[str], n: int = 5) -> str:
    """'a, b, c and 4 more'."""
    if len(items) <= n:
        return ", ".join(items)
    return ", ".join(items[:n]) + f" and {len(items) - n} more"
