"""Requirements as the resolver sees them; each knows how to describe itself in an error.

- `SpecifierRequirement`: a PEP 508 requirement from the manifest or from a candidate's metadata
  (markers are evaluated for the target before one is made).
- `ExactBaseRequirement`: an extras candidate's requirement on its own base at the same version.
- `RequiresPythonRequirement`: a candidate's `Requires-Python`, satisfied by the target Python.

Versions are matched with `prereleases=True`: which prereleases may appear at all is decided when
candidates are listed, not here (as pip does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name

from kernodeck.resolve.candidates import (
    PYTHON_IDENTIFIER,
    BaseCandidate,
    Candidate,
    canonical_extras,
    make_identifier,
)

if TYPE_CHECKING:
    from packaging.version import Version

MANIFEST_ORIGIN = "the manifest"


def pins_exactly(specifier: SpecifierSet) -> bool:
    """`==1.2.3` or `===1.2.3` (no wildcard) among the specifiers."""
    return any(
        (s.operator == "==" and not s.version.endswith(".*")) or s.operator == "===" for s in specifier
    )


class BaseRequirement:
    __slots__ = ()

    @property
    def identifier(self) -> str:
        raise NotImplementedError

    @property
    def name(self) -> NormalizedName:
        raise NotImplementedError

    @property
    def extras(self) -> frozenset[str]:
        return frozenset()

    @property
    def specifier(self) -> SpecifierSet:
        raise NotImplementedError

    @property
    def pinned_exactly(self) -> bool:
        """`==1.2.3` or `===1.2.3` (no wildcard): the only case where yanked files may be used."""
        return False

    @property
    def permits_yanked(self) -> bool:
        """Whether this requirement lets yanked files in (PEP 592: an exact pin)."""
        return self.pinned_exactly

    def allows(self, version: Version) -> bool:
        return self.specifier.contains(version, prereleases=True)

    @staticmethod
    def _memo_allows(memo: dict[Version, bool], specifier: SpecifierSet, version: Version) -> bool:
        """`specifier` on `version`, worked out once per requirement and version: the resolver asks
        again for the same versions every round (every criterion's pin is re-checked)."""
        hit = memo.get(version)
        if hit is None:
            hit = memo[version] = specifier.contains(version, prereleases=True)
        return hit

    def is_satisfied_by(self, candidate: BaseCandidate) -> bool:
        return candidate.identifier == self.identifier and self.allows(candidate.version)

    def describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"


class SpecifierRequirement(BaseRequirement):
    __slots__ = ("_allowed", "_exact", "_extras", "_identifier", "_name", "req")

    def __init__(self, req: Requirement) -> None:
        self.req = req
        self._name = canonicalize_name(req.name)
        self._extras = canonical_extras(req.extras)
        self._identifier = make_identifier(self._name, self._extras)
        self._allowed: dict[Version, bool] = {}
        self._exact: bool | None = None

    @property
    def identifier(self) -> str:
        return self._identifier

    def allows(self, version: Version) -> bool:
        return self._memo_allows(self._allowed, self.req.specifier, version)

    def is_satisfied_by(self, candidate: BaseCandidate) -> bool:
        return candidate.identifier == self._identifier and self.allows(candidate.version)

    @property
    def name(self) -> NormalizedName:
        return self._name

    @property
    def extras(self) -> frozenset[str]:
        return self._extras

    @property
    def specifier(self) -> SpecifierSet:
        return self.req.specifier

    @property
    def pinned_exactly(self) -> bool:
        exact = self._exact
        if exact is None:  # asked on every preference of every round: worked out once
            exact = self._exact = pins_exactly(self.req.specifier)
        return exact

    def describe(self) -> str:
        extras = f"[{','.join(sorted(self._extras))}]" if self._extras else ""
        return f"{self._name}{extras}{self.req.specifier}"


class ExactBaseRequirement(BaseRequirement):
    """`name==<the extras candidate's version>`, local label included."""

    __slots__ = ("candidate",)

    def __init__(self, candidate: Candidate) -> None:
        self.candidate = candidate

    @property
    def identifier(self) -> str:
        return self.candidate.name

    @property
    def name(self) -> NormalizedName:
        return self.candidate.name

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(f"=={self.candidate.version}")

    @property
    def pinned_exactly(self) -> bool:
        return True

    @property
    def permits_yanked(self) -> bool:
        # As exact as the extras candidate it comes from: `lib[x]>=1` never lets a yanked file of
        # lib in through the base, `lib[x]==1.0` does.
        return self.candidate.allow_yanked

    def allows(self, version: Version) -> bool:
        return version == self.candidate.version

    def describe(self) -> str:
        return f"{self.candidate.name}=={self.candidate.version}"


class RequiresPythonRequirement(BaseRequirement):
    __slots__ = ("_allowed", "_specifier")

    def __init__(self, specifier: SpecifierSet) -> None:
        self._specifier = specifier
        self._allowed: dict[Version, bool] = {}  # asked about the one target Python, every round

    def allows(self, version: Version) -> bool:
        return self._memo_allows(self._allowed, self._specifier, version)

    @property
    def identifier(self) -> str:
        return PYTHON_IDENTIFIER

    @property
    def name(self) -> NormalizedName:
        return NormalizedName(PYTHON_IDENTIFIER)

    @property
    def specifier(self) -> SpecifierSet:
        return self._specifier

    def describe(self) -> str:
        return f"Python{self._specifier}"


def strip_marker(req: Requirement) -> Requirement:
    """A copy of `req` without its marker (already evaluated for the target)."""
    copy = Requirement(str(req))
    copy.marker = None
    return copy
