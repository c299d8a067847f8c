"""`kernodeck diff A B`: which layer two runs differ in."""

from __future__ import annotations

import click

from kernodeck.commands.options import report_options
from kernodeck.errors import EXIT_FAILED, EXIT_OK
from kernodeck.render.output import OutputOptions


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@click.option(
    "--python", "python", default=None, help="Interpreter to verify for `live` (default: this one)."
)
@click.option("--no-compute", is_flag=True, help="For `live`: skip the device computation.")
@report_options(files=False)
@click.pass_context
def diff(
    ctx: click.Context,
    a: str,
    b: str,
    as_json: bool,
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
    from kernodeck.render.terminal import render_diff

    report_a, name_a = resolve_side(a, python=python, compute=not no_compute)
    report_b, name_b = resolve_side(b, other=report_a, python=python, compute=not no_compute)
    result = diff_reports(report_a, report_b, a_name=name_a, b_name=name_b)
    if as_json:
        click.echo(result.to_json(), nl=False)
    else:
        render_diff(result, color=output.color, quiet=output.quiet, verbose=output.verbose)
    ctx.exit(EXIT_OK if result.identical else EXIT_FAILED)
