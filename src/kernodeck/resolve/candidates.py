"""Candidates: one version of one project for one target, as the resolver sees it.

A `Candidate` holds every file of that version that may be installed on the target (compatible
wheels, best tag first, then the sdist when the project is allowed to be built). Its dependencies
come from the metadata of its best file, the way pip and uv read them per file. An
`ExtrasCandidate` is the same version with extras: it depends on its base candidate at exactly
that version plus the extra-only dependencies, like pip's. `PythonCandidate` stands for the
target interpreter so that a wheel's `Requires-Python` takes part in the resolution.

Every candidate knows how to describe itself in an error message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

if TYPE_CHECKING:
    from kernodeck.index.models import IndexFile, IndexSource

PYTHON_IDENTIFIER = "<python>"


def make_identifier(name: str, extras: frozenset[str] = frozenset()) -> str:
    """The resolver key: the canonical name, plus sorted canonical extras in brackets."""
    if not extras:
        return name
    return f"{name}[{','.join(sorted(extras))}]"


def canonical_extras(extras: set[str] | frozenset[str]) -> frozenset[str]:
    return frozenset(canonicalize_name(e) for e in extras)


class BaseCandidate:
    """What the provider needs of every candidate."""

    __slots__ = ()

    @property
    def identifier(self) -> str:
        raise NotImplementedError

    @property
    def name(self) -> NormalizedName:
        raise NotImplementedError

    @property
    def version(self) -> Version:
        raise NotImplementedError

    @property
    def extras(self) -> frozenset[str]:
        return frozenset()

    def describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseCandidate) or type(other) is not type(self):
            return NotImplemented
        return (self.identifier, self.version) == (other.identifier, other.version)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.identifier, self.version))


class Candidate(BaseCandidate):
    """One version of a project on one index, with its installable files for one target."""

    __slots__ = ("_name", "_version", "allow_yanked", "files", "source", "yanked")

    def __init__(
        self,
        name: NormalizedName,
        version: Version,
        source: IndexSource,
        files: tuple[IndexFile, ...],
        *,
        yanked: bool = False,
        allow_yanked: bool = False,
    ) -> None:
        if not files:
            raise ValueError(f"a candidate needs at least one file ({name} {version})")
        self._name = name
        self._version = version
        self.source = source
        self.files = files  # best first: wheels by tag rank, then the sdist
        self.yanked = yanked
        self.allow_yanked = allow_yanked  # built for an exact pin: yanked files may be among `files`

    @property
    def identifier(self) -> str:
        return self._name

    @property
    def name(self) -> NormalizedName:
        return self._name

    @property
    def version(self) -> Version:
        return self._version

    @property
    def metadata_file(self) -> IndexFile:
        """The file whose metadata gives the dependencies: the best-ranked one for the target."""
        return self.files[0]

    @property
    def sdist_only(self) -> bool:
        return all(not f.is_wheel for f in self.files)

    @property
    def hashes(self) -> tuple[str, ...]:
        return tuple(sorted({h for f in self.files if (h := f.sha256)}))

    def describe(self) -> str:
        return f"{self._name} {self._version}"


class ExtrasCandidate(BaseCandidate):
    """A candidate with extras; depends on its base at exactly the same version."""

    __slots__ = ("_extras", "base")

    def __init__(self, base: Candidate, extras: frozenset[str]) -> None:
        self.base = base
        self._extras = extras

    @property
    def identifier(self) -> str:
        return make_identifier(self.base.name, self._extras)

    @property
    def name(self) -> NormalizedName:
        return self.base.name

    @property
    def version(self) -> Version:
        return self.base.version

    @property
    def extras(self) -> frozenset[str]:
        return self._extras

    def describe(self) -> str:
        return f"{make_identifier(self.base.name, self._extras)} {self.base.version}"


class PythonCandidate(BaseCandidate):
    """The target's interpreter: the only candidate for `Requires-Python` requirements."""

    __slots__ = ("_version", "platform")

    def __init__(self, version: Version, platform: str) -> None:
        self._version = version
        self.platform = platform

    @property
    def identifier(self) -> str:
        return PYTHON_IDENTIFIER

    @property
    def name(self) -> NormalizedName:
        return NormalizedName(PYTHON_IDENTIFIER)

    @property
    def version(self) -> Version:
        return self._version

    def describe(self) -> str:
        return f"Python {self._version} (platform {self.platform})"


def base_of(candidate: BaseCandidate) -> Candidate | None:
    """The project candidate behind any candidate (None for the interpreter)."""
    if isinstance(candidate, Candidate):
        return candidate
    if isinstance(candidate, ExtrasCandidate):
        return candidate.base
    return None
