"""`kernodeck diff A B`: which layer two runs differ in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kernodeck.commands.options import human_stream, json_option, report_options
from kernodeck.errors import EXIT_FAILED, EXIT_OK, UsageError
from kernodeck.lockfile.names import MANIFEST_NAME
from kernodeck.render.output import OutputOptions

if TYPE_CHECKING:
    from kernodeck.report import Report


@click.command()
@click.argument("a")
@click.argument("b")
@json_option(
    "Also write the differences as JSON to FILE ('-' or a bare --json: stdout, the differences then on stderr)."
)
@click.option(
    "--python", "python", default=None, help="Interpreter to verify for `live` (default: as for verify)."
)
@click.option("--no-compute", is_flag=True, help="For `live`: skip the device computation.")
@report_options(files=False)
@click.pass_context
def diff(
    ctx: click.Context,
    a: str,
    b: str,
    json_out: str | None,
    python: str | None,
    no_compute: bool,
    output: OutputOptions,
) -> None:
    """Compare two verify reports, grouped by layer.

    A and B are report files (`kernodeck verify --json FILE`). B may also be `live` (the live
    environment verified against the manifest A names, or ./repro.toml) or a repro.toml to verify
    the live environment against. Exit 0 when nothing differs, 1 when something does.
    """
    from kernodeck.diff import diff_reports
    from kernodeck.render.github import commands_stopped
    from kernodeck.render.terminal import render_diff
    from kernodeck.support.fsio import write_text_or_stdout

    report_a, name_a = resolve_side(a, python=python, compute=not no_compute)
    report_b, name_b = resolve_side(b, other=report_a, python=python, compute=not no_compute)
    result = diff_reports(report_a, report_b, a_name=name_a, b_name=name_b)
    if json_out is not None:
        write_text_or_stdout(json_out, result.to_json())
    stream = human_stream(json_out)
    with commands_stopped(stream):  # under GitHub Actions no line of it is a workflow command
        render_diff(result, stream, color=output.color, quiet=output.quiet, verbose=output.verbose)
    ctx.exit(EXIT_OK if result.identical else EXIT_FAILED)


def is_manifest_path(arg: str) -> bool:
    p = Path(arg)
    return p.suffix == ".toml" or (p.is_dir() and (p / MANIFEST_NAME).is_file())


def live_report(
    manifest: str | Path,
    *,
    python: str | None = None,
    platform: str | None = None,
    compute: bool = True,
) -> Report:
    """A verify report of the live environment against a manifest."""
    from kernodeck import api  # imported late: verify pulls in the probes
    from kernodeck.interpreters import choose

    path = Path(manifest)
    target = python if python is not None else choose(project=path if path.is_dir() else path.parent)
    report: Report = api.verify(path, python=target, platform=platform, compute=compute)
    return report


def resolve_side(
    arg: str,
    *,
    other: Report | None = None,
    python: str | None = None,
    compute: bool = True,
) -> tuple[Report, str]:
    """A report for one side of `kernodeck diff`: a JSON file, `live` (the manifest the other
    report names, or ./repro.toml), or a manifest (verified against the live environment)."""
    from kernodeck.diff import load_report

    if arg == "live":
        manifest = Path(MANIFEST_NAME)
        if other is not None and other.manifest and Path(other.manifest).is_file():
            manifest = Path(other.manifest)
        if not manifest.is_file():
            raise UsageError(
                "`live` needs a manifest to verify against",
                hint="run in the folder holding repro.toml, or pass the manifest path instead of `live`",
            )
        return live_report(manifest, python=python, compute=compute), f"live ({manifest})"
    if is_manifest_path(arg):
        return live_report(Path(arg), python=python, compute=compute), f"live ({arg})"
    return load_report(arg), arg
