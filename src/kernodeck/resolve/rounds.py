"""resolvelib's resolver, with its per-round check of every pin remembered.

Each round, resolvelib asks of every project resolved so far whether its pin still satisfies
every requirement on it (twice when the round pins something), so a lock of a few hundred pins
asks the provider hundreds of thousands of times about pairs it has already answered. A
criterion (the requirements on one project) is never changed in place: resolvelib builds a new
one whenever a requirement is added or removed, and a pin is one candidate object. So the answer
for a project is kept with the criterion and the pin it was worked out for, and reused while
both are the same objects; any change of either, backtracking included, works it out again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from resolvelib import Resolver
from resolvelib.resolvers import Resolution
from resolvelib.resolvers.resolution import _build_result


class _Rounds(Resolution):  # type: ignore[type-arg]
    def __init__(self, provider: Any, reporter: Any) -> None:
        super().__init__(provider, reporter)
        self._checked: dict[Any, tuple[Any, Any, bool]] = {}

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
    """`resolvelib.Resolver` whose rounds reuse each project's pin check (see the module)."""

    def resolve(self, requirements: Iterable[Any], max_rounds: int = 100) -> Any:  # type: ignore[override]
        state = _Rounds(self.provider, self.reporter).resolve(requirements, max_rounds=max_rounds)
        return _build_result(state)
