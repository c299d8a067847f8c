"""`kernodeck verify` and `kernodeck doctor`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kernodeck.commands.options import (
    PYTHON_DEFAULT,
    default_manifest,
    human_stream,
    isolate_torch_option,
    json_option,
    report_options,
)
from kernodeck.lockfile.names import manifest_file
from kernodeck.render.output import OutputOptions

if TYPE_CHECKING:
    from kernodeck.interpreters import Interpreter


def _target(python: str | None, project: Path, *, own_tool: bool = False) -> str | Interpreter:
    """`--python` as given, else the interpreter chosen for the project folder (an activated
    environment, else the project's `.venv`, else this one): see kernodeck.interpreters."""
    if python is not None:
        return python
    from kernodeck.interpreters import choose

    return choose(project=project, own_tool=own_tool)


@click.command()
@click.argument(
    "manifest", required=False, default=None, type=click.Path(path_type=Path), metavar="[MANIFEST]"
)
@click.option(
    "--python",
    "python",
    default=None,
    metavar="PATH",
    help=f"Interpreter of the environment to check (default: {PYTHON_DEFAULT}).",
)
@click.option(
    "--platform",
    default=None,
    metavar="NAME",
    help="Platform to check against (default: matched from the environment).",
)
@json_option()
@click.option(
    "--only",
    multiple=True,
    metavar="LAYER[,LAYER]",
    help="Run only these layers (comma-separated or repeated).",
)
@click.option(
    "--skip", multiple=True, metavar="LAYER[,LAYER]", help="Skip these layers (comma-separated or repeated)."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Fail instead of warning for distributions not in the lock, without a readable RECORD, or with "
    "files no RECORD lists.",
)
@click.option("--no-compute", is_flag=True, help="Do not run the control computation on the device.")
@click.option("--rehash", is_flag=True, help="Hash every file again, ignoring the fingerprint cache.")
@isolate_torch_option()
@click.option(
    "--fleet",
    is_flag=True,
    help="Verify every rank of a torchrun/srun job and compare them (rank 0 reports).",
)
@click.option(
    "--fleet-timeout",
    default=120.0,
    show_default=True,
    metavar="SECONDS",
    help="With --fleet: how long to wait for the other ranks before naming the missing ones.",
)
@click.option(
    "--fleet-backend",
    type=click.Choice(["gloo", "nccl"]),
    default="gloo",
    show_default=True,
    help="With --fleet: nccl also times one all-reduce on the devices.",
)
@click.option(
    "--log-to",
    "log_to",
    multiple=True,
    metavar="TRACKER",
    help="Also log the report to the active run of an experiment tracker: mlflow or wandb (repeatable): "
    "the JSON and HTML reports as artifacts, the verdict and key facts as tags.",
)
@report_options()
def verify(
    manifest: Path | None,
    python: str | None,
    platform: str | None,
    json_out: str | None,
    only: tuple[str, ...],
    skip: tuple[str, ...],
    strict: bool,
    no_compute: bool,
    rehash: bool,
    isolate_torch: bool,
    fleet: bool,
    fleet_timeout: float,
    fleet_backend: str,
    log_to: tuple[str, ...],
    output: OutputOptions,
) -> None:
    """Check a live environment against repro.toml, layer by layer.

    Layers: code, data, interpreter, packages, contract, system, backend, device, application,
    resume. Exit 0 when everything required passed, 1 when a check failed, 2 for bad input.
    """
    manifest = manifest if manifest is not None else default_manifest()
    if log_to:
        from kernodeck.trackers import available

        available(log_to)  # an unknown tracker or a missing library stops here, before verifying
    from kernodeck.api import verify as run
    from kernodeck.render import emit
    from kernodeck.report import write_json_report

    if fleet:
        from kernodeck.fleet.run import run_cli

        sys.exit(
            run_cli(
                lambda **kw: run(
                    manifest,
                    python=python,
                    platform=platform,
                    only=only,
                    skip=skip,
                    strict=strict,
                    compute=not no_compute,
                    rehash=rehash,
                    **kw,
                ),
                json_out=json_out,
                timeout=fleet_timeout,
                backend=fleet_backend,
                python=python,
                rehash=rehash,
                isolate_torch=isolate_torch,
            )
        )
    report = run(
        manifest,
        python=_target(python, manifest_file(manifest).parent),
        platform=platform,
        only=only,
        skip=skip,
        strict=strict,
        compute=not no_compute,
        rehash=rehash,
        isolate_torch=isolate_torch,
    )
    if json_out is not None:
        write_json_report(report, json_out)
    emit(report, output, human_stream(json_out), folder=manifest_file(manifest).parent)
    if log_to:
        from kernodeck.trackers import log_report

        for line in log_report(report, log_to, manifest=manifest_file(manifest)):
            click.echo(line, err=True)
    sys.exit(report.exit_code)


@click.command()
@click.option(
    "--python",
    "python",
    default=None,
    metavar="PATH",
    help="Interpreter of the environment to describe (default: as for verify, except that Kernodeck's own uv tool or pipx environment is described, saying so, rather than refused).",
)
@json_option()
@click.option("--no-compute", is_flag=True, help="Do not run the control computation.")
@report_options(files=False)
def doctor(python: str | None, json_out: str | None, no_compute: bool, output: OutputOptions) -> None:
    """Describe the environment: interpreter, packages, system, torch, devices (no manifest)."""
    from kernodeck.api import doctor as run
    from kernodeck.render import emit
    from kernodeck.report import write_json_report

    report = run(python=_target(python, Path.cwd(), own_tool=True), compute=not no_compute)
    if json_out is not None:
        write_json_report(report, json_out)
    emit(report, output, human_stream(json_out))
