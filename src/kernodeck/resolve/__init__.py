"""Resolution of a manifest's requirements for one target with resolvelib.

`resolve_target(session, target)` returns the pins (one candidate per project, with every file
installable on the target and the parents that required it) or raises ResolutionError with the
requirement chain. The session (one index client, caches) is shared by every target of a lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.utils import NormalizedName
from resolvelib import BaseReporter
from resolvelib.resolvers import ResolutionImpossible, ResolutionTooDeep

from kernodeck.errors import ResolutionError
from kernodeck.resolve.candidates import BaseCandidate, Candidate, base_of
from kernodeck.resolve.explain import explain_impossible
from kernodeck.resolve.factory import Factory, ResolveSettings, Routing, Session
from kernodeck.resolve.follow import Follower
from kernodeck.resolve.provider import Provider
from kernodeck.resolve.requirements import BaseRequirement
from kernodeck.resolve.rounds import RememberingResolver

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.version import Version

    from kernodeck.targets import Target

__all__ = [
    "Follower",
    "Pin",
    "Resolution",
    "ResolveSettings",
    "Routing",
    "Session",
    "follow_target",
    "resolve_target",
]

MAX_ROUNDS = 200_000


@dataclass(frozen=True)
class Pin:
    candidate: Candidate
    via: tuple[str, ...]  # "-r <manifest>" first, then parent project names, sorted

    @property
    def name(self) -> NormalizedName:
        return self.candidate.name

    @property
    def version(self) -> Version:
        return self.candidate.version


@dataclass(frozen=True)
class Resolution:
    target: Target
    pins: tuple[Pin, ...]  # sorted by name
    metadata_reads: int = 0


class _Reporter(BaseReporter[BaseRequirement, BaseCandidate, str]):
    def __init__(
        self, on_pin: Callable[[str], None] | None, on_candidate: Callable[[Candidate], None] | None = None
    ) -> None:
        self.on_pin = on_pin
        self.on_candidate = on_candidate

    def pinning(self, candidate: BaseCandidate) -> None:
        base = base_of(candidate)
        if base is None:
            return
        if self.on_pin is not None:
            self.on_pin(candidate.describe())
        if self.on_candidate is not None:
            self.on_candidate(base)


def resolve_target(
    session: Session,
    target: Target,
    *,
    preferred: Mapping[str, Version] | None = None,
    manifest_name: str = "repro.toml",
    on_pin: Callable[[str], None] | None = None,
    on_metadata: Callable[[], None] | None = None,
    extra_constraints: Sequence[Requirement] = (),
    on_candidate: Callable[[Candidate], None] | None = None,
    on_likely: Callable[[NormalizedName, Version], None] | None = None,
) -> Resolution:
    """Resolve the manifest for `target`; `extra_constraints` apply to this target only (joint
    resolution narrows one platform's versions with them). `on_candidate` hears of each version
    pinned on the way, `on_likely` of each version whose metadata is read ahead of the resolver
    (followers start their reads with both)."""
    factory = Factory(
        session, target, preferred=preferred, on_metadata=on_metadata, extra_constraints=extra_constraints
    )
    factory.on_likely = on_likely
    provider = Provider(factory)
    resolver = RememberingResolver(provider, _Reporter(on_pin, on_candidate), provider.later)
    roots = factory.root_requirements()
    started = time.thread_time()
    try:
        result = resolver.resolve(roots, max_rounds=MAX_ROUNDS)
    except ResolutionImpossible as e:
        raise explain_impossible(e.causes, factory, manifest_name) from None
    except ResolutionTooDeep as e:
        raise ResolutionError(
            f"cannot lock platform {target.name}: gave up after {e.round_count} resolution rounds",
            hint="narrow the requirements (upper bounds, constraints) so fewer combinations need trying",
        ) from None
    finally:
        session.add_cpu("resolution", time.thread_time() - started)
        session.add_counts(resolver.counts)

    information = {ident: list(c.information) for ident, c in result.criteria.items()}
    return Resolution(target=target, pins=_pins(result.mapping, information, manifest_name))


def follow_target(
    session: Session,
    target: Target,
    leader: Resolution,
    *,
    preferred: Mapping[str, Version] | None = None,
    manifest_name: str = "repro.toml",
    on_pin: Callable[[str], None] | None = None,
    on_metadata: Callable[[], None] | None = None,
    extra_constraints: Sequence[Requirement] = (),
    follower: Follower | None = None,
) -> Resolution | None:
    """`target` locked with the leader's versions, or None when it needs its own resolution
    (`kernodeck.resolve.follow`). `follower`: one made before the leader was resolved (its reads
    started as the leader pinned); the other arguments are then its own."""
    if follower is None:
        follower = Follower(
            session,
            target,
            preferred=preferred,
            on_pin=on_pin,
            on_metadata=on_metadata,
            extra_constraints=extra_constraints,
        )
    walked = follower.walk(leader)
    if walked is None:
        return None
    mapping, information = walked
    return Resolution(target=target, pins=_pins(mapping, information, manifest_name))


def _pins(
    mapping: Mapping[str, BaseCandidate],
    information: Mapping[str, Iterable[tuple[BaseRequirement, BaseCandidate | None]]],
    manifest_name: str,
) -> tuple[Pin, ...]:
    """One pin per project, each with what required it: the manifest first, then parents."""
    manifest_parent = f"-r {manifest_name}"
    parents: dict[NormalizedName, set[str]] = {}
    for ident, infos in information.items():
        cand = mapping.get(ident)
        base = base_of(cand) if cand is not None else None
        if base is None:
            continue
        for _req, parent in infos:
            if parent is None:
                parents.setdefault(base.name, set()).add(manifest_parent)
                continue
            pb = base_of(parent)
            if pb is None or pb.name == base.name:
                continue
            parents.setdefault(base.name, set()).add(pb.name)

    pins = []
    for cand in mapping.values():
        if not isinstance(cand, Candidate):
            continue
        via = parents.get(cand.name, set())
        ordered = ([manifest_parent] if manifest_parent in via else []) + sorted(via - {manifest_parent})
        pins.append(Pin(cand, tuple(ordered)))
    pins.sort(key=lambda p: p.name)
    return tuple(pins)
