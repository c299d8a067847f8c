"""`kernodeck report REPORT.json [B.json] [-o FILE]`: the HTML diagnosis of a report, or two
reports side by side by layer."""

from __future__ import annotations

from pathlib import Path

import click


def _variance(path: Path, out: Path | None) -> bool:
    """A variance run's folder (or its variance.json) as HTML; False for any other report."""
    from kernodeck.render.variance import load_variance, variance_file, variance_html
    from kernodeck.support.fsio import atomic_write_text

    data_file = variance_file(path)
    if data_file is None:
        return False
    target = out or data_file.with_suffix(".html")
    atomic_write_text(target, variance_html(load_variance(data_file), str(data_file)))
    click.echo(f"wrote {target}")
    return True


@click.command("report")
@click.argument("reports", nargs=-1, required=True, metavar="REPORT.json [OTHER.json] | VARIANCE-FOLDER")
@click.option(
    "-o",
    "--output",
    "out",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The HTML file (default: the report's name with .html; for two reports A-vs-B.html beside A).",
)
def report(reports: tuple[str, ...], out: Path | None) -> None:
    """Write one self-contained HTML page for a verify, check or rebuild report (JSON).

    With two reports, the page shows them side by side by layer, the layers that differ first.
    A variance run's folder (`kernodeck check --repeat N`) gives its page of distributions.
    The page makes no network request; its charts need the `report` extra (matplotlib).
    """
    from kernodeck.diff import diff_reports, load_report
    from kernodeck.errors import UsageError
    from kernodeck.render.html import diff_html, html_report, require_matplotlib
    from kernodeck.support.fsio import atomic_write_text

    if len(reports) > 2:
        raise UsageError(f"report takes one or two report files, got {len(reports)}")
    require_matplotlib()
    first = Path(reports[0])
    if len(reports) == 1 and _variance(first, out):
        return
    loaded = [load_report(p) for p in reports]
    if len(loaded) == 1:
        target = out or first.with_suffix(".html")
        text = html_report(loaded[0])
    else:
        second = Path(reports[1])
        target = out or first.with_name(f"{first.stem}-vs-{second.stem}.html")
        result = diff_reports(loaded[0], loaded[1], a_name=reports[0], b_name=reports[1])
        text = diff_html(loaded[0], loaded[1], result)
    atomic_write_text(target, text)
    click.echo(f"wrote {target}")
