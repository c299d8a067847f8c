"""What the first `kernodeck lock` after `kernodeck init` did with the pins it was asked to keep.

    report = first_lock_report("linux-x86_64", "uv.lock", preferred, locked, specs)
    report.line()   # "kept 41 of 43 pins from uv.lock; changed: numpy 1.26.4 -> 2.1.0 (numpy>=2 ...)"

Only packages the lock contains are counted (a pin of a package this platform does not need,
such as pip in an adopted environment, is neither kept nor changed; it is counted apart). The
reason of a change is the requirement or constraint that excludes the preferred version when one
does, else that the resolver needed another version on this platform (a dependency's range or no
installable file of that version for the platform).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from kernodeck.errors import KernodeckError
from kernodeck.manifest.schema import Manifest
from kernodeck.manifest.sources import SourceSet, read_sources

#: The reason when no requirement of the manifest excludes the preferred version.
RESOLVER_REASON = "another version was needed on this platform: a dependency's range or no fitting file"


@dataclass(frozen=True)
class PinChange:
    name: str
    preferred: str
    locked: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "preferred": self.preferred, "locked": self.locked, "why": self.why}


@dataclass(frozen=True)
class PinReport:
    platform: str
    source: str  # "uv.lock", "kernodeck-env-pins.txt", ...
    considered: int  # preferred pins of packages the lock contains
    kept: int
    changes: tuple[PinChange, ...]
    not_needed: int  # preferred pins of packages this lock does not contain

    def line(self) -> str:
        text = f"{self.platform}: kept {self.kept} of {self.considered} pins from {self.source}"
        if self.changes:
            text += "; changed: " + ", ".join(
                f"{c.name} {c.preferred} \u2192 {c.locked} ({c.why})" for c in self.changes
            )
        if self.not_needed:
            text += f"; {self.not_needed} not needed on this platform"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "source": self.source,
            "considered": self.considered,
            "kept": self.kept,
            "changed": [c.to_json() for c in self.changes],
            "not_needed": self.not_needed,
        }


def _why(name: str, preferred: Version, specs: Iterable[str]) -> str:
    for text in specs:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == name and not req.specifier.contains(preferred, prereleases=True):
            return f"{text} excludes it"
    return RESOLVER_REASON


def first_lock_report(
    platform: str,
    source: str,
    preferred: Mapping[str, Version],
    locked: Mapping[str, Version],
    specs: Iterable[str] = (),
) -> PinReport:
    """Compare the preferred pins with what the lock wrote (names canonical)."""
    spec_list = list(specs)
    kept = 0
    changes: list[PinChange] = []
    not_needed = 0
    for name, want in sorted(preferred.items()):
        got = locked.get(name)
        if got is None:
            not_needed += 1
        elif got == want or (want.local is None and got.public == want.public):
            kept += 1  # `2.5.1` kept as the backend's build of it, `2.5.1+cu124`
        else:
            changes.append(PinChange(name, str(want), str(got), _why(name, want, spec_list)))
    return PinReport(platform, source, kept + len(changes), kept, tuple(changes), not_needed)


def first_lock_reports(
    manifest: Manifest,
    manifest_path: Path,
    firsts: Mapping[str, tuple[str, Mapping[str, Version]]],
    locked: Mapping[str, Mapping[str, Version]],
) -> tuple[PinReport, ...]:
    """One report per platform whose lock was a first lock with preferred pins (`firsts`:
    platform -> (source file, pins)) and that was locked (`locked`: platform -> its pins)."""
    if not firsts:
        return ()
    pk = manifest.packages
    specs = [*pk.requirements, *pk.constraints]
    found = SourceSet()
    with contextlib.suppress(KernodeckError):
        found = read_sources(manifest, manifest_path)
    # a platform's own extras' requirements explain its changes only (cu130's torch>=2.9.1 not cu124's)
    return tuple(
        first_lock_report(n, source, pins, locked[n], [*specs, *found.requirements_of(n), *found.constraints])
        for n, (source, pins) in sorted(firsts.items())
        if n in locked and pins
    )
