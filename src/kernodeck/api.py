"""The Python API: `verify(path) -> Report`, and `require(path)` for the first line of a training
script, which raises CheckFailed (carrying the report summary) when anything required failed."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kernodeck.errors import CheckFailed, KernodeckError
from kernodeck.fingerprint import FingerprintCache
from kernodeck.interpreters import Interpreter, choose
from kernodeck.lockfile.names import manifest_file
from kernodeck.probe import launch
from kernodeck.support.gctune import fewer_collections

if TYPE_CHECKING:
    from kernodeck.probe.runner import Probe
    from kernodeck.report import Report

# The manifest, pydantic models, packaging and rich are imported inside the functions, after the
# environment probe has been started: the probe runs while they load.


@fewer_collections()  # see require(): after a script's `import torch` every full collection is slow
def verify(
    path: str | os.PathLike[str] = "repro.toml",
    *,
    python: str | os.PathLike[str] | Interpreter | None = None,
    platform: str | None = None,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    strict: bool = False,
    compute: bool = True,
    rehash: bool = False,
    probe: Probe | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    isolate_torch: bool = False,
) -> Report:
    """Check a live environment against a manifest, layer by layer; never raises for a failed check.

    `python` is the interpreter of the environment to check (default: as kernodeck.interpreters
    chooses: the activated venv, else the activated conda environment, else this one). `probe`
    replaces the real probes (tests pass a FakeProbe). torch's backend and device facts are
    gathered in this process, on the torch it imports anyway, when the chosen interpreter is this
    one; in a process of their own (with a timeout: a crashing CUDA init cannot take this process
    down) for another interpreter or with `isolate_torch=True`. Raises UsageError / ManifestError
    for bad input.
    """
    only, skip = tuple(only), tuple(skip)
    file = manifest_file(path)
    cache = FingerprintCache.open(
        Path(cache_dir) if cache_dir is not None else None, rehash=rehash, enabled=use_cache
    )
    facts_needed, records = launch.wants_facts(only, skip)
    started: list[str] | None = None
    chosen: Interpreter | None = None
    if probe is None:
        # a bad --python is raised again below, after the manifest's own errors
        with contextlib.suppress(KernodeckError):
            chosen = choose(python)
    if chosen is not None and facts_needed and file.is_file():
        dirs = launch.records_cache_dir(cache.path.parent if cache.path is not None else None)
        started = launch.script_command(chosen.path, records=records, rehash=rehash, records_cache=dirs)
        launch.prestart(started)
    try:
        from kernodeck.layers.run import run_verify
        from kernodeck.manifest.load import load_manifest
        from kernodeck.probe.runner import RealProbe

        manifest = load_manifest(file)
        if probe is None:
            chosen = chosen or choose(python)
            probe = RealProbe(chosen, cache=cache, rehash=rehash, isolate_torch=isolate_torch)
        return run_verify(
            manifest,
            file.absolute(),
            probe,
            platform=platform,
            only=only,
            skip=skip,
            strict=strict,
            compute=compute,
            cache=cache,
            checked=chosen,
        )
    finally:
        if started is not None:
            launch.discard(started)  # nothing to do when the probe was taken


def require(
    path: str | os.PathLike[str] = "repro.toml",
    *,
    fleet: bool = False,
    fleet_timeout: float = 120.0,
    **kw: object,
) -> Report:
    """Verify (the interpreter chosen as for `kernodeck verify`: `python=`, else the activated
    venv, else the activated conda environment, else this one), and raise CheckFailed with the
    report summary, the interpreter checked and the failed steps when any required step failed.

    `fleet=True` inside a job with an initialised torch.distributed group: every rank verifies,
    the ranks compare over the group's store (no group is created), and every rank raises when
    the fleet fails or disagrees (kernodeck.fleet). Without a group it is the plain require.

    In this interpreter torch's checks run on the torch the script imports (imported once);
    `isolate_torch=True` runs them in a process of their own, as for `--python` targets.

    The cyclic collector runs less while Kernodeck imports its modules and checks: after
    `import torch` a full collection walks torch's objects too (90 ms each here), and the
    imports alone set off several; a warm require() took 0.33 s instead of 0.47 s."""
    if fleet:
        from kernodeck.fleet.exchange import group_initialized

        if group_initialized():
            from kernodeck.fleet.run import require_in_group

            return require_in_group(lambda: verify(path, **kw), timeout=fleet_timeout)  # type: ignore[arg-type]
    report = verify(path, **kw)  # type: ignore[arg-type]
    if not report.ok:
        from kernodeck.report import Status  # (imported by verify, after the probe started)

        failed = [s for s in report.steps if s.status is Status.FAILED and s.required]
        checked = (
            [f"checked {report.interpreter.path} ({report.interpreter.reason})"]
            if report.interpreter is not None
            else []
        )
        err = CheckFailed(
            report.summary(),
            context=checked + report.notices + [f"{s.layer}/{s.name}: {s.error}" for s in failed[:10]],
            hint=failed[0].hint
            if failed and failed[0].hint
            else "run `kernodeck verify` for the full report",
        )
        err.report = report  # type: ignore[attr-defined]
        raise err
    return report


def doctor(
    *,
    python: str | os.PathLike[str] | Interpreter | None = None,
    compute: bool = True,
    probe: Probe | None = None,
) -> Report:
    """Describe an environment with the same probes, without a manifest (the interpreter chosen
    as for verify). torch is always imported in a process of its own here: doctor is what one
    runs on an environment whose torch may crash."""
    from kernodeck.layers.doctor import run_doctor
    from kernodeck.probe.runner import RealProbe

    if probe is not None:
        return run_doctor(probe, compute=compute)
    chosen = choose(python)
    return run_doctor(RealProbe(chosen, isolate_torch=True), compute=compute, checked=chosen)
