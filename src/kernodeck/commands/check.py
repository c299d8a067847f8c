"""`kernodeck check [NAME]...`: run the application checks and the resume check on their own.

Exit 0 when every required step passed, 1 when one failed, 2 for bad input or usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kernodeck.commands.options import manifest_option
from kernodeck.errors import EXIT_FAILED, EXIT_OK

RESUME = "resume"


@click.command()
@click.argument("names", nargs=-1)
@manifest_option("manifest_path")
@click.option(
    "--python",
    "python",
    default=None,
    metavar="PATH",
    help="Target interpreter (default: the activated venv's, else the activated conda environment's, else this one).",
)
@click.option(
    "--record",
    is_flag=True,
    help="Make this run the reference: write outputs under reference/ and fingerprints into repro.toml.",
)
@click.option(
    "--json", "json_out", default=None, metavar="FILE|-", help="Also write the report as JSON ('-': stdout)."
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the outputs and logs (default: a new temporary folder).",
)
def check(
    names: tuple[str, ...],
    manifest_path: Path,
    python: str | None,
    record: bool,
    json_out: str | None,
    out_dir: Path | None,
) -> None:
    """Run the application checks and the resume check (NAME: only these checks; `resume`: the resume check)."""
    from kernodeck import checks
    from kernodeck.interpreters import choose
    from kernodeck.manifest import load_manifest
    from kernodeck.report import CheckedInterpreter, Report, render

    path = manifest_path / "repro.toml" if manifest_path.is_dir() else manifest_path
    manifest = load_manifest(path)
    root = path.parent.resolve()
    chosen = choose(python)
    target = chosen.path
    check_names = [n for n in names if not (n == RESUME and all(c.name != RESUME for c in manifest.check))]
    with_resume = (not names and manifest.resume is not None) or len(check_names) < len(names)

    report = Report(
        kind="record" if record else "check",
        manifest=str(manifest_path),
        reference_id=manifest.reference.id,
        interpreter=CheckedInterpreter(**chosen.as_dict()),
    )
    written: list[str] = []
    changes: list[str] = []
    if record:
        from kernodeck.checks.record import record as do_record

        rec = do_record(
            path, target, names=check_names if names else None, with_resume=with_resume, out_dir=out_dir
        )
        report.add(*rec.steps)
        written, changes = rec.written, rec.changes
    else:
        if check_names or not names:
            report.add(*checks.steps(manifest, root, target, names=check_names or None, out_dir=out_dir))
        if with_resume:
            report.add(*checks.resume_steps(manifest, root, target, out_dir=out_dir))
    det = next((s.details["determinism"] for s in report.steps if "determinism" in s.details), None)
    if det is not None:
        report.settings["determinism"] = det

    to_stdout = json_out == "-"
    # The shared report renderer (tables per layer, colours only on a terminal, NO_COLOR honoured);
    # with `--json -` stdout carries the JSON, so the tables go to stderr.
    render(report, sys.stderr if to_stdout else sys.stdout)
    if record and report.ok:
        click.echo(
            f"recorded {len(written)} file(s): {', '.join(written) or 'none'}; "
            + (f"updated {path} ({len(changes)} value(s))" if changes else f"{path} unchanged"),
            err=to_stdout,
        )
    if json_out is not None:
        if to_stdout:
            click.echo(report.to_json(), nl=False)
        else:
            report.write_json(json_out)
    click.get_current_context().exit(EXIT_OK if report.ok else EXIT_FAILED)
