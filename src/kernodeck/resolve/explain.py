"""Turn resolvelib's "impossible" into who requires what, in the user's words.

"torch 2.6.0+cu126 requires triton==3.2.0; the manifest constrains triton<3" instead of resolver
internals. When a project has no file at all for the platform, say so with the tags its files do
have, and whether an sdist exists (and `allow-sdist` would help).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename

from kernodeck.errors import ResolutionError
from kernodeck.lockfile.write import strip_credentials
from kernodeck.resolve.candidates import PYTHON_IDENTIFIER, BaseCandidate, base_of
from kernodeck.resolve.requirements import BaseRequirement, RequiresPythonRequirement

if TYPE_CHECKING:
    from resolvelib.structs import RequirementInformation

    from kernodeck.index.evaluate import Rejected
    from kernodeck.resolve.factory import Factory, ProjectFiles

    Info = RequirementInformation[BaseRequirement, BaseCandidate]

_MAX_LIST = 12


def _short_list(items: Sequence[str], limit: int = _MAX_LIST) -> str:
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", ... ({len(items) - limit} more)"


def _where(pf: ProjectFiles) -> str:
    srcs = [pf.source] if pf.source is not None else list(pf.asked)
    return ", ".join(f"{s.name} ({strip_credentials(s.url)})" for s in srcs)


def _asked(pf: ProjectFiles) -> list[str]:
    """Each index asked for a project, and whether it answered."""
    not_found = {nf.index: nf for nf in pf.not_found}
    skipped = {s.name: why for s, why in pf.skipped}
    out = []
    for s in pf.asked:
        where = f"{s.name} ({strip_credentials(s.url)})"
        if s.name in skipped:
            out.append(f"asked {where}: no answer ({skipped[s.name]}); optional, left out")
        elif s.name in not_found:
            nf = not_found[s.name]
            out.append(
                f"asked {where}: answered, no project {pf.name!r}" + (f" ({nf.reason})" if nf.reason else "")
            )
    return out


def _file_tags(pf: ProjectFiles, rejected: Sequence[Rejected] | None = None) -> tuple[list[str], list[str]]:
    """(distinct wheel tags, sdist filenames) among the files the platform rejected."""
    tags: set[str] = set()
    sdists: set[str] = set()
    for r in pf.rejected if rejected is None else rejected:
        fn = r.file.filename
        if r.file.is_wheel:
            try:
                _, _, _, parsed = parse_wheel_filename(fn)
            except InvalidWheelFilename:
                continue
            tags.update(str(t) for t in parsed)
        else:
            sdists.add(fn)
    return sorted(tags), sorted(sdists)


def _origin(factory: Factory, parent: BaseCandidate, manifest: str) -> str | None:
    base = base_of(parent)
    if base is None:
        return None
    if base.name in factory.direct:
        return f"{base.name} is required by {manifest}"
    who = sorted(factory.required_by.get(base.name, {}).items())
    if who:
        return f"{base.name} is required by " + ", ".join(f"{p} ({r})" for p, r in who[:3])
    return None


def why_no_candidates(
    factory: Factory, name: NormalizedName, manifest: str, requirements: Sequence[BaseRequirement] = ()
) -> tuple[str | None, list[str], str | None]:
    """(message override, context lines, hint) for a project with no usable version."""
    pf = factory.project(name)
    target = factory.target
    platform = f"platform {target.name} ({target.summary()})"
    if pf.source is None:
        route = (
            "check the name, or route it to the index that has it with [[packages.index]] packages = [...]"
        )
        if pf.skipped:
            route = "an index was not reached: retry when it answers, or " + route
        return (f"{name} is not on any index asked for it: {_where(pf)}", _asked(pf), route)
    if not pf.versions(True):
        context, hint = _files_said(factory, pf)
        if not pf.rejected:
            return (f"{name} has no files on {_where(pf)}", context, None)
        return (f"no file of {name} can be installed on {platform}", context, hint)
    # Pre-releases are listed only where they could be chosen (`prereleases`, a requirement or
    # constraint naming one, or a project with nothing else): a list of candidates tells the truth.
    allow_pre = factory.prereleases_allowed(name, requirements)
    shown = [str(v) for v in pf.versions(True) if allow_pre or not v.is_prerelease]
    usable_line = f"versions of {name} usable on {target.name} ({_where(pf)}): {_short_list(shown) or 'none'}"
    # The versions asked for exist, but none has a file for this platform: say which tags they have.
    constraints = factory.constraints.get(name, [])
    wanted = [
        v
        for v in pf.all_versions
        if all(r.allows(v) for r in requirements)
        and all(c.specifier.contains(v, prereleases=True) for c in constraints)
        and (allow_pre or not v.is_prerelease)
    ]
    if requirements and wanted and not any(pf.usable(v, True) for v in wanted):
        blocked = wanted[:3]
        context, hint = _files_said(factory, pf, [r for v in blocked for r in pf.verdicts(v).rejected])
        context.append(usable_line)
        what = ", ".join(str(v) for v in blocked) + (
            f" (and {len(wanted) - 3} more)" if len(wanted) > 3 else ""
        )
        return (f"no file of {name} {what} can be installed on {platform}", context, hint)
    return (None, [usable_line], None)


def _files_said(
    factory: Factory, pf: ProjectFiles, rejected: Sequence[Rejected] | None = None
) -> tuple[list[str], str | None]:
    """(context lines, hint) about the files a platform rejected (all of the project's, or
    `rejected`): the tags of its wheels, its sdists, the other reasons, and allow-sdist."""
    rejected = pf.rejected if rejected is None else rejected
    tags, sdists = _file_tags(pf, rejected)
    context: list[str] = []
    if tags:
        context.append(f"its wheels are tagged: {_short_list(tags)}")
    if sdists:
        context.append(f"its source distributions: {_short_list(sdists, 4)}")
    other = sorted({r.reason for r in rejected if not _is_tag_reason(r.reason)})
    context.extend(f"rejected: {r}" for r in other[:5])
    hint = None
    if sdists and pf.name not in factory.settings.allow_sdist:
        hint = f"add {pf.name!r} to [packages] allow-sdist to build it from source, or pick a version with a wheel"
    return context, hint


def _is_tag_reason(reason: str) -> bool:
    r = reason.lower()
    return "tag" in r or "sdist" in r or "source distribution" in r


def explain_impossible(
    causes: Iterable[Info], factory: Factory, manifest: str = "repro.toml"
) -> ResolutionError:
    """A ResolutionError that names the requirement chain behind a failed resolution."""
    target = factory.target
    groups: dict[str, list[Info]] = {}
    for info in causes:
        groups.setdefault(info.requirement.name, []).append(info)
    if not groups:
        return ResolutionError(f"cannot lock platform {target.name}: no solution")
    name = sorted(groups)[0]
    infos = groups[name]
    parts: list[str] = []
    context: list[str] = []
    seen: set[str] = set()
    for info in infos:
        req, parent = info.requirement, info.parent
        if isinstance(req, RequiresPythonRequirement):
            who = parent.describe() if parent is not None else "the manifest"
            line = f"{who} requires Python{req.specifier}; platform {target.name} has Python {factory.python.version}"
        elif parent is None:
            line = f"the manifest requires {req.describe()}"
        else:
            line = f"{parent.describe()} requires {req.describe()}"
        if line not in seen:
            seen.add(line)
            parts.append(line)
        if parent is not None:
            origin = _origin(factory, parent, manifest)
            if origin and origin not in context:
                context.append(origin)
    hint: str | None = None
    override: str | None = None
    if name != PYTHON_IDENTIFIER:
        pname = infos[0].requirement.name
        for c in factory.constraints.get(pname, []):
            copy = str(c).split(";")[0].strip()
            parts.append(f"the manifest constrains {copy}")
        override, more, hint = why_no_candidates(
            factory, pname, manifest, [i.requirement for i in infos if i.requirement.name == pname]
        )
        context.extend(more)
    summary = "; ".join(parts)
    for other in sorted(groups)[1:]:
        for info in groups[other]:
            who = info.parent.describe() if info.parent is not None else "the manifest"
            context.append(f"also in conflict: {who} requires {info.requirement.describe()}")
    if override is not None:
        message = f"cannot lock platform {target.name}: {override}"
        context.insert(0, summary)
    else:
        message = f"cannot lock platform {target.name}: {summary}"
    return ResolutionError(message, context=context, hint=hint)
