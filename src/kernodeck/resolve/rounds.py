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
below the newest it tried, the resolution runs again with that project decided ahead of the other
direct requirements (the provider's `first`), as uv does for a package that keeps conflicting,
and keeps whichever solution walks its direct requirements back through fewer release series.
Without this, a project decided early (boto3, alphabetically) keeps its newest patch release
while a direct requirement decided later (s3fs) walks back years to avoid the conflict.
It also counts its rounds, backtracks and restarts (`Counts`, for `lock --stats`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from resolvelib import Resolver
from resolvelib.resolvers import Resolution, ResolutionImpossible, ResolutionTooDeep
from resolvelib.resolvers.resolution import _build_result

#: A direct requirement pinned below more than this many release series it tried (versions that
#: differ in their first two parts: 2026.7 and 2026.6, not 1.43.123 and 1.43.122) is tried first.
WALK_LIMIT = 5
#: How many more resolutions one resolution may run, each with one direct requirement moved first.
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

    def _get_updated_criteria(self, candidate: Any) -> Any:
        if self._walks:
            self._tried.setdefault(self._p.identify(candidate), set()).add(candidate.version.release[:2])
        return super()._get_updated_criteria(candidate)

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
    `first` (the list the provider ranks ahead of the other direct requirements): when a direct
    requirement ends more than `WALK_LIMIT` release series below the newest it tried, the
    resolution runs again with it appended to `first`, and that solution is kept only when its
    direct requirements are walked back through fewer release series in all (at most
    `MAX_RESTARTS` more runs)."""

    def __init__(self, provider: Any, reporter: Any, first: list[str] | None = None) -> None:
        super().__init__(provider, reporter)
        self.first = first
        self.counts = Counts()

    def _run(self, roots: list[Any], max_rounds: int) -> tuple[Any, dict[Any, int]]:
        rounds = _Rounds(self.provider, self.reporter, self.counts, self.first is not None)
        state = rounds.resolve(roots, max_rounds=max_rounds)
        return state, rounds.walked_back(state) if self.first is not None else {}

    def resolve(self, requirements: Iterable[Any], max_rounds: int = 100) -> Any:  # type: ignore[override]
        roots = list(requirements)
        state, walked = self._run(roots, max_rounds)
        first = self.first
        while first is not None and self.counts.restarts < MAX_RESTARTS:
            far = sorted((-n, name) for name, n in walked.items() if n > WALK_LIMIT and name not in first)
            if not far:
                break
            first.append(far[0][1])
            self.counts.restarts += 1
            try:
                again, walked_again = self._run(roots, max_rounds)
            except (ResolutionImpossible, ResolutionTooDeep):
                walked_again = {}
                again = None
            if again is None or sum(walked_again.values()) >= sum(walked.values()):
                first.pop()  # no better: the first solution stands
                break
            state, walked = again, walked_again
        return _build_result(state)
