"""Another platform's lock checked against a resolved one instead of searched for again.

When versions are to be the same on every platform (`same-versions` "prefer" or "require"), the
versions of the first platform resolved (the leader) are what the others should take. For each
other platform, `follow` walks the dependency graph from the manifest's requirements as that
platform sees them (its markers, its files, its index), taking the leader's version of each
project (the same public version: local labels such as `+cpu`/`+cu126` may differ) and, for a
project the leader does not have (`colorama` on Windows, `appnope` on macOS), the version a
resolution would try first (an existing pin, else the newest allowed). Every requirement met along
the way is checked against the version taken; the first one that is not met, a project without a
usable file, or a leader version that this platform cannot install ends the walk with None, and the
caller resolves that platform with the full resolver instead. A walk that ends is a resolution:
each requirement of every pinned project is satisfied on this platform.

The walk does work proportional to the graph (each requirement once), where the resolver re-checks
every pin on every round; metadata reads for the leader's versions start at once, all together.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from kernodeck.resolve.candidates import BaseCandidate, base_of
from kernodeck.resolve.factory import Factory, Session
from kernodeck.resolve.requirements import BaseRequirement

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from kernodeck.resolve import Resolution
    from kernodeck.targets import Target

# (requirement, the candidate that requires it; None for the manifest)
Information = tuple[BaseRequirement, BaseCandidate | None]


class Follower:
    """One platform that will follow the leader. Created before the leader is resolved, so that
    each version the leader pins starts this platform's page and metadata reads at once (`ahead`),
    while the leader is still working; `walk` then checks the leader's final versions."""

    def __init__(
        self,
        session: Session,
        target: Target,
        *,
        preferred: Mapping[str, Version] | None = None,
        on_pin: Callable[[str], None] | None = None,
        on_metadata: Callable[[], None] | None = None,
        extra_constraints: Sequence[Requirement] = (),
    ) -> None:
        self.target = target
        self.own: dict[NormalizedName, Version] = {
            canonicalize_name(k): v for k, v in (preferred or {}).items()
        }
        self.factory = Factory(
            session,
            target,
            preferred=dict(self.own.items()),
            on_metadata=on_metadata,
            extra_constraints=extra_constraints,
        )
        self.factory.deep_lookahead = False  # it reads what the leader pins (`ahead`)
        self._on_pin = on_pin

    def ahead(self, name: NormalizedName, version: Version) -> None:
        """The leader pinned `name==version`: load this platform's files and metadata for it."""
        own = self.own.get(name)
        if own is not None and own.public != version.public:
            return
        self.factory.preferred[name] = version
        self.factory.prefetch_version(name, version)

    def walk(
        self, leader: Resolution
    ) -> tuple[dict[str, BaseCandidate], dict[str, list[Information]]] | None:
        """(candidate per identifier, what required each) with the leader's versions, or None
        when the full resolver must decide (see the module docstring)."""
        led: dict[NormalizedName, Version] = {p.name: p.version for p in leader.pins}
        if any(n in led and led[n].public != v.public for n, v in self.own.items()):
            return None  # this platform's own lock differs from the leader's: let the resolver weigh it
        factory = self.factory
        # the leader's final versions (it may have moved away from some it pinned on the way)
        factory.preferred = {**self.own, **led}
        roots = factory.root_requirements()
        for name in led:  # pages and metadata not started while the leader worked, all at once
            factory.lookahead(name, None)
        chosen: dict[str, BaseCandidate] = {}
        required: dict[str, list[BaseRequirement]] = {}
        information: dict[str, list[Information]] = {}
        queue: deque[Information] = deque((r, None) for r in roots)
        while queue:
            req, parent = queue.popleft()
            ident = req.identifier
            required.setdefault(ident, []).append(req)
            information.setdefault(ident, []).append((req, parent))
            cand = chosen.get(ident)
            if cand is not None:
                if not req.is_satisfied_by(cand):
                    return None  # a later requirement excludes the version taken: needs a search
                continue
            cand = _choose(factory, ident, required[ident], led)
            if cand is None:
                return None
            chosen[ident] = cand
            if self._on_pin is not None and base_of(cand) is not None:
                self._on_pin(cand.describe())
            queue.extend((dep, cand) for dep in factory.get_dependencies(cand))
        return chosen, information


def _choose(
    factory: Factory,
    ident: str,
    requirements: list[BaseRequirement],
    led: Mapping[NormalizedName, Version],
) -> BaseCandidate | None:
    """The candidate a resolution would try first; for a project of the leader, the first with
    the leader's public version (None when there is none here)."""
    matches = factory.find_matches(ident, requirements, [])()
    name = requirements[0].name
    want = led.get(name)
    for cand in matches:
        if want is None:
            return cand
        if cand.version.public == want.public:
            return cand
        if cand.version < want:
            return None  # candidates come newest first (after the preferred one): none left
    return None


def newer_alone(follower: Follower, followed: Resolution) -> bool:
    """Whether this platform, resolved on its own, would try a newer public version of one of
    the projects it took at the leader's version (its own existing pin first, else the newest it
    has files for). Then it is resolved on its own, so that what joint resolution holds it back
    from is known and said (`kernodeck.resolve.joint.Held`) rather than hidden by the walk."""
    factory = follower.factory
    for pin in followed.pins:
        first = factory.first_choice(pin.name, follower.own.get(pin.name))
        if first is not None and Version(first.public) > Version(pin.version.public):
            return True
    return False
