"""The resolver's rounds (`kernodeck.resolve.rounds`): each project's pin check is remembered per
criterion and pin, so the provider is asked far less, and every resolution, backtracking
included, comes out exactly as resolvelib's own resolver makes it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from resolvelib import AbstractProvider, BaseReporter, Resolver
from resolvelib.resolvers import ResolutionImpossible

from kernodeck.resolve.rounds import RememberingResolver

# name -> version -> requirements (name, allowed versions); versions are tried newest first
Index = dict[str, dict[int, list[tuple[str, frozenset[int]]]]]


def _chain(width: int) -> Index:
    """`app` needs `p0..p{width-1}`; every `p{i}` 2 needs `base` 1 but `p{width-1}` 2 needs base 2
    (and older releases need base 1): the newest of everything conflicts, so the resolver
    backtracks."""
    index: Index = {"app": {1: [(f"p{i}", frozenset({1, 2})) for i in range(width)]}}
    for i in range(width):
        index[f"p{i}"] = {2: [("base", frozenset({1}))], 1: [("base", frozenset({1}))]}
    index[f"p{width - 1}"][2] = [("base", frozenset({2}))]
    index["base"] = {2: [], 1: []}
    return index


class _Provider(AbstractProvider):  # type: ignore[type-arg]
    def __init__(self, index: Index) -> None:
        self.index = index
        self.checks = 0

    def identify(self, requirement_or_candidate: Any) -> str:
        return str(requirement_or_candidate[0])

    def get_preference(self, identifier: str, *args: Any, **kwargs: Any) -> Any:
        return identifier

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[Any]],
        incompatibilities: Mapping[str, Iterator[Any]],
    ) -> Iterable[Any]:
        allowed = set(self.index[identifier])
        for _, versions in requirements[identifier]:
            allowed &= versions
        bad = {v for _, v in incompatibilities[identifier]}
        return [(identifier, v) for v in sorted(allowed - bad, reverse=True)]

    def is_satisfied_by(self, requirement: Any, candidate: Any) -> bool:
        self.checks += 1
        return bool(candidate[1] in requirement[1])

    def get_dependencies(self, candidate: Any) -> Sequence[Any]:
        return self.index[candidate[0]][candidate[1]]


def _resolve(cls: type[Resolver], index: Index) -> tuple[dict[str, Any], int]:  # type: ignore[type-arg]
    provider = _Provider(index)
    result = cls(provider, BaseReporter()).resolve([("app", frozenset({1}))], max_rounds=10_000)
    return dict(result.mapping), provider.checks


@pytest.mark.parametrize("width", [3, 30])
def test_same_pins_as_resolvelib_with_far_fewer_checks(width: int) -> None:
    theirs, their_checks = _resolve(Resolver, _chain(width))
    ours, our_checks = _resolve(RememberingResolver, _chain(width))
    assert ours == theirs
    assert ours["base"] == ("base", 1) and ours[f"p{width - 1}"] == (f"p{width - 1}", 1)  # the newest lost
    if width == 30:
        assert our_checks * 3 < their_checks  # resolvelib re-checks every pin every round


def test_a_conflict_is_reported_as_resolvelib_reports_it() -> None:
    index = _chain(3)
    index["p2"] = {2: [("base", frozenset({3}))]}  # no such base: impossible
    with pytest.raises(ResolutionImpossible) as theirs:
        _resolve(Resolver, index)
    with pytest.raises(ResolutionImpossible) as ours:
        _resolve(RememberingResolver, index)
    assert [c.requirement for c in ours.value.causes] == [c.requirement for c in theirs.value.causes]


def test_rounds_and_backtracks_are_counted_and_nothing_is_run_again_without_first() -> None:
    """`Counts` for `lock --stats`: `x` 2 is pinned first, then `y` (one release) cannot go with
    its `z`, so the resolver backjumps to `x` 1; with no `first` list it never runs again."""
    index: Index = {
        "app": {1: [("x", frozenset({1, 2})), ("y", frozenset({1}))]},
        "x": {2: [("z", frozenset({2}))], 1: [("z", frozenset({1}))]},
        "y": {1: [("z", frozenset({1}))]},
        "z": {2: [], 1: []},
    }
    resolver = RememberingResolver(_Provider(index), BaseReporter())
    result = resolver.resolve([("app", frozenset({1}))], max_rounds=10_000)
    assert result.mapping["x"] == ("x", 1) and result.mapping["z"] == ("z", 1)
    assert resolver.counts.backtracks > 0
    assert resolver.counts.rounds > len(result.mapping)  # a backjump pushes a state too
    assert resolver.counts.restarts == 0
