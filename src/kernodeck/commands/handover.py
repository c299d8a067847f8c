"""`kernodeck rebuild`, `kernodeck bundle`, `kernodeck capture`: the hand-over sequence."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from kernodeck.commands.options import (
    PYTHON_DEFAULT,
    default_manifest,
    deprecated,
    human_stream,
    json_option,
    manifest_argument,
    report_options,
)
from kernodeck.errors import EXIT_OK
from kernodeck.render.output import OutputOptions


@click.command()
@click.argument("source", required=False, default=None, metavar="[SOURCE]")
@click.option(
    "--dest", default=".venv-rebuild", show_default=True, help="Folder of the new virtual environment."
)
@click.option(
    "--python",
    "python",
    default=None,
    metavar="VERSION|PATH",
    help="Interpreter: a version found on PATH (3.11) or a path (default: [python] version).",
)
@click.option(
    "--platform",
    "platform",
    default=None,
    help="Platform to rebuild (default: the locked one that fits this host).",
)
@click.option("--installer", type=click.Choice(["pip", "uv"]), default="pip", show_default=True)
@click.option("--force", is_flag=True, help="Delete and recreate a non-empty --dest.")
@json_option()
@click.option("--no-compute", is_flag=True, help="Skip verify's device computation.")
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Install from a lock whose lock inputs differ from the manifest's (reported as a warning).",
)
@click.option(
    "--allowed-signers",
    default=None,
    metavar="FILE",
    help="Require a bundle signed by a key in FILE (git's allowed_signers format; "
    "default: $KERNODECK_ALLOWED_SIGNERS).",
)
@click.option(
    "--mirror",
    "mirrors",
    multiple=True,
    metavar="NAME=URL",
    help="Install through URL where the lock names index NAME (a declared index, `default` or `pytorch`; "
    "repeatable; default: $KERNODECK_MIRRORS, space-separated), as `kernodeck lock --mirror`.",
)
@report_options()
def rebuild(
    source: str | None,
    dest: str,
    python: str | None,
    platform: str | None,
    installer: str,
    force: bool,
    json_out: str | None,
    no_compute: bool,
    allow_stale: bool,
    allowed_signers: str | None,
    mirrors: tuple[str, ...],
    output: OutputOptions,
) -> None:
    """Recreate the environment in a clean folder and re-run the whole sequence.

    SOURCE is a repro.toml (beside its requirements-rebuild-<platform>.txt) or a bundle folder.
    Creates a fresh venv at --dest, then calls its interpreter explicitly to print pip's version,
    install the platform's requirements with --require-hashes --no-deps in an isolated run, check
    the dependency contract, write installed-after.txt, and verify (application checks included).
    While the installer runs, its output is shown as it comes: a status line on a terminal, plain
    "  pip: ..." lines otherwise (--quiet: nothing).

    Nothing is created before the bundle (every file listed in BUNDLE.sha256 and matching; its
    signature with --allowed-signers) and the lock (locked from the manifest as it is now, from
    declared indexes only) are checked.
    """
    from kernodeck.handover.rebuild import plan_rebuild, run_rebuild
    from kernodeck.render import emit
    from kernodeck.report import write_json_report

    to_stdout = json_out == "-"
    plan = plan_rebuild(
        source if source is not None else default_manifest(),
        dest=dest,
        python=python,
        platform=platform,
        installer="uv" if installer == "uv" else "pip",
        force=force,
        allow_stale=allow_stale,
        allowed_signers=allowed_signers,
        mirrors=list(mirrors) or None,
    )
    display = _StageDisplay(quiet=output.quiet)
    display.log(
        f"rebuilding {plan.manifest.reference.name} {plan.manifest.reference.id} for {plan.platform.name} "
        f"into {dest} with {installer}"
    )
    if plan.platform_reason:
        display.log(f"platform {plan.platform.name}: {plan.platform_reason}")
    try:
        result = run_rebuild(plan, compute=not no_compute, log=display.log, progress=display.progress)
    finally:
        display.close()
    report = result.report
    if result.pip_version is not None and not output.quiet:
        click.echo(f"pip --version: {result.pip_version}", err=to_stdout)
    if json_out is not None:
        write_json_report(report, json_out)
    emit(report, output, human_stream(json_out))
    click.get_current_context().exit(result.exit_code)


class _StageDisplay:
    """Rebuild's stage lines and installer progress on stderr: a rich status line that follows the
    installer on a terminal, plain indented lines otherwise, nothing with --quiet."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._status: Any = None
        self._console: Any = None
        if self.tty and not quiet:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False)

    def log(self, message: str) -> None:
        if self.quiet:
            return
        self._stop()
        click.echo(message, err=True)

    def progress(self, line: str) -> None:
        if self.quiet:
            return
        if self._console is None:
            click.echo(f"  {line}", err=True)
            return
        from rich.markup import escape

        if self._status is None:
            self._status = self._console.status(escape(line))
            self._status.start()
        else:
            self._status.update(escape(line))

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def close(self) -> None:
        self._stop()


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="[MANIFEST] OUT")
@click.option("--manifest", "old_manifest", default=None, hidden=True)
@click.option(
    "--include-data",
    is_flag=True,
    help="Copy data, local weights and the checkpoint (default: references only).",
)
@click.option(
    "--no-code",
    is_flag=True,
    help="Leave the code beside the manifest out (REBUILD.md then names the revision).",
)
@click.option(
    "--report",
    "report",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The last verify report (JSON) to include.",
)
@click.option(
    "--allow-dirty",
    is_flag=True,
    help="Bundle code with uncommitted changes (REBUILD.md and verify's code step then say so).",
)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    metavar="NAME",
    help="Bundle only this platform (repeatable; default: every declared platform, each needs a current lock).",
)
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Bundle locks whose lock inputs differ from the manifest's (each reported as a warning).",
)
@click.option(
    "--sign",
    "sign",
    default=None,
    metavar="KEY",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Sign BUNDLE.sha256 with this SSH key (ssh-keygen -Y sign; writes BUNDLE.sha256.sig).",
)
def bundle(
    paths: tuple[str, ...],
    old_manifest: str | None,
    include_data: bool,
    no_code: bool,
    report: Path | None,
    allow_dirty: bool,
    platforms: tuple[str, ...],
    allow_stale: bool,
    sign: Path | None,
) -> None:
    """Write a hand-over folder OUT another launch can use, scrubbed of secrets and host paths.

    MANIFEST (default ./repro.toml; a folder means the repro.toml inside it) comes first, as in
    every command; `kernodeck bundle OUT` bundles ./repro.toml. Every declared platform (or each
    --platform) needs a lock written from the manifest as it is now, from declared indexes."""
    from kernodeck.handover.bundle import write_bundle

    if len(paths) > 2:
        raise click.UsageError("give at most two paths: [MANIFEST] OUT")
    manifest = Path(paths[0]) if len(paths) == 2 else None
    out = Path(paths[-1])
    if old_manifest is not None:
        deprecated("--manifest PATH", "the first positional argument (kernodeck bundle MANIFEST OUT)")
        if manifest is not None and manifest != Path(old_manifest):
            raise click.UsageError(f"the manifest is given twice: {manifest} and --manifest {old_manifest}")
        manifest = Path(old_manifest)
    manifest = manifest if manifest is not None else default_manifest()

    result = write_bundle(
        out,
        manifest=manifest,
        include_data=include_data,
        include_code=not no_code,
        report=report,
        allow_dirty=allow_dirty,
        platforms=platforms,
        allow_stale=allow_stale,
        sign=sign,
    )
    click.echo(result.render())


