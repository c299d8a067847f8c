"""Layer `contract`: the `pip check` question, answered from installed metadata and the live
marker environment. Requirements of requested extras (`foo[bar]`) are followed too."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import packaging
from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.layers.context import Context
from kernodeck.manifest.schema import Manifest
from kernodeck.probe.facts import Distribution, Facts
from kernodeck.report import Step

LAYER = "contract"


#: Bump when broken_requirements' logic or output changes: old verdicts are then not reused.
VERDICT_VERSION = 2


def _verdict_key(facts: Facts) -> str:
    """A digest of everything broken_requirements reads: the marker environment and each
    distribution's name, version, requirements and extras (the first copy on sys.path)."""
    data = [
        VERDICT_VERSION,
        packaging.__version__,
        sorted(facts.markers.items()),
        [(d.name, d.version, d.requires, d.extras) for _, d in sorted(facts.dists().items())],
    ]
    return hashlib.sha256(json.dumps(data, separators=(",", ":")).encode("utf-8")).hexdigest()


def _verdict_file(cache_dir: Path, facts: Facts) -> Path:
    where = f"{facts.interpreter.executable}\0{facts.interpreter.prefix}"
    return (
        cache_dir
        / "contract-v1"
        / f"{hashlib.sha256(where.encode('utf-8', 'surrogateescape')).hexdigest()[:32]}.json"
    )


def cached_broken_requirements(facts: Facts, cache_dir: Path | None) -> tuple[list[dict[str, str]], int]:
    """broken_requirements, remembered per environment: the answer is a function of the installed
    metadata and the marker environment only, so an unchanged environment is not parsed again."""
    if cache_dir is None:
        return broken_requirements(facts)
    key = _verdict_key(facts)
    file = _verdict_file(cache_dir, facts)
    try:
        saved: Any = json.loads(file.read_text("utf-8"))
        if isinstance(saved, dict) and saved.get("key") == key:
            return list(saved["broken"]), int(saved["checked"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    broken, checked = broken_requirements(facts)
    try:
        from kernodeck.support.fsio import atomic_write_text

        atomic_write_text(file, json.dumps({"key": key, "broken": broken, "checked": checked}))
    except OSError:
        pass  # a cache that cannot be written costs time, never correctness
    return broken, checked


def applicable_requirements(d: Distribution, extra: str, env: dict[str, str]) -> Iterator[Requirement | str]:
    """The requirements of `d` (with `extra` requested; "" for none) that apply under the marker
    environment `env`; a requirement that does not parse comes as its text. With an extra, only
    the requirements that name one (the others come with extra "")."""
    for raw in d.requires:
        try:
            req = Requirement(raw)
        except InvalidRequirement:
            if not extra:
                yield raw
            continue
        if extra and (req.marker is None or "extra" not in str(req.marker)):
            continue
        if req.marker is not None:
            try:
                if not req.marker.evaluate({**env, "extra": extra}):
                    continue
            except (InvalidMarker, ValueError, KeyError):
                continue
        yield req


def required_by(facts: Facts, roots: set[NormalizedName]) -> set[NormalizedName]:
    """The installed distributions `roots` need, themselves included: their applicable
    requirements followed through what is installed, requested extras too."""
    dists = facts.dists()
    env = dict(facts.markers)
    todo = [(k, "") for k in sorted(roots) if k in dists]
    done: set[tuple[NormalizedName, str]] = set()
    while todo:
        key, extra = todo.pop()
        if (key, extra) in done:
            continue
        done.add((key, extra))
        for req in applicable_requirements(dists[key], extra, env):
            if isinstance(req, str):
                continue
            dep = canonicalize_name(req.name)
            if dep in dists:
                todo.append((dep, ""))
                todo.extend((dep, canonicalize_name(e)) for e in req.extras)
    return {k for k, _ in done}


def broken_requirements(facts: Facts) -> tuple[list[dict[str, str]], int]:
    """Every unmet requirement as {who, requirement, name, problem, installed}; and how many were checked."""
    dists = facts.dists()
    env = dict(facts.markers)
    out: list[dict[str, str]] = []
    checked = 0
    # (distribution, extra) pairs to check; extras are added as requirements ask for them
    todo: list[tuple[NormalizedName, str]] = [(k, "") for k in sorted(dists)]
    done: set[tuple[NormalizedName, str]] = set()
    while todo:
        key, extra = todo.pop(0)
        if (key, extra) in done:
            continue
        done.add((key, extra))
        d = dists[key]
        for req in applicable_requirements(d, extra, env):
            if isinstance(req, str):
                out.append(_item(d, req, req, "invalid requirement in metadata", None))
                continue
            checked += 1
            dep_key = canonicalize_name(req.name)
            dep = dists.get(dep_key)
            who = f"{d.name} {d.version}" + (f" [{extra}]" if extra else "")
            if dep is None:
                out.append(_item(d, str(req), req.name, "not installed", None, who))
                continue
            try:
                v = Version(dep.version)
            except InvalidVersion:
                out.append(
                    _item(d, str(req), req.name, f"has an invalid version {dep.version!r}", dep.version, who)
                )
                continue
            if req.specifier and not req.specifier.contains(v, prereleases=True):
                out.append(_item(d, str(req), req.name, f"{dep.version} is installed", dep.version, who))
                continue
            for e in sorted(req.extras):
                if canonicalize_name(e) in {canonicalize_name(x) for x in dep.extras}:
                    todo.append((dep_key, e))
    return out, checked


def _item(
    d: Distribution, req: str, name: str, problem: str, installed: str | None, who: str | None = None
) -> dict[str, str]:
    return {
        "who": who or f"{d.name} {d.version}",
        "requirement": req,
        "name": name,
        "problem": problem,
        "installed": installed or "",
    }


def check(manifest: Manifest, facts: Facts, ctx: Context) -> list[Step]:
    path = ctx.cache.path
    broken, checked = cached_broken_requirements(facts, path.parent if path is not None else None)
    if not broken:
        n = len(facts.dists())
        observed = (
            f"{checked} requirements of {n} distributions met"
            if checked
            else f"no requirement to check: none of the {n} distributions requires another"
        )
        return [Step.passed(LAYER, "requirements", expected="every requirement met", observed=observed)]
    steps = []
    for b in broken:
        steps.append(
            Step.failed(
                LAYER,
                f"{canonicalize_name(b['who'].split(' ')[0])}->{canonicalize_name(b['name'])}",
                f"{b['who']} requires {b['requirement']}, but {b['name']} {'is not installed' if b['problem'] == 'not installed' else b['problem']}",
                expected=b["requirement"],
                observed=b["installed"] or None,
                hint="reinstall from the lock; if the lock itself is inconsistent, run `kernodeck lock` again",
                details={"cause": "broken-requirement", "required_by": b["who"], "name": b["name"]},
            )
        )
    return steps
