"""`kernodeck check --record`: make this run the reference.

Runs the checks (and the resume run) in the reference environment, judges the criteria that do
not need a reference (structure, finiteness, ids, ranges, labels), and only if they all pass
writes every declared output under `reference/` and its sha256, and the observed shape and dtype
where the manifest declares none, into repro.toml (tomlkit: comments and order kept).

Tolerances are never derived from a run: a numeric comparison without one makes `--record`
refuse before anything runs, naming the key to add.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernodeck.checks import run_check, select_checks
from kernodeck.checks.criteria import LAYER, evaluate, has_tolerance, output_label
from kernodeck.checks.readers import Loaded, is_numeric_format, read_output
from kernodeck.checks.resume import LAYER as RESUME_LAYER
from kernodeck.checks.resume import resume_out, resume_steps
from kernodeck.checks.runner import make_base
from kernodeck.errors import UsageError
from kernodeck.fingerprint import sha256_file
from kernodeck.layers.causes import StepKind
from kernodeck.lockfile.names import manifest_file
from kernodeck.manifest.edit import editing, load_document, save_document, set_value
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.schema import Check, CheckOutput, Manifest
from kernodeck.report import Status, Step
from kernodeck.support.fsio import atomic_write_bytes


@dataclass
class Recorded:
    steps: list[Step] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # files written, relative to the manifest folder
    changes: list[str] = field(default_factory=list)  # "check[0].output[0].sha256" etc.

    @property
    def ok(self) -> bool:
        return not any(s.status is Status.FAILED and s.required for s in self.steps)


def missing_tolerances(manifest: Manifest, checks: Sequence[Check], with_resume: bool) -> list[str]:
    """Each numeric comparison that declares no tolerance, as 'where: what to add'."""
    out = []
    for check in checks:
        ci = manifest.check.index(check)
        for oi, o in enumerate(check.output):
            numeric = is_numeric_format(o.path) or o.metric is not None
            if o.reference is not None and numeric and not has_tolerance(o):
                out.append(
                    f"check[{ci}].output[{oi}] ({check.name}/{output_label(o)} vs {o.reference}): "
                    "add `atol` and/or `rtol` (or `cosine-min`, or `exact = true`)"
                )
    t = manifest.resume.trajectory if manifest.resume is not None else None
    if with_resume and t is not None and t.atol is None and t.rtol is None:
        out.append(f"resume.trajectory ({t.metric} vs {t.reference}): add `rtol` and/or `atol`")
    return out


def default_destination(manifest: Manifest, check: Check, output: CheckOutput) -> str:
    if output.reference is not None:
        return output.reference
    if len(manifest.check) == 1:
        return f"reference/{output.path}"
    return f"reference/{check.name}/{output.path}"


def record(
    manifest_path: Path,
    python: str,
    *,
    names: Sequence[str] | None = None,
    with_resume: bool | None = None,
    out_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Recorded:
    """Run, judge, and (when every criterion passes) write the reference outputs and repro.toml.

    `names` None records every check, an empty list none; `with_resume` defaults to True when
    `names` is None. Raises UsageError when a numeric
    comparison has no tolerance, before running anything.
    """
    path = manifest_file(manifest_path)
    manifest = load_manifest(path)
    root = path.parent.resolve()
    checks = [] if names is not None and not names else select_checks(manifest, names)  # []: none
    if with_resume is None:
        with_resume = names is None
    with_resume = with_resume and manifest.resume is not None
    problems = missing_tolerances(manifest, checks, with_resume)
    if problems:
        raise UsageError(
            f"refusing to record: {len(problems)} numeric comparison{'s' if len(problems) != 1 else ''} "
            f"in {path} without a tolerance",
            context=problems,
            hint="tolerances are decided before the run, never derived from it; add them, then record again",
        )

    base = make_base(out_dir)
    rec = Recorded()
    outs: dict[str, Path] = {}
    for check in checks:
        result, step = run_check(check, manifest, root, python, base=base, env=env)
        rec.steps.append(step)
        if result.ok:
            outs[check.name] = result.out
            for o in check.output:
                rec.steps.extend(evaluate(check.name, o, result.out, root, mode="record"))
    resume_dir: Path | None = None
    if with_resume:
        rs = resume_steps(manifest, root, python, out_dir=base, env=env, record=True)
        rec.steps.extend(rs)
        resume_dir = resume_out(rs)
    if not rec.ok:
        rec.steps.append(
            Step.failed(LAYER, "record", "nothing recorded: the run did not meet its criteria", required=True)
        )
        return rec

    replaced: list[str] = []
    with editing(path):  # read -> modify -> write under the manifest's edit lock
        doc = load_document(path)
        _record_outputs(doc, manifest, checks, outs, root, rec, replaced)
        if with_resume and not _record_resume(doc, manifest, root, resume_dir, rec, replaced):
            return rec
        if rec.changes:
            save_document(doc, path)
    if replaced:
        rec.steps.append(
            Step.warning(
                LAYER,
                "reference id",
                f"the reference changed ({', '.join(replaced)}) but [reference] id is still {manifest.reference.id!r}",
                hint="give [reference] id a new value: a new identity whenever the reference changes",
                required=False,
            )
        )
    return rec


def _record_outputs(
    doc: Any,
    manifest: Manifest,
    checks: Sequence[Check],
    outs: dict[str, Path],
    root: Path,
    rec: Recorded,
    replaced: list[str],
) -> None:
    """Copy each check's outputs to their reference paths and record their fingerprints (and an
    array's shape and dtype where the manifest has none) in `doc`."""
    root_resolved = root.resolve()
    copied: dict[tuple[Path, str], str] = {}
    for check in checks:
        ci = manifest.check.index(check)
        out = outs[check.name]
        for oi, o in enumerate(check.output):
            if not o.exists:
                continue
            dest_rel = default_destination(manifest, check, o)
            _inside(root_resolved, dest_rel)
            src = out / o.path
            key = (src, dest_rel)
            if key not in copied:
                atomic_write_bytes(root / dest_rel, src.read_bytes())
                copied[key] = sha256_file(root / dest_rel)
                rec.written.append(dest_rel)
            digest = copied[key]
            loc = f"check[{ci}].output[{oi}]"
            if o.sha256 != digest:
                if o.sha256 is not None:
                    replaced.append(f"{check.name}/{output_label(o)}")
                set_value(doc, f"{loc}.sha256", digest)
                rec.changes.append(f"{loc}.sha256")
            if o.metric is None:
                _record_array(doc, loc, o, src, rec)
            rec.steps.append(
                Step.passed(
                    LAYER,
                    f"{check.name}/{output_label(o)}: recorded",
                    observed=dest_rel,
                    details={"sha256": digest},
                )
            )


