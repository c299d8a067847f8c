"""resolvelib's resolver, with its per-round check of every pin remembered.

Each round, resolvelib asks of every project resolved so far whether its pin still satisfies
every requirement on it (twice when the round pins something), so a lock of a few hundred pins
asks the provider hundreds of thousands of times about pairs it has already answered. A
criterion (the requirements on one project) is never changed in place: resolvelib builds a new
one whenever a requirement is added or removed, and a pin is one candidate object. So the answer
for a project is kept with the criterion and the pin it was worked out for, and reused while
both are the same objects; any change of either, backtracking included, works it out again.

Among valid solutions it prefers the one that keeps direct requirements newest: when a direct
requirement ends more than `WALK_LIMIT` release series (major.minor; patch releases never count)
below the newest it tried, the resolution runs again with the other direct requirements that took
part in its conflicts decided after the rest (the provider's `later`), as uv moves a package that
keeps conflicting ahead of the one it conflicts with, and keeps whichever solution walks its direct
requirements back through fewer release series. Without this, a project decided early (boto3,
alphabetically) keeps its newest patch release while a direct requirement decided later (s3fs)
walks back years to avoid the conflict.
It also counts its rounds, backtracks and restarts (`Counts`, for `lock --stats`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from resolvelib import Resolver
from resolvelib.resolvers import RequirementsConflicted, Resolution, ResolutionImpossible, ResolutionTooDeep
from resolvelib.resolvers.resolution import _build_result

#: A direct requirement pinned below more than this many release series it tried (versions that
#: differ in their first two parts: 2026.7 and 2026.6, not 1.43.123 and 1.43.122) is tried again
#: with the direct requirements it conflicted with decided after it.
WALK_LIMIT = 5
#: How many more resolutions one resolution may run, each with more direct requirements decided later.
MAX_RESTARTS = 2


@dataclass
class Counts:
    """What one resolver did: rounds (states pushed: one per pin, one per backjump), backtracks
    (resolvelib's backjumps) and restarts (resolutions run again with a requirement first)."""

    rounds: int = 0
    backtracks: int = 0
    restarts: int = 0


class _Rounds(Resolution):  # type: ignore[type-arg]
    def __init__(self, provider: Any, reporter: Any, counts: Counts, walks: bool) -> None:
        super().__init__(provider, reporter)
        self._checked: dict[Any, tuple[Any, Any, bool]] = {}
        self._counts = counts
        self._walks = walks
        self._tried: dict[Any, set[tuple[int, ...]]] = {}
        # name -> version -> the direct requirements behind the conflicts met with that version
        self._conflicts: dict[Any, dict[Any, set[Any]]] = {}

    def _get_updated_criteria(self, candidate: Any) -> Any:
        if not self._walks:
            return super()._get_updated_criteria(candidate)
        name = self._p.identify(candidate)
        self._tried.setdefault(name, set()).add(candidate.version.release[:2])
        try:
            return super()._get_updated_criteria(candidate)
        except RequirementsConflicted as e:
            directs = self._directs_in(name, e.criterion.information)
            self._conflicts.setdefault(name, {}).setdefault(candidate.version, set()).update(directs)
            raise

    def _directs_in(self, name: Any, information: Any) -> set[Any]:
        names = [] if name is None else [name]
        for info in information:
            names.append(self._p.identify(info.requirement))
            if info.parent is not None:
                names.append(self._p.identify(info.parent))
        return self._directs_above(names)

    def _directs_above(self, names: list[Any]) -> set[Any]:
        """The direct requirements that `names` are (or come from), through the current state."""
        out, seen = set(), set(names)
        while names:
            criterion = self.state.criteria.get(names.pop())
            for info in criterion.information if criterion is not None else ():
                if info.parent is None:
                    out.add(self._p.identify(info.requirement))
                    continue
                up = self._p.identify(info.parent)
                if up not in seen:
                    seen.add(up)
                    names.append(up)
        return out

    def culprits(self, name: Any) -> set[Any]:
        """The fewest other direct requirements that stood against one version of `name` (the
        newest such version on a tie): those to decide after it."""
        options = [(len(d - {name}), v, d - {name}) for v, d in self._conflicts.get(name, {}).items()]
        options = [o for o in options if o[0]]
        if not options:
            return set()
        fewest = min(o[0] for o in options)
        return max((o for o in options if o[0] == fewest), key=lambda o: o[1])[2]

    def walked_back(self, state: Any) -> dict[Any, int]:
        """Per direct requirement: how many release series newer than its pin it tried."""
        out = {}
        for name, criterion in state.criteria.items():
            pin = state.mapping.get(name)
            if pin is None or all(info.parent is not None for info in criterion.information):
                continue
            series = pin.version.release[:2]
            out[name] = sum(1 for t in self._tried.get(name, ()) if t > series)
        return out

    def _push_new_state(self) -> None:
        self._counts.rounds += 1
        super()._push_new_state()

    def _backjump(self, causes: Any) -> bool:
        self._counts.backtracks += 1
        if self._walks:
            directs = self._directs_in(None, causes)
            for n in directs:
                pin = self.state.mapping.get(n)
                if pin is not None:
                    self._conflicts.setdefault(n, {}).setdefault(pin.version, set()).update(directs)
        ok: bool = super()._backjump(causes)
        return ok

    def _is_current_pin_satisfying(self, name: Any, criterion: Any) -> bool:
        pin = self.state.mapping.get(name)
        if pin is None:
            return False
        seen = self._checked.get(name)
        if seen is not None and seen[0] is criterion and seen[1] is pin:
            return seen[2]
        ok: bool = super()._is_current_pin_satisfying(name, criterion)
        self._checked[name] = (criterion, pin, ok)
        return ok


class RememberingResolver(Resolver):  # type: ignore[type-arg]
    """`resolvelib.Resolver` whose rounds reuse each project's pin check (see the module). With
    `later` (the list the provider ranks after the other direct requirements): when a direct
    requirement ends more than `WALK_LIMIT` release series below the newest it tried, the
    resolution runs again with the direct requirements it conflicted with added to `later`, and
    that solution is kept only when its direct requirements are walked back through fewer release
    series in all (at most `MAX_RESTARTS` more runs)."""

    def __init__(self, provider: Any, reporter: Any, later: list[str] | None = None) -> None:
        super().__init__(provider, reporter)
        self.later = later
        self.counts = Counts()

    def _run(self, roots: list[Any], max_rounds: int) -> tuple[Any, dict[Any, int], _Rounds]:
        rounds = _Rounds(self.provider, self.reporter, self.counts, self.later is not None)
        state = rounds.resolve(roots, max_rounds=max_rounds)
        return state, rounds.walked_back(state) if self.later is not None else {}, rounds

    def resolve(self, requirements: Iterable[Any], max_rounds: int = 100) -> Any:  # type: ignore[override]
        roots = list(requirements)
        state, walked, rounds = self._run(roots, max_rounds)
        later = self.later
        while later is not None and self.counts.restarts < MAX_RESTARTS:
            far = sorted((-n, name) for name, n in walked.items() if n > WALK_LIMIT and name not in later)
            culprits = sorted(rounds.culprits(far[0][1]) - set(later)) if far else []
            if not culprits:
                break
            later.extend(culprits)
            self.counts.restarts += 1
            try:
                again, walked_again, rounds = self._run(roots, max_rounds)
            except (ResolutionImpossible, ResolutionTooDeep):
                again, walked_again = None, {}
            if again is None or sum(walked_again.values()) >= sum(walked.values()):
                del later[-len(culprits) :]  # no better: the first solution stands
                break
            state, walked = again, walked_again
        return _build_result(state)
