"""`kernodeck lock`: resolve repro.toml into requirements-rebuild-<platform>.txt for every platform.

The command decides what a person sees: the progress display (`RichProgress`, on stderr when it
is a terminal and not -q), the summary, the failures and the exit code. The work is
`kernodeck.lock.orchestrate.lock_manifest`, which shows nothing on its own.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import click

from kernodeck.commands.options import default_manifest, json_option, quiet_option
from kernodeck.errors import EXIT_FAILED, KernodeckError
from kernodeck.support.fsio import write_text_or_stdout

if TYPE_CHECKING:
    from kernodeck.lock.orchestrate import LockProgress, LockResult, PlatformFailure


@click.command()
@click.argument(
    "manifest", required=False, default=None, type=click.Path(path_type=Path), metavar="[MANIFEST]"
)
@click.option(
    "--platform", "platforms", multiple=True, metavar="NAME", help="Lock only this platform (repeatable)."
)
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 with a diff if a file is missing or stale."
)
@click.option("--upgrade", "-U", is_flag=True, help="Ignore the versions pinned in the existing files.")
@click.option(
    "--upgrade-package",
    "-P",
    "upgrade_packages",
    multiple=True,
    metavar="NAME[SPEC]",
    help="Ignore the existing pin of this package only; with a specifier (numpy<2.3) also constrain it "
    "(repeatable).",
)
@click.option("--offline", is_flag=True, help="Use only the cache; never touch the network.")
@click.option("--refresh", is_flag=True, help="Re-fetch every project page instead of trusting the cache.")
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Write the files here instead of next to the manifest.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["requirements", "pylock"]),
    default="requirements",
    show_default=True,
    help="pylock also writes a PEP 751 pylock.<platform>.toml per platform.",
)
@click.option(
    "--mirror",
    "mirrors",
    multiple=True,
    metavar="NAME=URL",
    help="Fetch index NAME (an index of repro.toml, `default` or `pytorch`) from URL; the files still "
    "name the declared index (repeatable; default: $KERNODECK_MIRRORS, space-separated).",
)
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None, hidden=True)
@quiet_option()
@click.option(
    "--stats",
    "show_stats",
    is_flag=True,
    help="Say what the lock did: requests and bytes per host, cache hits, resolution rounds and "
    "backtracks, CPU seconds of pages, metadata and resolution (also under `stats` in --json).",
)
@json_option(
    "Also write the result as JSON to FILE ('-': stdout): platforms, failures, differences; when "
    "nothing could be locked, ok false and the error."
)
@click.pass_context
def lock(
    ctx: click.Context,
    manifest: Path | None,
    platforms: tuple[str, ...],
    check: bool,
    upgrade: bool,
    upgrade_packages: tuple[str, ...],
    offline: bool,
    refresh: bool,
    output_dir: Path | None,
    fmt: str,
    cache_dir: Path | None,
    quiet: bool,
    json_out: str | None,
    mirrors: tuple[str, ...],
    show_stats: bool,
) -> None:
    """Resolve repro.toml into requirements-rebuild-<platform>.txt for every platform."""
    from kernodeck.lock.orchestrate import Format, lock_manifest

    manifest = manifest if manifest is not None else default_manifest()
    progress = progress_for(quiet, sys.stderr)
    try:
        result = lock_manifest(
            manifest,
            list(platforms) or None,
            output_dir=output_dir,
            check=check,
            upgrade=upgrade,
            upgrade_packages=upgrade_packages,
            offline=offline,
            fmt=cast(Format, fmt),
            refresh=refresh,
            cache_dir=cache_dir,
            progress=progress,
            mirrors=list(mirrors) or None,
        )
    except KernodeckError as e:
        if json_out is not None:  # a script reading the JSON learns why there is no result
            _write_json(json_out, {"ok": False, "check": check, "error": _error_json(e)})
        raise
    if json_out is not None:
        _write_json(json_out, _json(result, show_stats))
    _report_stats(result, show_stats)
    if not quiet:
        for notice in result.notices:
            click.echo(f"note: {notice}", err=True)
        for r in result.adopted:
            click.echo(r.line(), err=True)
    _report_differences(result, quiet)
    if check:
        _report_check(ctx, result, quiet, json_out)
        return
    if not quiet:
        _report_written(result)
    _report_failures(result)
    if result.failed:
        ctx.exit(EXIT_FAILED)


def _report_check(ctx: click.Context, result: LockResult, quiet: bool, json_out: str | None) -> None:
    """`lock --check`: each platform's file up to date, missing or out of date (with its diff), and
    the files a lock would remove; exit EXIT_FAILED when any would change or failed."""
    for p in result.platforms:
        if p.status == "fresh":
            if not quiet:
                click.echo(f"{p.requirements_path.name}: up to date", err=True)
            continue
        what = "missing" if p.status == "missing" else "out of date"
        click.echo(f"{p.requirements_path.name}: {what}", err=True)
        for reason in p.reasons:
            click.echo(f"  {reason}", err=True)
        if p.diff and json_out != "-":
            click.echo(p.diff, nl=not p.diff.endswith("\n"))
    for left in result.left_over:
        for f in left.paths:
            click.echo(f"{f.name}: left over", err=True)
            click.echo(f"  {left.describe(result.manifest_path.name)}; `kernodeck lock` removes it", err=True)
    _report_failures(result)
    changing = len(result.stale) + len(result.left_over)
    if result.failed and not changing:
        ctx.exit(EXIT_FAILED)
    if not result.ok:
        click.echo(
            f"error: the lock files of {changing} platform(s) would change; run `kernodeck lock` "
            "to update them",
            err=True,
        )
        ctx.exit(EXIT_FAILED)


def _report_written(result: LockResult) -> None:
    """What a lock removed and wrote (or left unchanged), per platform, with its warnings."""
    for left in result.left_over:
        for f in left.paths:
            click.echo(f"removed {f.name}: {left.describe(result.manifest_path.name)}", err=True)
    if result.left_over:
        click.echo(
            "note: the other platforms keep their pins, versions held back to match a removed platform "
            "too; `kernodeck lock --upgrade` (or --upgrade-package NAME) takes newer ones",
            err=True,
        )
    for p in result.platforms:
        verb = "wrote" if p.status == "written" else "unchanged"
        click.echo(
            f"{verb} {p.requirements_path.name}: {p.pins} pins, {p.hash_lines} hashes ({p.summary})", err=True
        )
        for w in p.warnings:
            click.echo(f"  warning: {w}", err=True)
    if sys.stderr.isatty():
        click.echo(f"locked {len(result.platforms)} platform(s) in {result.seconds:.2f}s", err=True)


def _report_failures(result: LockResult) -> None:
    """One message per platform that could not be locked (its files are left as they were)."""
    for f in result.failed:
        context, hint = f.details()
        click.echo(f"error: {f.message()}", err=True)
        for line in context:
            click.echo(f"  {line}", err=True)
        if hint:
            click.echo(f"hint: {hint}", err=True)
        if f.on_disk is not None:  # --check: known from the lock inputs alone
            click.echo(f"error: {f.on_disk}", err=True)
    if result.failed:
        kept = ", ".join(f.platform for f in result.failed)
        click.echo(
            f"hint: the files of {kept} were left as they were; the other platforms were locked", err=True
        )


def _report_differences(result: LockResult, quiet: bool) -> None:
    if quiet:
        return
    if result.held:
        from kernodeck.resolve.joint import describe_held

        click.echo(
            f"{len({h.name for h in result.held})} package(s) held back on a platform to match the others "
            '(same-versions = "no" resolves each platform on its own):',
            err=True,
        )
        for line in describe_held(result.held):
            click.echo(f"  {line}", err=True)
    if not result.differences:
        return
    click.echo(f"{len(result.differences)} package(s) differ across platforms:", err=True)
    for d in result.differences:
        click.echo(f"  {d.describe()}", err=True)


def _write_json(json_out: str, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    write_text_or_stdout(json_out, text)


def _error_json(e: KernodeckError) -> dict[str, Any]:
    """What stopped the lock, as the terminal says it; credentials in URLs concealed again, since
    this goes to a file."""
    from kernodeck.support.urls import redact

    return {
        "message": redact(e.message),
        "context": [redact(c) for c in e.context],
        "hint": redact(e.hint) if e.hint else e.hint,
        "exit_code": e.exit_code,
    }


def _json(result: LockResult, with_stats: bool = False) -> dict[str, Any]:
    stats = {"stats": result.stats.to_json()} if with_stats and result.stats is not None else {}
    return stats | {
        "ok": result.ok,
        "check": result.check,
        "platforms": [
            {
                "platform": p.platform,
                "status": p.status,
                "file": str(p.requirements_path),
                "pins": p.pins,
                "hashes": p.hash_lines,
                "summary": p.summary,
                "reasons": list(p.reasons),
                "warnings": list(p.warnings),
            }
            for p in result.platforms
        ],
        "failed": [_failure_json(f) for f in result.failed],
        "differences": [d.to_json() for d in result.differences],
        "held": [h.to_json() for h in result.held],
        "notices": list(result.notices),
        "adopted": [r.to_json() for r in result.adopted],
        # removed by this lock; with --check, files a lock would remove
        "left_over": [
            {"platform": left.platform, "files": [str(f) for f in left.paths]} for left in result.left_over
        ],
    }


def _report_stats(result: LockResult, asked: bool) -> None:
    if not asked or result.stats is None:
        return
    click.echo("stats:", err=True)
    for line in result.stats.lines():
        click.echo(f"  {line}", err=True)


def _failure_json(f: PlatformFailure) -> dict[str, Any]:
    context, hint = f.details()
    return {
        "platform": f.platform,
        "index": f.index_url,
        "cause": f.cause,
        "context": context,
        "hint": hint,
        "on_disk": f.on_disk,
    }


def progress_for(quiet: bool, stream: TextIO) -> LockProgress | None:
    """The progress display of a lock: rich on a terminal, none when quiet or redirected."""
    return None if quiet or not stream.isatty() else RichProgress()


class RichProgress:
    """Progress on stderr: packages pinned and metadata read, per platform (a
    `kernodeck.lock.orchestrate.LockProgress`; called from the lock's resolver threads)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn("{task.fields[pins]} pinned, {task.fields[meta]} metadata"),
            TextColumn("{task.fields[last]}", style="dim"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._tasks: dict[str, int] = {}
        self._counts: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def start(self, platforms: Sequence[str]) -> None:
        self._progress.start()
        for p in platforms:
            self._tasks[p] = int(self._progress.add_task(p, total=None, pins=0, meta=0, last=""))
            self._counts[p] = [0, 0]

    def pinned(self, platform: str, what: str) -> None:
        with self._lock:
            c = self._counts[platform]
            c[0] += 1
            self._progress.update(self._tasks[platform], pins=c[0], last=what)  # type: ignore[arg-type]

    def metadata(self, platform: str) -> None:
        with self._lock:
            c = self._counts[platform]
            c[1] += 1
            self._progress.update(self._tasks[platform], meta=c[1])  # type: ignore[arg-type]

    def done(self, platform: str, pins: int) -> None:
        with self._lock:
            self._progress.update(self._tasks[platform], pins=pins, last="done", total=1, completed=1)  # type: ignore[arg-type]

    def close(self) -> None:
        self._progress.stop()