@click.command()
@manifest_argument()
@click.option(
    "--variant", default=None, help="Record the differences as a [[variant]] NAME beside the reference."
)
@click.option("--note", default=None, help="A note for the variant.")
@click.option(
    "--python",
    "python",
    default=None,
    metavar="PATH",
    help=f"The reference environment's interpreter (default: {PYTHON_DEFAULT}).",
)
@click.option("--no-system", is_flag=True, help="Do not probe the system (driver, CUDA/ROCm, devices).")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option(
    "--data",
    "only",
    default=None,
    metavar="NAME",
    help="Refresh only the fingerprint of the [[data]] or [[weights]] entry NAME.",
)
def capture(
    manifest: Path,
    variant: str | None,
    note: str | None,
    python: str | None,
    no_system: bool,
    dry_run: bool,
    only: str | None,
) -> None:
    """Update repro.toml from the reference environment it runs in.

    Records the code revision, configuration, data and weight fingerprints and the observed system
    (driver, CUDA/ROCm, devices), keeping every comment. When anything changes, the reference gets a
    new id and the changes are listed; with --variant they are written as a variant instead. A data
    or weights fingerprint left out (or "") is filled in without a new id.
    """
    from kernodeck.capture import capture as do_capture
    from kernodeck.capture import observe_system

    result = do_capture(
        manifest,
        variant=variant,
        note=note,
        python=python,
        system_probe=None if no_system else observe_system,
        dry_run=dry_run,
        only=only,
    )
    click.echo(result.render())
    if dry_run and (result.changes or result.filled):
        click.echo("(dry run: nothing written)")
    click.get_current_context().exit(EXIT_OK)
