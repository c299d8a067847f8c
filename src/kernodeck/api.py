"""The Python API: `verify(path) -> Report`, and `require(path)` for the first line of a training
script, which raises CheckFailed (carrying the report summary) when anything required failed."""

from __future__ import annotations

import contextlib
import os
import sys
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
    from kernodeck.manifest.schema import Manifest, Platform
    from kernodeck.probe.runner import Probe, RealProbe
    from kernodeck.report import Report

# The manifest, pydantic models, packaging and rich are imported inside the functions, after the
# environment probe has been started: the probe runs while they load.


#: What `checks=` takes: True (every declared check and the resume check), False (none), or the
#: names of the `[[check]]` entries to run ("resume" for the `[resume]` check).
Checks = bool | Iterable[str]


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
    checks: Checks = True,
    rehash: bool = False,
    probe: Probe | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    isolate_torch: bool = False,
) -> Report:
    """Check a live environment against a manifest, layer by layer; never raises for a failed check.

    `python` is the interpreter of the environment to check (default: as kernodeck.interpreters
    chooses: the activated venv, else the activated conda environment, else this one). `checks`:
    the application sample (`[[check]]`) and the `[resume]` check run when True (the default here,
    as for `kernodeck verify`), not at all when False, or only those named. `probe` replaces the
    real probes (tests pass a FakeProbe). torch's backend and device facts are gathered in this
    process, on the torch it imports anyway, when the chosen interpreter is this one; in a process
    of their own (with a timeout: a crashing CUDA init cannot take this process down) for another
    interpreter or with `isolate_torch=True`. Raises UsageError / ManifestError for bad input.
    """
    return _verify(
        path,
        python=python,
        platform=platform,
        only=tuple(only),
        skip=tuple(skip),
        strict=strict,
        compute=compute,
        checks=checks if isinstance(checks, bool) else tuple(checks),
        rehash=rehash,
        probe=probe,
        cache_dir=cache_dir,
        use_cache=use_cache,
        isolate_torch=isolate_torch,
        application=False,
    )


def _verify(
    path: str | os.PathLike[str],
    *,
    python: str | os.PathLike[str] | Interpreter | None,
    platform: str | None,
    only: tuple[str, ...],
    skip: tuple[str, ...],
    strict: bool,
    compute: bool,
    checks: bool | tuple[str, ...],
    rehash: bool,
    probe: Probe | None,
    cache_dir: str | os.PathLike[str] | None,
    use_cache: bool,
    isolate_torch: bool,
    application: bool,
) -> Report:
    """verify(); `application`: the calling process is the application's (require()), whose
    torch settings the determinism checks read."""
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
            real = RealProbe(chosen, cache=cache, rehash=rehash, isolate_torch=isolate_torch)
            if application and started is not None:
                _import_torch_ahead(real, manifest, file, platform, only, skip)
            probe = real
        return run_verify(
            manifest,
            file.absolute(),
            probe,
            platform=platform,
            only=only,
            skip=skip,
            strict=strict,
            compute=compute,
            checks=checks,
            cache=cache,
            checked=chosen,
            application=application,
        )
    finally:
        if started is not None:
            launch.discard(started)  # nothing to do when the probe was taken


def _import_torch_ahead(
    probe: RealProbe,
    manifest: Manifest,
    file: Path,
    platform: str | None,
    only: tuple[str, ...],
    skip: tuple[str, ...],
) -> None:
    """require() before the script's `import torch`: torch imported now, in this process, while
    the environment probe (started before) runs on another core, where the checks would import it
    here later anyway: the backend or device layer selected, the interpreter checked is this one,
    torch not imported yet, and the lock mostly installed (in the wrong environment torch is not
    imported: layers.run). Which platform the probe's facts will choose is not known yet: every
    one it may choose (the one named, the manifest's only one, else each of this os and arch)
    must have its lock mostly installed."""
    if "torch" in sys.modules or not probe.torch_in_process:
        return
    from packaging.markers import default_environment

    from kernodeck.layers import Layer, selected
    from kernodeck.layers.packages import installed_names, mostly_installed

    if not {Layer.BACKEND, Layer.DEVICE} & set(selected(only, skip)):
        return
    candidates = _platforms_possible(manifest, platform)
    markers = {k: str(v) for k, v in default_environment().items()}
    names = installed_names(sys.path)
    if candidates and all(mostly_installed(file.absolute(), p, names, markers) for p in candidates):
        probe.import_torch_ahead()


def _platforms_possible(manifest: Manifest, platform: str | None) -> list[Platform]:
    """The platforms the probe's facts may choose for this interpreter: the one named or the
    manifest's only one (as layers.run chooses them), else those of this host's os and arch."""
    import platform as host

    from kernodeck.layers.run import choose_platform
    from kernodeck.platforms import norm_arch, os_of_sys_platform

    try:
        return [choose_platform(manifest, None, platform).platform]
    except KernodeckError:  # several platforms: the facts tell which
        pass
    here = (os_of_sys_platform(sys.platform), norm_arch(host.machine()))
    return [p for p in manifest.platform if (p.os, norm_arch(p.arch)) == here]


