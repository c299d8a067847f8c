"""Layer `data`: data files, local weights, weights inside installed packages, hub weights."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Any

from kernodeck import hfcache
from kernodeck.fingerprint import Fingerprint, compare_listings, recorded_listing
from kernodeck.layers.causes import StepKind
from kernodeck.layers.context import Context, short
from kernodeck.manifest.paths import OUTSIDE_HINT, escapes, escaping_link, outside_message
from kernodeck.manifest.schema import Data, Manifest, Weights
from kernodeck.probe.facts import Facts
from kernodeck.report import Step, Where

LAYER = "data"


def file_step(
    layer: str,
    name: str,
    path: Path,
    sha256: str | None,
    size: int | None,
    ctx: Context,
    *,
    hint: str | None,
    bounded: bool = False,
    external: bool = False,
) -> Step:
    """Fingerprint a file or directory and compare it with the declared sha256 (and size).

    `bounded`: a project path, which must not lead out of the project through a symlink unless
    it is `external` (then reported as such)."""
    if bounded and not external:
        real = escapes(ctx.root, path)
        # a folder's own files must not lead out either
        link = escaping_link(ctx.root, path) if real is None and path.is_dir() else None
        if real is not None:
            message: str | None = outside_message(_rel(path, ctx), real)
        elif link is not None:
            message = outside_message(_rel(link[0], ctx), link[1])
        else:
            message = None
        if message is not None:
            return Step.failed(
                layer,
                name,
                message,
                expected=sha256,
                hint=OUTSIDE_HINT,
                details={"cause": "outside-project"},
            )
    if not path.exists():
        return Step.failed(
            layer,
            name,
            f"{_rel(path, ctx)} does not exist",
            expected=sha256,
            observed=None,
            hint=hint,
            details={"cause": "missing"},
        )
    try:
        fp = ctx.cache.fingerprint(path)
    except OSError as e:
        return Step.failed(
            layer,
            name,
            f"cannot read {_rel(path, ctx)}: {e.strerror or e}",
            expected=sha256,
            details={"cause": "unreadable"},
        )
    return _compared(layer, name, path, fp, sha256, size, ctx, hint=hint, external=external)


def _compared(
    layer: str,
    name: str,
    path: Path,
    fp: Fingerprint,
    sha256: str | None,
    size: int | None,
    ctx: Context,
    *,
    hint: str | None,
    external: bool,
) -> Step:
    """The fingerprint of an existing file or folder against the recorded one."""
    details: dict[str, object] = {"kind": fp.kind, "size": fp.size, "files": fp.files}
    if external:
        details["external"] = True
    else:  # a project path (never a host path): what a dirty tree's changed files are matched with
        details["path"] = _rel(path, ctx)
    if not sha256:
        entry = name.partition(":")[2] or name
        return Step.failed(
            layer,
            name,
            f"{_rel(path, ctx)} has no recorded sha256 to compare with",
            expected=None,
            observed=fp.sha256,
            hint=f"run `kernodeck capture --data {entry}` in the reference environment to record it",
            details={**details, "cause": "no-fingerprint"},
        )
    if size is not None and fp.size != size and fp.kind == "file":
        return Step.failed(
            layer,
            name,
            f"{_rel(path, ctx)} has {fp.size} bytes, expected {size}",
            expected=sha256,
            observed=fp.sha256,
            hint=hint,
            details={**details, "cause": "size-mismatch"},
        )
    if fp.sha256 != sha256:
        error, more = _mismatch(name, path, fp, sha256, ctx)
        return Step.failed(
            layer,
            name,
            error,
            expected=sha256,
            observed=fp.sha256,
            hint=hint
            or "restore the file the reference used, or record a new fingerprint and a new reference id",
            details={**details, **more, "cause": "hash-mismatch"},
        )
    observed = f"{fp.sha256} (external: {path})" if external else fp.sha256
    return Step.passed(layer, name, expected=sha256, observed=observed, details=details)


#: Files named per kind (added, removed, changed) before "and N more".
FIRST_FILES = 5


def _mismatch(
    name: str, path: Path, fp: Fingerprint, sha256: str, ctx: Context
) -> tuple[str, dict[str, object]]:
    """(the error, more details) of a fingerprint mismatch: for a folder whose reference listing
    was kept (`kernodeck.fingerprint.recorded_listing`), the files added, removed and changed;
    otherwise the digests, and for a folder its file count."""
    where = _rel(path, ctx)
    digests = f"sha256 {fp.sha256[:12]}…, expected {sha256[:12]}…"
    if fp.kind != "dir":
        return f"{where} has {digests}", {}
    reference = recorded_listing(ctx.manifest_file.parent, sha256)
    if reference is None:
        entry = name.partition(":")[2] or name
        return (
            f"{where} has {digests}: {fp.files} files now; the reference's files were not listed "
            f"(`kernodeck capture --data {entry}` in the reference environment keeps their listing)",
            {},
        )
    changes = compare_listings(reference, fp.listing)
    parts = [
        f"{len(files)} {word} ({short(files, FIRST_FILES)})"
        for word, files in (
            ("added", changes.added),
            ("removed", changes.removed),
            ("changed", changes.changed),
        )
        if files
    ]
    more: dict[str, object] = {
        "reference_files": len(reference),
        "added": changes.added[:50],
        "removed": changes.removed[:50],
        "changed": changes.changed[:50],
    }
    return f"{where} differs from the reference's {len(reference)} files: {'; '.join(parts)}", more


def _rel(path: Path, ctx: Context) -> str:
    try:
        return path.relative_to(ctx.root).as_posix()
    except ValueError:
        return str(path)


def _access_hint(source: str | None, access: list[str], facts: Facts | None) -> str | None:
    parts = []
    if source:
        parts.append(f"fetch it from {source}")
    if access:
        present = facts.env_present if facts is not None else {k: k in os.environ for k in access}
        states = [f"{k} ({'set' if present.get(k) else 'not set'})" for k in access]
        parts.append("access through " + ", ".join(states))
    return "; ".join(parts) or None


def _data(d: Data, ctx: Context, facts: Facts | None) -> Step:
    return file_step(
        LAYER,
        f"data:{d.name}",
        ctx.root / d.path,
        d.sha256,
        d.size,
        ctx,
        hint=_access_hint(d.source, d.access, facts),
        bounded=True,
        external=d.external,
    ).tagged(StepKind.DATA_FILE)


def _weights(w: Weights, ctx: Context, facts: Facts | None) -> list[Step]:
    name = f"weights:{w.name}"
    hint = _access_hint(w.source, w.access, facts)
    if w.hub:
        cache = (facts.hf_hub_cache if facts is not None else None) or hfcache.default_root()
        repo_dir = hfcache.repo_folder(cache, w.hub)
        snap = hfcache.snapshot(cache, w.hub, str(w.revision))
        if not snap.is_dir():
            have = (
                sorted(p.name[:12] for p in (repo_dir / "snapshots").glob("*")) if repo_dir.is_dir() else []
            )
            return [
                Step.failed(
                    LAYER,
                    name,
                    f"{w.hub} at revision {str(w.revision)[:12]} is not in the local hub cache"
                    + (f" (cached revisions: {', '.join(have)})" if have else ""),
                    expected=w.revision,
                    observed=have or None,
                    hint=f"download it once: hf download {w.hub} --revision {w.revision}"
                    + (f"; {hint}" if hint else ""),
                    details={"cause": "missing"},
                )
            ]
        steps = []
        for fname, sha in sorted((w.files or {}).items()):
            steps.append(file_step(LAYER, f"{name}/{fname}", snap / fname, sha, None, ctx, hint=hint))
        return steps
    assert w.path is not None  # guaranteed by cross-field validation
    if w.package:
        if facts is None:
            return [
                Step.skipped(LAYER, name, "the environment probe did not run", details={"cause": "no-facts"})
            ]
        loc = next((x for x in facts.located if x.package == w.package and x.path == w.path), None)
        if loc is None or not loc.found or loc.file is None:
            why = loc.error if loc is not None and loc.error else f"{w.path} was not located in {w.package}"
            return [
                Step.failed(
                    LAYER,
                    name,
                    why,
                    expected=w.sha256,
                    hint=f"install the locked {w.package}" + (f"; {hint}" if hint else ""),
                    details={"cause": "missing"},
                )
            ]
        return [file_step(LAYER, name, Path(loc.file), w.sha256, w.size, ctx, hint=hint)]
    return [
        file_step(
            LAYER,
            name,
            ctx.root / w.path,
            w.sha256,
            w.size,
            ctx,
            hint=hint,
            bounded=True,
            external=w.external,
        )
    ]


def check(manifest: Manifest, facts: Facts | None, ctx: Context) -> list[Step]:
    steps = [located(_data(d, ctx, facts), ctx, "data", i) for i, d in enumerate(manifest.data)]
    for i, w in enumerate(manifest.weights):
        steps.extend(located(s, ctx, "weights", i) for s in _weights(w, ctx, facts))
    return steps


#: The causes of a step whose file is there but holds other bytes than the reference's.
_DIFFERENT = frozenset({"hash-mismatch", "size-mismatch"})


def located(step: Step, ctx: Context, *loc: str | int) -> Step:
    """A `file_step`, pointing at the project file itself when its bytes differ (in a folder:
    the first file changed or added), else at its entry in the manifest (`"data", 0`: the first
    `[[data]]`)."""
    differing = _differing_file(step.details)
    step.where = Where(file=differing) if differing is not None else ctx.lines.where(*loc)
    return step


def _differing_file(details: dict[str, Any]) -> str | None:
    """The project file whose bytes differ from the reference's, when `details` name one."""
    path = details.get("path")
    if details.get("cause") not in _DIFFERENT or not isinstance(path, str):
        return None
    if details.get("kind") == "file":
        return path
    inside = [*details.get("changed", []), *details.get("added", [])]
    return posixpath.join(path, inside[0]) if inside else None
