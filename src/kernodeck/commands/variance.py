"""`kernodeck check --repeat N`: the variance run's options, progress display and summary.

The work is `kernodeck.checks.variance` (runs, measures) and `kernodeck.checks.propose` (effects,
margins, proposals, the comment block); this module only wires them to the terminal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import click

from kernodeck.manifest.schema import Manifest


class BarProgress:
    """A progress bar on stderr with an estimate of the time left (from the first run's time)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}", style="dim"),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = 0

    def start(self, total: int, jobs: int) -> None:
        self._progress.start()
        self._task = int(self._progress.add_task("runs", total=total, left=f"{jobs} at a time"))

    def done(self, run: object, estimate: float | None) -> None:
        left = f"about {estimate:.0f} s left" if estimate else ""
        self._progress.update(self._task, advance=1, left=left)  # type: ignore[arg-type]

    def close(self) -> None:
        self._progress.stop()


def progress_for(quiet: bool, stream: TextIO) -> BarProgress | None:
    return None if quiet or not stream.isatty() else BarProgress()


def run_variance(
    path: Path,
    manifest: Manifest,
    python: str,
    *,
    names: Sequence[str],
    repeat: int,
    vary: Sequence[str],
    jobs: int | None,
    safety: float,
    propose: bool,
    out_dir: Path | None,
    json_out: str | None,
    quiet: bool,
) -> int:
    """Run, print the evidence, write the proposals when asked; the exit code (1: a run failed or
    a current criterion failed in some run)."""
    from kernodeck.checks import select_checks
    from kernodeck.checks.conditions import parse_vary
    from kernodeck.checks.propose import report_text, variance, write_proposals
    from kernodeck.checks.variance import DATA, Request, cores
    from kernodeck.commands.options import RESUME
    from kernodeck.errors import UsageError

    wanted = [n for n in names if n != RESUME or any(c.name == RESUME for c in manifest.check)]
    if names and not wanted:
        raise UsageError("--repeat measures [[check]]s: the resume check is not repeated")
    selected = select_checks(manifest, wanted or None)
    if not selected:
        raise UsageError("--repeat measures [[check]]s, and the manifest declares none")
    request = Request(selected, parse_vary(vary, selected), repeat, jobs or cores())
    root = path.parent.resolve()
    evidence = variance(
        manifest,
        root,
        python,
        request,
        out_dir=out_dir,
        progress=progress_for(quiet, sys.stderr),
        safety=safety,
    )
    shown = _shown(evidence.folder, root)
    to_stdout = json_out == "-"
    if not quiet:
        click.echo(report_text(evidence, safety, shown), nl=False, err=to_stdout)
    if propose:
        written = write_proposals(path, evidence, safety)
        blocks = len(evidence.outputs)
        click.echo(
            f"wrote the evidence of {blocks} output(s) as comments in {path}, with a proposed criterion for "
            f"{len(written)} of them (nothing applied)",
            err=to_stdout,
        )
    data = (evidence.folder / DATA).read_text(encoding="utf-8")
    if to_stdout:
        click.echo(data, nl=False)
    elif json_out is not None:
        from kernodeck.support.fsio import atomic_write_text

        atomic_write_text(Path(json_out), json.dumps(json.loads(data), indent=1, sort_keys=True) + "\n")
    return 1 if evidence.failed_runs or evidence.criteria_failed else 0


def _shown(folder: Path, root: Path) -> str:
    try:
        return folder.resolve().relative_to(root).as_posix()
    except ValueError:
        return os.fspath(folder)