@fewer_collections()
def require(
    path: str | os.PathLike[str] = "repro.toml",
    *,
    python: str | os.PathLike[str] | Interpreter | None = None,
    platform: str | None = None,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    strict: bool = False,
    compute: bool = True,
    checks: Checks = False,
    rehash: bool = False,
    probe: Probe | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    isolate_torch: bool = False,
    fleet: bool = False,
    fleet_timeout: float = 120.0,
    log_to: str | Iterable[str] = (),
) -> Report:
    """Verify the environment for the first line of a training script, and raise CheckFailed (the
    summary, the interpreter checked, the failed steps, the first failure's hint) when any required
    step failed. The keywords are verify()'s, plus `fleet`.

    By default the environment is checked: code, data, interpreter, packages, contract, system,
    backend, device, and the `[determinism]` settings in this process. The application sample
    (`[[check]]`) and the `[resume]` check run only when asked: `checks=True` runs them all,
    `checks=["embeddings", "resume"]` those named. They run the application again and take seconds
    to minutes: not something to add to every launch.

    `fleet=True` inside a job with an initialised torch.distributed group: every rank verifies,
    the ranks compare over the group's store (no group is created), and every rank raises when
    the fleet fails or disagrees (kernodeck.fleet). Without a group it is the plain require.

    In this interpreter torch's checks run on the torch the script imports (imported once);
    `isolate_torch=True` runs them in a process of their own, as for `--python` targets. Called
    before the script's `import torch`, require() imports torch while the environment probe runs
    in its own process (on another core), not after it: unless the lock is mostly missing (the
    wrong environment, where torch is not imported at all). Measured with a 375-distribution lock in
    benchmarks/results.md ("require() before `import torch`").

    The cyclic collector runs less while Kernodeck imports its modules and checks: after
    `import torch` a full collection walks torch's objects too (90 ms each here), and the
    imports alone set off several; a warm require() took 0.33 s instead of 0.47 s.

    `log_to="mlflow"` (or "wandb", or both in a list) logs the report to the active run of that
    tracker before anything is raised: the JSON and HTML reports as artifacts, the verdict, reference
    id, platform, lock digest, torch build and first failure as tags (kernodeck.trackers). Under
    `fleet=True` only rank 0 logs."""

    def run() -> Report:
        return _verify(
            path,
            python=python,
            platform=platform,
            only=tuple(only),
            skip=tuple(skip),
            strict=strict,
            compute=compute,
            checks=checks if isinstance(checks, bool) else tuple(checks),
            rehash=rehash,
            probe=probe,
            cache_dir=cache_dir,
            use_cache=use_cache,
            isolate_torch=isolate_torch,
            application=True,
        )

    if fleet:
        from kernodeck.fleet.exchange import group_initialized

        if group_initialized():
            from kernodeck.fleet.run import require_in_group

            return require_in_group(
                lambda: _logged(run(), log_to, path, rank0_only=True), timeout=fleet_timeout
            )
    report = _logged(run(), log_to, path)
    if not report.ok:
        raise check_failed(report)
    return report


def _logged(
    report: Report, log_to: str | Iterable[str], path: str | os.PathLike[str], *, rank0_only: bool = False
) -> Report:
    """`report`, logged first to the trackers `log_to` names (none: nothing is imported)."""
    wanted = [log_to] if isinstance(log_to, str) else list(log_to)
    if not wanted:
        return report
    if rank0_only:
        import torch.distributed as dist

        if dist.get_rank() != 0:
            return report
    from kernodeck.trackers import log_report

    manifest = Path(path)
    log_report(report, wanted, manifest=manifest / "repro.toml" if manifest.is_dir() else manifest)
    return report


def check_failed(report: Report) -> CheckFailed:
    """The CheckFailed of a failed report: the CLI's summary, the interpreter checked, the notices
    and the failed steps, and the first failure's hint (its text ends with it)."""
    from kernodeck.report import Status  # (imported by verify, after the probe started)

    failed = [s for s in report.steps if s.status is Status.FAILED and s.required]
    checked = (
        [f"checked {report.interpreter.path} ({report.interpreter.reason})"]
        if report.interpreter is not None
        else []
    )
    first_hint = failed[0].hint if failed and failed[0].hint else None
    return CheckFailed(
        report.summary(),
        context=checked + report.notices + [f"{s.layer}/{s.name}: {s.error}" for s in failed[:10]],
        hint=first_hint or "run `kernodeck verify` for the full report",
        report=report,
    )


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