def _record_array(doc: Any, loc: str, o: CheckOutput, src: Path, rec: Recorded) -> None:
    """An array output's shape and dtype, where the manifest has none yet."""
    loaded = read_output(src, o.key)
    if not isinstance(loaded, Loaded) or loaded.dtype is None:
        return
    if o.shape is None:
        set_value(doc, f"{loc}.shape", [int(d) for d in loaded.value.shape])
        rec.changes.append(f"{loc}.shape")
    if o.dtype is None:
        set_value(doc, f"{loc}.dtype", loaded.dtype)
        rec.changes.append(f"{loc}.dtype")


def _record_resume(
    doc: Any, manifest: Manifest, root: Path, resume_dir: Path | None, rec: Recorded, replaced: list[str]
) -> bool:
    """The resume run's trajectory as the reference's, and the checkpoint's fingerprint; False
    (a failed step added) when the run wrote no trajectory log."""
    r = manifest.resume
    if r is None:
        return True
    if r.trajectory is not None and resume_dir is not None:
        _inside(root.resolve(), r.trajectory.reference)
        src = resume_dir / r.trajectory.log
        if not src.is_file():
            rec.steps.append(
                Step.failed(RESUME_LAYER, "record trajectory", f"the resume run wrote no {r.trajectory.log}")
            )
            return False
        target = root / r.trajectory.reference
        old = sha256_file(target) if target.is_file() else None
        atomic_write_bytes(target, src.read_bytes())
        rec.written.append(r.trajectory.reference)
        if old is not None and old != sha256_file(target):
            replaced.append(r.trajectory.reference)
        rec.steps.append(
            Step.passed(
                RESUME_LAYER, f"trajectory {r.trajectory.metric}: recorded", observed=r.trajectory.reference
            ).tagged(StepKind.TRAJECTORY, metric=r.trajectory.metric)
        )
    if r.checkpoint.sha256 is None and (root / r.checkpoint.path).is_file():
        set_value(doc, "resume.checkpoint.sha256", sha256_file(root / r.checkpoint.path))
        rec.changes.append("resume.checkpoint.sha256")
    return True


def _inside(root: Path, rel: str) -> None:
    dest = (root / rel).resolve()
    if not dest.is_relative_to(root):
        raise UsageError(f"refusing to write {rel!r}: it is outside the manifest's folder {root}")
