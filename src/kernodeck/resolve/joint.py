"""Joint resolution: one version of each package on every platform that has it, when one exists.

Every platform is first resolved on its own. Then, while a package present on several platforms
has different public versions there (local labels such as `+cpu`/`+cu126` are part of the backend
and may differ), the platforms that got a newer version are resolved again with `name<=V`, V the
oldest public version among them; a platform that cannot go down (no solution) instead lifts the
others with `name>=W`, W its version. When neither works, the difference stays and its reason is
the first cause of the failed attempt. Constraints only accumulate, so the loop reaches a fixpoint;
it is bounded all the same (`MAX_ROUNDS`).

Like uv's universal resolution with `required-environments`, the outcome is the newest version
that each platform can install, the same on all of them wherever such a version exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from kernodeck.errors import KernodeckError

if TYPE_CHECKING:
    from kernodeck.resolve import Resolution

MAX_ROUNDS = 8

# A platform's extra constraints: project -> specifier text ("<=2.2.6", ">=2.3.5").
Constraints = Mapping[NormalizedName, str]
Resolve = Callable[[str, Constraints], "Resolution"]


def public(v: Version) -> Version:
    """The version without its local label (2.6.0+cu126 -> 2.6.0)."""
    return Version(v.public)


@dataclass(frozen=True)
class Difference:
    """A package whose public version differs across platforms after joint resolution."""

    name: NormalizedName
    versions: Mapping[str, Version]  # platform -> version (with its local label)
    reason: str

    def _others(self, exclude: str | None) -> str:
        by: dict[Version, list[str]] = {}
        for p, v in self.versions.items():
            if p != exclude:
                by.setdefault(public(v), []).append(p)
        return "; ".join(f"{v} on {', '.join(sorted(ps))}" for v, ps in sorted(by.items(), reverse=True))

    def note_for(self, platform: str) -> str:
        """One header comment line for `platform`'s file."""
        here = self.versions[platform]
        return _one_line(f"{self.name} {here} here, {self._others(platform)}: {self.reason}")

    def describe(self) -> str:
        return _one_line(f"{self.name}: {self._others(None)}: {self.reason}")

    def to_json(self) -> dict[str, Any]:
        return {
            "package": self.name,
            "versions": {p: str(self.versions[p]) for p in sorted(self.versions)},
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Held:
    """A package a platform takes at an older public version than it resolved to on its own, so
    that it matches the other platforms (e.g. torch on Linux held at the last version built for
    Intel macOS). Said, since nothing else would tell why a platform got an old version."""

    name: NormalizedName
    platform: str
    alone: Version  # what the platform resolved to before joint resolution
    version: Version  # what it takes now
    matches: tuple[str, ...]  # the platforms whose version it matches

    def describe(self) -> str:
        return _one_line(
            f"{self.name} {self.version} on {self.platform} (on its own: {self.alone}), "
            f"to match {', '.join(self.matches)}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "package": self.name,
            "platform": self.platform,
            "alone": str(self.alone),
            "version": str(self.version),
            "matches": list(self.matches),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Held:
        return cls(
            canonicalize_name(d["package"]),
            str(d["platform"]),
            Version(d["alone"]),
            Version(d["version"]),
            tuple(str(m) for m in d["matches"]),
        )


def describe_held(held: Sequence[Held]) -> list[str]:
    """One line per package and version held back, naming every platform that took it and the
    platforms that hold it there (those that resolved to it on their own): `torch 2.2.2 on
    linux, windows (on their own: 2.15.0), to match macos-x86_64`. Four platforms held to one
    Intel macOS are one line per package, not one per platform."""
    groups: dict[tuple[str, Version], list[Held]] = {}
    for h in held:
        groups.setdefault((h.name, h.version), []).append(h)
    lines = []
    for (name, version), hs in groups.items():
        platforms = [h.platform for h in hs]
        alones = {str(h.alone) for h in hs}
        alone = alones.pop() if len(alones) == 1 else ", ".join(f"{h.platform} {h.alone}" for h in hs)
        matched = sorted({m for h in hs for m in h.matches})
        binding = [m for m in matched if m not in platforms] or matched
        own = "on its own" if len(hs) == 1 else "on their own"
        lines.append(
            _one_line(
                f"{name} {version} on {', '.join(platforms)} ({own}: {alone}), to match {', '.join(binding)}"
            )
        )
    return lines


def held_back(
    before: Mapping[str, Resolution], after: Mapping[str, Resolution], capped: Mapping[str, Constraints]
) -> list[Held]:
    """The packages joint resolution capped on a platform whose version went down there."""
    versions = {p: {pin.name: pin.version for pin in res.pins} for p, res in after.items()}
    out = []
    for platform, caps in sorted(capped.items()):
        alone = {pin.name: pin.version for pin in before[platform].pins} if platform in before else {}
        for name, spec in sorted(caps.items()):
            now, then = versions.get(platform, {}).get(name), alone.get(name)
            if not spec.startswith("<=") or now is None or then is None or public(now) >= public(then):
                continue
            matches = tuple(
                q
                for q in sorted(versions)
                if q != platform and name in versions[q] and public(versions[q][name]) == public(now)
            )
            out.append(Held(name, platform, then, now, matches))
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def first_cause(error: KernodeckError, platform: str) -> str:
    """The error's message without the `cannot lock platform X: ` prefix."""
    msg = error.message
    prefix = f"cannot lock platform {platform}: "
    return _one_line(msg[len(prefix) :] if msg.startswith(prefix) else msg)


def version_differences(results: Mapping[str, Resolution]) -> dict[NormalizedName, dict[str, Version]]:
    """Packages whose public version differs across the platforms that have them."""
    by: dict[NormalizedName, dict[str, Version]] = {}
    for platform, res in results.items():
        for pin in res.pins:
            by.setdefault(pin.name, {})[platform] = pin.version
    return {n: vs for n, vs in sorted(by.items()) if len({public(v) for v in vs.values()}) > 1}


def align(
    results: Mapping[str, Resolution],
    resolve: Resolve,
    *,
    max_rounds: int = MAX_ROUNDS,
    workers: int = 8,
) -> tuple[dict[str, Resolution], list[Difference], list[Held]]:
    """Re-resolve platforms until each package has one public version wherever it can;
    (the resolutions, the differences that remain, the packages held back to match)."""
    current = dict(results)
    constraints: dict[str, dict[NormalizedName, str]] = {p: {} for p in current}
    reasons: dict[NormalizedName, str] = {}
    settled: set[NormalizedName] = set()

    def attempt(platform: str, extra: dict[NormalizedName, str]) -> Resolution | KernodeckError:
        try:
            return resolve(platform, {**constraints[platform], **extra})
        except KernodeckError as e:
            return e

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kernodeck-joint") as pool:
        for _ in range(max_rounds):
            diffs = {n: vs for n, vs in version_differences(current).items() if n not in settled}
            if not diffs:
                break
            # Down: every platform above the oldest public version is capped at it.
            down: dict[str, dict[NormalizedName, str]] = {}
            for n, vs in diffs.items():
                low = min(public(v) for v in vs.values())
                for p, v in vs.items():
                    if public(v) > low:
                        down.setdefault(p, {})[n] = f"<={low}"
            plats = list(down)
            outcomes = dict(zip(plats, pool.map(attempt, plats, [down[p] for p in plats]), strict=True))
            failed: list[tuple[str, NormalizedName, str, KernodeckError]] = []
            for p, out in outcomes.items():
                if not isinstance(out, KernodeckError):
                    current[p] = out
                    constraints[p].update(down[p])
                    continue
                # Try the caps one at a time: keep those that work, note those that do not.
                for n, spec in sorted(down[p].items()):
                    one = attempt(p, {n: spec})
                    if isinstance(one, KernodeckError):
                        failed.append((p, n, spec, one))
                    else:
                        current[p] = one
                        constraints[p][n] = spec
            # Up: a platform that cannot go down lifts the others to its version instead.
            for p, n, spec, down_error in failed:
                if n in settled:
                    continue
                versions = {q: r.version for q, res in current.items() for r in res.pins if r.name == n}
                if p not in versions:
                    continue
                high = public(versions[p])
                lows = [q for q, v in versions.items() if public(v) < high]
                lifted = {q: attempt(q, {n: f">={high}"}) for q in lows}
                errors = [(q, e) for q, e in lifted.items() if isinstance(e, KernodeckError)]
                if not errors:
                    for q, res in lifted.items():
                        assert not isinstance(res, KernodeckError)
                        current[q] = res
                        constraints[q][n] = f">={high}"
                    continue
                q, up_error = errors[0]
                reasons[n] = (
                    f"{q} cannot take {n}>={high} ({first_cause(up_error, q)}); "
                    f"{p} cannot take {n}{spec} ({first_cause(down_error, p)})"
                )
                settled.add(n)
    remaining = version_differences(current)
    diffs_out = [
        Difference(n, vs, reasons.get(n, f"no common version found in {max_rounds} rounds"))
        for n, vs in remaining.items()
    ]
    return current, diffs_out, held_back(results, current, constraints)
