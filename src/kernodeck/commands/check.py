"""`kernodeck check [NAME]...`: run the application checks and the resume check on their own.

Exit 0 when every required step passed, 1 when one failed, 2 for bad input or usage.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kernodeck.commands.options import (
    PYTHON_DEFAULT,
    RESUME,
    default_manifest,
    deprecated,
    human_stream,
    json_option,
    report_options,
)
from kernodeck.lockfile.names import manifest_file
from kernodeck.render.output import OutputOptions

if TYPE_CHECKING:
    from kernodeck.manifest.schema import Manifest
    from kernodeck.report import Step


def split_manifest(args: tuple[str, ...], old_manifest: str | None) -> tuple[Path, tuple[str, ...]]:
    """(manifest, check names) from `[MANIFEST] [NAME]...` and the deprecated `--manifest`."""
    given: Path | None = None
    if args and (args[0].endswith(".toml") or Path(args[0]).is_dir()):
        given, args = Path(args[0]), args[1:]
    if old_manifest is not None:
        deprecated("--manifest PATH", "the first positional argument (kernodeck check MANIFEST [NAME]...)")
        if given is not None and given != Path(old_manifest):
            raise click.UsageError(f"the manifest is given twice: {given} and --manifest {old_manifest}")
        given = Path(old_manifest)
    return (given if given is not None else default_manifest()), args


def variance_options(
    repeat: int | None, vary: tuple[str, ...], propose: bool, record: bool, output: OutputOptions
) -> None:
    """--vary and --propose only with --repeat; --repeat with neither --record nor a report file."""
    if repeat is None and (vary or propose):
        raise click.UsageError("--vary and --propose measure variance: give --repeat N too")
    if repeat is not None and record:
        raise click.UsageError("--record makes one run the reference; it does not go with --repeat")
    if repeat is not None and (output.junit or output.markdown or output.html):
        raise click.UsageError(
            "--junit, --markdown and --html describe one check run; with --repeat, "
            "`kernodeck report FOLDER` draws the variance run's page"
        )


@click.command()
@click.argument("names", nargs=-1, metavar="[MANIFEST] [NAME]...")
@click.option("--manifest", "old_manifest", default=None, hidden=True)
@click.option(
    "--python",
    "python",
    default=None,
    metavar="PATH",
    help=f"Target interpreter (default: {PYTHON_DEFAULT}).",
)
@click.option(
    "--record",
    is_flag=True,
    help="Make this run the reference: write outputs under reference/ and fingerprints into repro.toml.",
)
@json_option(
    "Also write the report (with --repeat: variance.json) as JSON to FILE ('-' or a bare --json: stdout)."
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the outputs and logs (default: a new temporary folder; with --repeat: "
    ".kernodeck/variance/<id>/ beside the manifest).",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Measure variance: run each [[check]] N times in fresh processes (under every --vary condition).",
)
@click.option(
    "--vary",
    multiple=True,
    metavar="NAME=V1,V2",
    help="With --repeat: also run with NAME at each value, one condition at a time (the first value is the "
    "baseline). NAME: threads, determinism, matmul-precision, device, a {placeholder} in the run, or an "
    "environment variable.",
)
@click.option(
    "--propose",
    is_flag=True,
    help="With --repeat: write each output's proposed criterion into repro.toml as a comment (never applied).",
)
@click.option(
    "--safety",
    type=click.FloatRange(min=1.0),
    default=10.0,
    show_default=True,
    help="With --repeat: the factor a proposal puts on the largest deviation observed.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --repeat: runs at the same time (default: the cores available).",
)
@report_options()
def check(
    names: tuple[str, ...],
    old_manifest: str | None,
    python: str | None,
    record: bool,
    json_out: str | None,
    out_dir: Path | None,
    repeat: int | None,
    vary: tuple[str, ...],
    propose: bool,
    safety: float,
    jobs: int | None,
    output: OutputOptions,
) -> None:
    """Run the application checks and the resume check.

    MANIFEST (default ./repro.toml; a folder means the repro.toml inside it) is recognised as a
    path ending in .toml or a folder; NAME: only these checks (`resume`: the resume check).
    With --repeat N, measure how much every output varies instead, and what criterion that
    evidence supports."""
    from kernodeck.interpreters import choose
    from kernodeck.manifest import load_manifest
    from kernodeck.render import emit
    from kernodeck.report import CheckedInterpreter, Report

    manifest_path, names = split_manifest(names, old_manifest)
    variance_options(repeat, vary, propose, record, output)
    path = manifest_file(manifest_path)
    manifest = load_manifest(path)
    root = path.parent.resolve()
    chosen = choose(python, project=root)
    target = chosen.path
    if repeat is not None:
        from kernodeck.commands.variance import run_variance

        code = run_variance(
            path,
            manifest,
            target,
            names=names,
            repeat=repeat,
            vary=vary,
            jobs=jobs,
            safety=safety,
            propose=propose,
            out_dir=out_dir,
            json_out=json_out,
            quiet=output.quiet,
        )
        click.get_current_context().exit(code)
    check_names = [n for n in names if not (n == RESUME and all(c.name != RESUME for c in manifest.check))]
    with_resume = (not names and manifest.resume is not None) or len(check_names) < len(names)

    started = time.perf_counter()
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
        wanted = check_names if check_names or not names else None
        report.add(*_run(manifest, path, target, wanted, with_resume, out_dir))
    report.seconds = round(time.perf_counter() - started, 3)  # a measurement, shown in the summary
    det = next((s.details["determinism"] for s in report.steps if "determinism" in s.details), None)
    if det is not None:
        report.settings["determinism"] = det

    to_stdout = json_out == "-"
    if json_out is not None and not to_stdout:
        report.write_json(json_out)  # first: whatever another output meets, the JSON is written
    # The shared report renderer (kernodeck.render); with `--json -` stdout carries the JSON, so
    # the human report goes to stderr.
    emit(report, output, human_stream(json_out), folder=root)
    if record and report.ok:
        click.echo(
            f"recorded {len(written)} file(s): {', '.join(written) or 'none'}; "
            + (f"updated {path} ({len(changes)} value(s))" if changes else f"{path} unchanged"),
            err=to_stdout,
        )
    if to_stdout:
        click.echo(report.to_json(), nl=False)
    click.get_current_context().exit(report.exit_code)


def _run(
    manifest: Manifest, path: Path, target: str, names: list[str] | None, resume: bool, out_dir: Path | None
) -> list[Step]:
    """The steps of the checks named (all for an empty list, none for None) and of the resume
    check, each pointing at its entry in the manifest at `path`."""
    from kernodeck import checks
    from kernodeck.manifest.where import ManifestLines

    root, lines = path.parent.resolve(), ManifestLines(path)
    out: list[Step] = []
    if names is not None:
        out += checks.steps(manifest, root, target, names=names or None, out_dir=out_dir, lines=lines)
    if resume:
        out += checks.resume_steps(manifest, root, target, out_dir=out_dir, lines=lines)
    return out
