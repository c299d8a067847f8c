"""The resolvelib provider: resolvelib's API and nothing else. The factory does all the I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from resolvelib.providers import AbstractProvider

from kernodeck.resolve.candidates import PYTHON_IDENTIFIER, BaseCandidate
from kernodeck.resolve.requirements import BaseRequirement

if TYPE_CHECKING:
    from resolvelib.structs import RequirementInformation

    Info = RequirementInformation[BaseRequirement, BaseCandidate]


class CandidateSource(Protocol):
    """What the provider asks of the factory."""

    def find_matches(
        self,
        identifier: str,
        requirements: Sequence[BaseRequirement],
        incompatibilities: Sequence[BaseCandidate],
    ) -> Callable[[], Iterator[BaseCandidate]]: ...

    def get_dependencies(self, candidate: BaseCandidate) -> list[BaseRequirement]: ...


Preference = tuple[bool, bool, bool, bool, bool, str]


class Provider(AbstractProvider[BaseRequirement, BaseCandidate, str]):
    """Decides the order of work; candidate order (newest first, existing pins first) comes from
    the factory. Preferences end in the identifier, so the order is repeatable. `later`: direct
    requirements decided after the other direct ones (the resolver adds those that conflicted
    with a direct requirement it had to walk back too far: `kernodeck.resolve.rounds`)."""

    def __init__(self, source: CandidateSource) -> None:
        self.source = source
        self.later: list[str] = []

    def identify(self, requirement_or_candidate: BaseRequirement | BaseCandidate) -> str:
        return requirement_or_candidate.identifier

    def get_preference(
        self,
        identifier: str,
        resolutions: Mapping[str, BaseCandidate],
        candidates: Mapping[str, Iterator[BaseCandidate]],
        information: Mapping[str, Iterator[Info]],
        backtrack_causes: Sequence[Info],
    ) -> Preference:
        infos = list(information[identifier])
        pinned = any(info.requirement.pinned_exactly for info in infos)
        direct = any(info.parent is None for info in infos)
        in_causes = any(
            identifier in (c.requirement.identifier, c.parent.identifier if c.parent else None)
            for c in backtrack_causes
        )
        # Smallest first: the interpreter, conflict causes, exact pins, direct requirements (those
        # in `later` after the others), then the rest.
        return (
            identifier != PYTHON_IDENTIFIER,
            not in_causes,
            not pinned,
            not direct,
            identifier in self.later,
            identifier,
        )

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[BaseRequirement]],
        incompatibilities: Mapping[str, Iterator[BaseCandidate]],
    ) -> Callable[[], Iterator[BaseCandidate]]:
        return self.source.find_matches(
            identifier,
            list(requirements[identifier]),
            list(incompatibilities[identifier]),
        )

    def is_satisfied_by(self, requirement: BaseRequirement, candidate: BaseCandidate) -> bool:
        return requirement.is_satisfied_by(candidate)

    def get_dependencies(self, candidate: BaseCandidate) -> Iterable[BaseRequirement]:
        return self.source.get_dependencies(candidate)

    def narrow_requirement_selection(
        self,
        identifiers: Iterable[str],
        resolutions: Mapping[str, BaseCandidate],
        candidates: Mapping[str, Iterator[BaseCandidate]],
        information: Mapping[str, Iterator[Info]],
        backtrack_causes: Sequence[Info],
    ) -> Iterable[str]:
        ids = list(identifiers)
        # The interpreter check is cheap and decisive: do it first (as pip does).
        if PYTHON_IDENTIFIER in ids:
            return [PYTHON_IDENTIFIER]
        if backtrack_causes:
            causes = {c.requirement.identifier for c in backtrack_causes} | {
                c.parent.identifier for c in backtrack_causes if c.parent is not None
            }
            hit = [i for i in ids if i in causes]
            if hit:
                return hit
        return ids
