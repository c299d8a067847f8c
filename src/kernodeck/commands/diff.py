"""`kernodeck diff A B`: which layer two runs differ in."""

from __future__ import annotations

import click

from kernodeck.commands.options import json_option, report_options
from kernodeck.errors import EXIT_FAILED, EXIT_OK
from kernodeck.render.output import OutputOptions


@click.command()
@click.argument("a")
@click.argument("b")
@json_option("Also write the differences as JSON to FILE ('-' or a bare --json: stdout).")
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
    from kernodeck.diff import diff_reports, resolve_side
    from kernodeck.fsio import atomic_write_text
    from kernodeck.render.terminal import render_diff

    report_a, name_a = resolve_side(a, python=python, compute=not no_compute)
    report_b, name_b = resolve_side(b, other=report_a, python=python, compute=not no_compute)
    result = diff_reports(report_a, report_b, a_name=name_a, b_name=name_b)
    if json_out == "-":
        click.echo(result.to_json(), nl=False)
    else:
        if json_out is not None:
            atomic_write_text(json_out, result.to_json())
        render_diff(result, color=output.color, quiet=output.quiet, verbose=output.verbose)
    ctx.exit(EXIT_OK if result.identical else EXIT_FAILED)
