"""Joint resolution: one version of each package on every platform that has it, when one exists.

Every platform is first resolved on its own. Then, while a package present on several platforms
has different public versions there (local labels such as `+cpu`/`+cu126` are part of the backend
and may differ), the platforms that got a newer version are resolved again with `name<=V`, V the
oldest public version among them; a platform that cannot go down (no solution) instead lifts the
others with `name>=W`, W its version. Constraints only accumulate, so the rounds reach a fixpoint;
they are bounded all the same (`MAX_ROUNDS`).

A package that still differs is then settled by trying each version that every platform involved
has files for, newest first (`name==V` on each). A difference is kept only when that fails, and its
reason claims only what was established: no version with files for all of them; a version each
can take alone but not with the versions aligned for other packages; a version that only the
preferred pins of the existing lock files keep out (named, with `--upgrade-package`); or the
versions tried and the first failure among them. "No common version" is never said of a search that
merely stopped.

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
Resolve = Callable[..., "Resolution"]  # (platform, constraints, *, preferred: bool = True)
Installable = Callable[[str, NormalizedName], Sequence[Version]]


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
            if (
                not spec.startswith(("<=", "=="))
                or now is None
                or then is None
                or public(now) >= public(then)
            ):
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


class _Aligner:
    """The state of one joint resolution: each platform's resolution now, the constraints that
    brought it there, the reasons of the differences that stay."""

    def __init__(
        self,
        results: Mapping[str, Resolution],
        resolve: Resolve,
        installable: Installable | None,
        preferred: Mapping[str, Mapping[str, Version]],
        pool: ThreadPoolExecutor,
    ) -> None:
        self.current = dict(results)
        self.constraints: dict[str, dict[NormalizedName, str]] = {p: {} for p in results}
        self.reasons: dict[NormalizedName, str] = {}
        self.settled: set[NormalizedName] = set()
        self._resolve = resolve
        self._installable = installable
        self._preferred = preferred
        self._pool = pool

    def attempt(
        self, platform: str, extra: Constraints, *, others: bool = True, preferred: bool = True
    ) -> Resolution | KernodeckError:
        """`platform` resolved with `extra` over the constraints gathered so far (`others`) or
        alone, with its preferred pins or without; the error when it cannot be."""
        base = self.constraints[platform] if others else {}
        try:
            if preferred:
                return self._resolve(platform, {**base, **extra})
            return self._resolve(platform, {**base, **extra}, preferred=False)
        except KernodeckError as e:
            return e

    def _take(self, platform: str, res: Resolution, extra: Constraints) -> None:
        self.current[platform] = res
        self.constraints[platform].update(extra)

    def run_round(self) -> bool:
        """One round of down, then up; whether anything moved (else another round is the same)."""
        diffs = {n: vs for n, vs in version_differences(self.current).items() if n not in self.settled}
        if not diffs:
            return False
        before = {p: dict(c) for p, c in self.constraints.items()}
        settled = len(self.settled)
        failed = self._down(diffs)
        self._up(failed)
        return before != self.constraints or len(self.settled) != settled

    def _down(self, diffs: Mapping[NormalizedName, Mapping[str, Version]]) -> list[_Failed]:
        """Every platform above the oldest public version of a package is capped at it; the caps
        a platform cannot take are returned."""
        down: dict[str, dict[NormalizedName, str]] = {}
        for n, vs in diffs.items():
            low = min(public(v) for v in vs.values())
            for p, v in vs.items():
                if public(v) > low:
                    down.setdefault(p, {})[n] = f"<={low}"
        plats = list(down)
        outcomes = self._pool.map(self.attempt, plats, [down[p] for p in plats])
        failed: list[_Failed] = []
        for p, out in zip(plats, outcomes, strict=True):
            if not isinstance(out, KernodeckError):
                self._take(p, out, down[p])
                continue
            # Try the caps one at a time: keep those that work, note those that do not.
            for n, spec in sorted(down[p].items()):
                one = self.attempt(p, {n: spec})
                if isinstance(one, KernodeckError):
                    failed.append((p, n, spec, one))
                else:
                    self._take(p, one, {n: spec})
        return failed

    def _up(self, failed: Sequence[_Failed]) -> None:
        """A platform that cannot go down lifts the others to its version instead."""
        for p, n, spec, down_error in failed:
            if n in self.settled:
                continue
            versions = {q: r.version for q, res in self.current.items() for r in res.pins if r.name == n}
            if p not in versions:
                continue
            high = public(versions[p])
            lows = [q for q, v in versions.items() if public(v) < high]
            lifted = {q: self.attempt(q, {n: f">={high}"}) for q in lows}
            errors = [(q, e) for q, e in lifted.items() if isinstance(e, KernodeckError)]
            if not errors:
                for q, res in lifted.items():
                    assert not isinstance(res, KernodeckError)
                    self._take(q, res, {n: f">={high}"})
                continue
            q, up_error = errors[0]
            # what these two attempts established; `settle` looks for a version between them
            self.reasons[n] = (
                f"{q} cannot take {n}>={high} ({first_cause(up_error, q)}); "
                f"{p} cannot take {n}{spec} ({first_cause(down_error, p)})"
            )
            self.settled.add(n)

    def settle(self, n: NormalizedName, versions: Mapping[str, Version]) -> str | None:
        """A package that still differs: try each version every platform involved has files for,
        newest first; None when one is taken everywhere, else the reason, claiming only what the
        attempts established."""
        plats = sorted(versions)
        if self._installable is None:
            return self.reasons.get(n)
        having = {p: list(self._installable(p, n)) for p in plats}
        common = sorted(set.intersection(*(set(vs) for vs in having.values())), reverse=True)
        if not common:
            each = "; ".join(f"{p}: {_versions(vs)}" for p, vs in having.items())
            return f"no version of {n} has files for all of {', '.join(plats)} ({each})"
        failures: list[str] = []
        for v in common[:SETTLE_TRIES]:
            outcome = self._try_everywhere(n, v, plats)
            if outcome is None:
                return None
            failures.append(outcome)
        reason = self._blocked(n, common[:SETTLE_TRIES], plats)
        if reason is not None:
            return reason
        left = len(common) - SETTLE_TRIES
        tried = f"{_versions(common[:SETTLE_TRIES])}" + (f"; {left} older not tried" if left > 0 else "")
        return (
            f"none of the versions of {n} that every platform has files for could be locked on all of "
            f"them (tried {tried}): {failures[0]}"
        )

    def _try_everywhere(self, n: NormalizedName, v: Version, plats: Sequence[str]) -> str | None:
        """`n==v` taken on every platform (None), else the first failure in words."""
        spec = {n: f"=={v}"}
        outs = list(self._pool.map(lambda p: self.attempt(p, spec), plats))
        bad = [(p, o) for p, o in zip(plats, outs, strict=True) if isinstance(o, KernodeckError)]
        if not bad:
            for p, out in zip(plats, outs, strict=True):
                assert not isinstance(out, KernodeckError)
                # the constraints that kept it elsewhere are replaced by the exact version
                self._take(p, out, spec)
            return None
        p, err = bad[0]
        return f"{n} {v} on {p}: {first_cause(err, p)}"

    def _blocked(self, n: NormalizedName, tried: Sequence[Version], plats: Sequence[str]) -> str | None:
        """Why versions each platform could take on its own are not taken: the versions aligned
        for other packages, or the preferred pins of the existing lock files."""
        for v in tried:
            spec = {n: f"=={v}"}
            alone = [self.attempt(p, spec, others=False) for p in plats]
            if all(not isinstance(o, KernodeckError) for o in alone):
                held = sorted({m for p in plats for m in self.constraints[p] if m != n})
                return (
                    f"{n} {v} can be locked on each of {', '.join(plats)}, but not together with the "
                    f"versions aligned for {', '.join(held) or 'other packages'}"
                )
            free = {p: self.attempt(p, spec, others=False, preferred=False) for p in plats}
            if any(isinstance(o, KernodeckError) for o in free.values()):
                continue
            pins = self._blocking_pins(free)  # type: ignore[arg-type]
            return (
                f"{n} {v} can be locked on all of {', '.join(plats)} only without the pins preferred from "
                f"the existing lock files ({pins}): release them with `--upgrade-package NAME` "
                "(or all with `--upgrade`)"
            )
        return None

    def _blocking_pins(self, free: Mapping[str, Resolution]) -> str:
        """The preferred pins a resolution without preferences moved away from, in words."""
        moved: dict[str, set[str]] = {}
        for p, res in sorted(free.items()):
            taken = {pin.name: pin.version for pin in res.pins}
            for name, v in sorted(self._preferred.get(p, {}).items()):
                now = taken.get(canonicalize_name(name))
                if now is not None and now != v:
                    moved.setdefault(f"{name}=={v}", set()).add(p)
        return "; ".join(f"{pin} on {', '.join(sorted(ps))}" for pin, ps in moved.items()) or "none moved"


_Failed = tuple[str, NormalizedName, str, KernodeckError]

# Versions a package that still differs tries on every platform (newest first) before its
# difference is kept; each try resolves every platform involved once.
SETTLE_TRIES = 4


def _versions(vs: Sequence[Version]) -> str:
    shown = ", ".join(str(v) for v in vs[:6])
    return shown + (f" ({len(vs) - 6} more)" if len(vs) > 6 else "") if vs else "none"


def align(
    results: Mapping[str, Resolution],
    resolve: Resolve,
    *,
    installable: Installable | None = None,
    preferred: Mapping[str, Mapping[str, Version]] | None = None,
    max_rounds: int = MAX_ROUNDS,
    workers: int = 8,
) -> tuple[dict[str, Resolution], list[Difference], list[Held]]:
    """Re-resolve platforms until each package has one public version wherever it can;
    (the resolutions, the differences that remain, the packages held back to match).

    `installable(platform, name)`: the public versions of `name` the platform has files for,
    newest first (pre-releases only where allowed). With it, a difference is kept only after
    every version the platforms share (up to SETTLE_TRIES) was tried on all of them, and its
    reason says what those attempts established; without it, what the rounds established."""
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="kernodeck-joint") as pool:
        state = _Aligner(results, resolve, installable, preferred or {}, pool)
        for _ in range(max_rounds):
            if not state.run_round():
                break
        reasons: dict[NormalizedName, str] = {}
        for _ in range(max_rounds):
            open_ = {n: vs for n, vs in version_differences(state.current).items() if n not in reasons}
            if not open_:
                break
            for n, vs in open_.items():
                reason = state.settle(n, vs)
                if reason is not None:
                    reasons[n] = reason
    remaining = version_differences(state.current)
    diffs_out = [
        Difference(
            n,
            vs,
            reasons.get(n)
            or f"joint resolution stopped after {max_rounds} rounds without aligning it; "
            "a common version may exist",
        )
        for n, vs in remaining.items()
    ]
    return state.current, diffs_out, held_back(results, state.current, state.constraints)
