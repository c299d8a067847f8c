"""Every output a command was asked for, from one report: the human report on the terminal, and
the files of `--junit`, `--markdown` and `--html`; under GitHub Actions also the annotations and
the job's step summary (`kernodeck.render.github`), with the human report printed where the
runner reads no workflow command. The options are declared once in `kernodeck.commands.options`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # the command line imports this module at start-up: no pydantic here
    from kernodeck.report import Report


@dataclass(frozen=True)
class OutputOptions:
    """What `report_options` parsed: how to print the report and which files to write."""

    color: str = "auto"
    quiet: bool = False
    verbose: bool = False
    junit: Path | None = None
    markdown: Path | None = None
    html: Path | None = None


def emit(
    report: Report,
    options: OutputOptions | None = None,
    stream: IO[str] | None = None,
    folder: Path | None = None,
) -> None:
    """Print the human report to `stream` (stdout) and write the requested files; `folder`: the
    manifest's, where the files GitHub annotations point at are (None: the current folder)."""
    from kernodeck.render.github import commands_stopped, github_outputs
    from kernodeck.render.markdown import write_markdown
    from kernodeck.render.terminal import render_report

    opts = options or OutputOptions()
    out = stream if stream is not None else sys.stdout
    if opts.junit is not None:
        from kernodeck.render.junit import write_junit

        write_junit(report, opts.junit)
    if opts.markdown is not None:
        write_markdown(report, opts.markdown)
    # annotations first: the human report's summary stays the last line
    github_outputs(report, out, folder=folder)
    with commands_stopped(out):  # under GitHub Actions no line of the report is a command
        render_report(report, out, color=opts.color, quiet=opts.quiet, verbose=opts.verbose)
    if opts.html is not None:
        from kernodeck.render.html import write_html

        write_html(report, opts.html)
