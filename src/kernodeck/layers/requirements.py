"""The manifest's own requirements against what is installed, whatever the lock's state.

`[packages] requirements` and the requirements read from `[packages] from` sources are what the
project asks for; a lock file is only derived from them. An edited pin in repro.toml
(`torch==2.13.0` -> `torch==2.12.0`) is checked here even when the lock is stale or missing: the
installed torch 2.13.0 fails as a pin mismatch naming both versions. Constraints are checked for
the distributions that are installed (they install nothing by themselves).

Versions are matched with packaging's SpecifierSet, then the manifest's pre-release rule: a
pre-release is allowed when `prereleases = true` or the specifier names a pre-release (the
resolver's `names_prerelease`). A pre-release installed under `prereleases = false` whose version
the specifier otherwise allows is a warning, not a failure: a lock takes one when a project has
nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.errors import ManifestError
from kernodeck.layers.causes import StepCause
from kernodeck.layers.context import Context
from kernodeck.manifest.schema import Manifest
from kernodeck.probe.facts import Distribution, Facts
from kernodeck.report import Step, Where

LAYER = "packages"


@dataclass(frozen=True)
class Declared:
    """One requirement as the manifest declares it, and where."""

    requirement: Requirement
    where: str  # "repro.toml", "requirements.txt" (a `from` source)
    constraint: bool = False
    at: Where | None = None  # its line in the manifest (for a `from` source: the `from` key's)


def declared(manifest: Manifest, ctx: Context) -> tuple[list[Declared], bool, str | None]:
    """(the declared requirements and constraints, whether pre-releases are allowed, the problem
    reading a `from` source or None)."""
    pk = manifest.packages
    name = ctx.manifest_file.name
    out = [
        Declared(r, name, constraint=key == "constraints", at=ctx.lines.where("packages", key, i))
        for key, texts in (("requirements", pk.requirements), ("constraints", pk.constraints))
        for i, r in _parse(texts)
    ]
    allow = pk.prereleases
    problem = None
    if pk.from_:
        from kernodeck.manifest.sources import read_sources

        try:
            sources = read_sources(manifest, ctx.manifest_file)
        except ManifestError as e:
            problem = e.issues[0].message if e.issues else e.message
        else:
            allow = allow or sources.prereleases
            where, at = ", ".join(pk.from_), ctx.lines.where("packages", "from")
            out += [Declared(r, where, at=at) for _, r in _parse(sources.requirements)]
            out += [Declared(r, where, constraint=True, at=at) for _, r in _parse(sources.constraints)]
    return out, allow, problem


def _parse(texts: Iterable[str]) -> list[tuple[int, Requirement]]:
    """The requirements that parse, each with its index among `texts`."""
    out = []
    for i, text in enumerate(texts):
        try:
            out.append((i, Requirement(text)))
        except InvalidRequirement:  # the manifest's loader and the source readers report these
            continue
    return out


def check(manifest: Manifest, facts: Facts, ctx: Context, *, reported: set[NormalizedName]) -> list[Step]:
    """A step per declared requirement the installed distributions do not meet, then one step
    saying how many were met. `reported`: projects another step already failed as missing."""
    items, allow_pre, problem = declared(manifest, ctx)
    if problem is not None:
        return [
            Step.failed(
                LAYER,
                "requirements",
                f"the manifest's requirements cannot be read: {problem}",
                hint="fix the `[packages] from` source, then run `kernodeck lock`",
                details={"cause": StepCause.SOURCE_UNREADABLE},
                where=ctx.lines.where("packages", "from"),
            )
        ]
    env = {**facts.markers, "extra": ""}
    installed = facts.dists()
    steps: list[Step] = []
    met = 0
    applicable = [d for d in items if d.requirement.marker is None or d.requirement.marker.evaluate(env)]
    for item in applicable:
        key = canonicalize_name(item.requirement.name)
        dist = installed.get(key)
        step = _step(item, dist, allow_pre, key in reported)
        if step is None:
            met += 1
        else:
            step.where = item.at
            steps.append(step)
    if applicable and not any(s.status.value == "failed" for s in steps):
        steps.append(
            Step.passed(
                LAYER,
                "requirements",
                expected=f"{len(applicable)} declared requirement{'s' if len(applicable) != 1 else ''}",
                observed=f"{met} of {len(applicable)} met by what is installed",
            )
        )
    return steps


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _step(item: Declared, dist: Distribution | None, allow_pre: bool, reported: bool) -> Step | None:
    req = item.requirement
    name = f"requirement:{canonicalize_name(req.name)}"
    text = str(req)
    if dist is None:
        if item.constraint or reported:
            return None  # a constraint installs nothing; a missing pin was already reported
        return Step.failed(
            LAYER,
            name,
            f"{req.name} is not installed ({item.where} requires {text})",
            expected=text,
            observed=None,
            hint=f"install it, or run `kernodeck lock` and install the lock ({item.where} asks for it)",
            details={"cause": StepCause.MISSING, "declared-in": item.where},
        )
    version = _version(dist.version)
    if req.url is not None or not req.specifier or version is None:
        return None  # a direct reference or no version constraint: being installed is what it asks
    if not req.specifier.contains(version, prereleases=True):
        kind = "constrains" if item.constraint else "requires"
        return Step.failed(
            LAYER,
            name,
            f"{dist.name} {dist.version} is installed where {item.where} {kind} {text}",
            expected=text,
            observed=dist.version,
            hint=f"install {text}, or if {item.where} was edited, run `kernodeck lock` and install the new lock",
            details={"cause": StepCause.PIN_MISMATCH, "declared-in": item.where},
        )
    if version.is_prerelease and not allow_pre and not _names_prerelease(req):
        return Step.warning(
            LAYER,
            name,
            f"{dist.name} {dist.version} is a pre-release and [packages] prereleases = false "
            f"({item.where} requires {text})",
            expected=text,
            observed=dist.version,
            required=False,
            hint="a lock takes a pre-release only when the project has no release; pin a release or set prereleases = true",
            details={"cause": StepCause.PRERELEASE, "declared-in": item.where},
        )
    return None


def _names_prerelease(req: Requirement) -> bool:
    """Whether the requirement names a pre-release (then it allows them, as the resolver does)."""
    from kernodeck.resolve.factory import names_prerelease  # the resolver's rule, loaded when needed

    return names_prerelease(req.specifier)
