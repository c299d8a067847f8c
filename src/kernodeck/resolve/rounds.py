"""resolvelib's resolver, with its per-round check of every pin remembered.

Each round, resolvelib asks of every project resolved so far whether its pin still satisfies
every requirement on it (twice when the round pins something), so a lock of a few hundred pins
asks the provider hundreds of thousands of times about pairs it has already answered. A
criterion (the requirements on one project) is never changed in place: resolvelib builds a new
one whenever a requirement is added or removed, and a pin is one candidate object. So the answer
for a project is kept with the criterion and the pin it was worked out for, and reused while
both are the same objects; any change of either, backtracking included, works it out again.

A resolution also decides a direct requirement first when it had to walk it back through more
than `WALK_LIMIT` release series (major.minor; walking back patch releases never counts): it
starts again with that project ahead of the other direct requirements (the provider's `first`),
as uv does for a package that keeps conflicting. Without this, a project decided early (boto3,
alphabetically) keeps its newest patch release while a direct requirement decided later (s3fs)
walks back years to a release that avoids the conflict.
It also counts its rounds, backtracks and restarts (`Counts`, for `lock --stats`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from resolvelib import Resolver
from resolvelib.resolvers import Resolution
from resolvelib.resolvers.resolution import _build_result

#: A direct requirement walked back through more release series than this (versions that differ
#: in their first two parts: 2026.7 and 2026.6, not 1.43.123 and 1.43.122) is decided first next time.
WALK_LIMIT = 5
#: How many times one resolution starts again with a direct requirement moved first.
MAX_RESTARTS = 4


@dataclass
class Counts:
    """What one resolver did: rounds (states pushed: one per pin, one per backjump), backtracks
    (resolvelib's backjumps) and restarts."""

    rounds: int = 0
    backtracks: int = 0
    restarts: int = 0


class _WalkedBack(Exception):
    """Internal: direct requirement `name` was walked back too far; start again with it first."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Rounds(Resolution):  # type: ignore[type-arg]
    def __init__(self, provider: Any, reporter: Any, counts: Counts, first: list[str] | None) -> None:
        super().__init__(provider, reporter)
        self._checked: dict[Any, tuple[Any, Any, bool]] = {}
        self._counts = counts
        self._first = first
        self._tried: dict[Any, set[Any]] = {}

    def _get_updated_criteria(self, candidate: Any) -> Any:
        if self._first is not None:
            self._note_tried(self._p.identify(candidate), candidate)
        return super()._get_updated_criteria(candidate)

    def _note_tried(self, name: Any, candidate: Any) -> None:
        tried = self._tried.setdefault(name, set())
        tried.add(candidate.version.release[:2])
        if len(tried) <= WALK_LIMIT or name in (self._first or ()):
            return
        criterion = self.state.criteria.get(name)
        if criterion is not None and any(info.parent is None for info in criterion.information):
            raise _WalkedBack(name)

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
    `first` (the list the provider ranks ahead of the other direct requirements), a direct
    requirement walked back through more than `WALK_LIMIT` release series is appended to it and the
    resolution starts again, at most `MAX_RESTARTS` times."""

    def __init__(self, provider: Any, reporter: Any, first: list[str] | None = None) -> None:
        super().__init__(provider, reporter)
        self.first = first
        self.counts = Counts()

    def resolve(self, requirements: Iterable[Any], max_rounds: int = 100) -> Any:  # type: ignore[override]
        roots = list(requirements)
        while True:
            restart = self.first is not None and self.counts.restarts < MAX_RESTARTS
            rounds = _Rounds(self.provider, self.reporter, self.counts, self.first if restart else None)
            try:
                state = rounds.resolve(roots, max_rounds=max_rounds)
            except _WalkedBack as e:
                assert self.first is not None  # only raised with a list to add to
                self.first.append(e.name)
                self.counts.restarts += 1
                continue
            return _build_result(state)
