"""Options and arguments shared by several commands: one CLI grammar.

- The manifest (or a bundle folder) is the first positional argument of every command that takes
  one, default `repro.toml` here or in the nearest folder above (`default_manifest`); a folder
  means the `repro.toml` inside it. The old `--manifest PATH`
  spelling still works for one release and prints a deprecation note.
- `--json FILE|-` everywhere (`json_option`), one behaviour: `--json FILE` writes FILE atomically and
  the human report stays on stdout; `--json -` or a bare `--json` prints the JSON on stdout and the
  human report on stderr (`human_stream`). The writer is `support.fsio.write_text_or_stdout`.
- `-q/--quiet` everywhere (`QUIET_HELP`): only what needs attention is printed (failures, warnings,
  a report's verdict); progress, passed steps and success summaries are left out.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO, TypeVar

import click

from kernodeck.lockfile.names import MANIFEST_NAME

#: Which interpreter `verify`, `check`, `capture` and `diff live` look at without `--python`: the rule of
#: `kernodeck.interpreters.choose(project=...)`, in the words every `--help` uses (README says the same).
PYTHON_DEFAULT = (
    "the activated venv, else the activated conda environment, else the project's .venv (in the "
    "manifest's folder or a parent), else the interpreter running Kernodeck, unless that is its own "
    "uv tool or pipx environment: then the command stops and asks for --python"
)

#: The name `check` and `--repeat` give the `[resume]` check (unless a `[[check]]` is named so).
RESUME = "resume"

F = TypeVar("F", bound=Callable[..., Any])


def default_manifest(cwd: Path | None = None) -> Path:
    """The manifest a command uses when none is named: ./repro.toml, else the nearest repro.toml
    in a folder above, up to the root of the git repository the folder is in (as git and uv find
    their project from a subfolder); else ./repro.toml, whose absence the command reports."""
    here = Path.cwd() if cwd is None else cwd
    for folder in (here, *here.parents):
        found = folder / MANIFEST_NAME
        if found.is_file():
            return Path(MANIFEST_NAME) if folder == here else Path(os.path.relpath(found, here))
        if (folder / ".git").exists():
            break
    return Path(MANIFEST_NAME)


def deprecated(old: str, new: str) -> None:
    """One line on stderr for an old spelling that still works (see CHANGELOG, 'Deprecated')."""
    click.echo(f"note: {old} is deprecated and will be removed in the next release; use {new}", err=True)


def manifest_argument(dest: str = "manifest", *, what: str = "MANIFEST") -> Callable[[F], F]:
    """The manifest as the first positional argument (default ./repro.toml), plus the deprecated
    `--manifest PATH` option; the command receives one `Path` under `dest`."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            old = kwargs.pop("_manifest_option", None)
            given = kwargs.get(dest)
            if old is not None:
                deprecated("--manifest PATH", f"the positional argument ({what})")
                if given is not None and Path(given) != Path(old):
                    raise click.UsageError(f"the manifest is given twice: {given} and --manifest {old}")
                given = old
            kwargs[dest] = Path(given) if given is not None else default_manifest()
            return fn(*args, **kwargs)

        wrapped = click.option("--manifest", "_manifest_option", default=None, hidden=True)(wrapper)
        wrapped = click.argument(dest, required=False, default=None, metavar=f"[{what}]")(wrapped)
        return wrapped  # type: ignore[return-value]

    return decorate


QUIET_HELP = "Print only what needs attention: no progress, no passed steps, no success summary."

JSON_HELP = "Also write the report as JSON to FILE ('-' or a bare --json: stdout, the report then on stderr)."


def quiet_option() -> Callable[[F], F]:
    """`-q/--quiet` with its one meaning (QUIET_HELP); the command receives `quiet`."""
    return click.option("--quiet", "-q", "quiet", is_flag=True, help=QUIET_HELP)


def human_stream(json_out: str | None) -> TextIO:
    """Where the human report goes: stderr when the JSON goes to stdout (`--json -`), else stdout."""
    return sys.stderr if json_out == "-" else sys.stdout


def json_option(help_text: str = JSON_HELP) -> Callable[[F], F]:
    """`--json FILE|-`; a bare `--json` (at the end of the line, or before another option) means stdout."""
    return click.option(
        "--json",
        "json_out",
        default=None,
        is_flag=False,
        flag_value="-",
        metavar="FILE|-",
        help=help_text,
    )


def manifest_option(dest: str = "manifest") -> Callable[[F], F]:
    """`--manifest PATH` (the old grammar; commands move to `manifest_argument`)."""
    return click.option(
        "--manifest",
        dest,
        default="repro.toml",
        show_default=True,
        type=click.Path(path_type=Path),
        help="The manifest (or its folder).",
    )


def isolate_torch_option() -> Callable[[F], F]:
    """`--isolate-torch`: gather torch's backend and device facts in a process of their own even
    when the checked interpreter is the running one (the command receives `isolate_torch`)."""
    return click.option(
        "--isolate-torch",
        "isolate_torch",
        is_flag=True,
        help="Import torch for the backend and device checks in a process of its own, with a timeout, "
        "even when checking this interpreter (a crashing CUDA init cannot take the run down). "
        "Always so for a --python target.",
    )


def report_options(*, files: bool = True) -> Callable[[F], F]:
    """How a report is shown, shared by verify, check, rebuild, doctor and diff: `--color
    auto|always|never`, `--quiet/-q` (passed steps only counted in their layer's heading) and
    `--verbose/-v` (every detail). With `files`, also `--junit FILE`, `--markdown FILE` and `--html
    FILE`. The command receives one `kernodeck.render.OutputOptions` as `output`."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from kernodeck.render.output import OutputOptions

            def path(key: str) -> Path | None:
                value = kwargs.pop(key, None)
                return Path(value) if value else None

            if kwargs.get("_html"):
                from kernodeck.render.html import require_matplotlib

                require_matplotlib()  # before the run: say so now, not after minutes of work
            kwargs["output"] = OutputOptions(
                color=kwargs.pop("_color"),
                quiet=kwargs.pop("_quiet"),
                verbose=kwargs.pop("_verbose"),
                junit=path("_junit"),
                markdown=path("_markdown"),
                html=path("_html"),
            )
            return fn(*args, **kwargs)

        wrapped: Any = wrapper
        if files:
            wrapped = click.option(
                "--html",
                "_html",
                default=None,
                metavar="FILE",
                help="Also write a self-contained HTML report to FILE.",
            )(wrapped)
            wrapped = click.option(
                "--markdown",
                "_markdown",
                default=None,
                metavar="FILE",
                help="Also write a Markdown summary to FILE.",
            )(wrapped)
            wrapped = click.option(
                "--junit", "_junit", default=None, metavar="FILE", help="Also write JUnit XML to FILE."
            )(wrapped)
        wrapped = click.option(
            "--verbose",
            "-v",
            "_verbose",
            is_flag=True,
            help="Show every step's expected, observed and details.",
        )(wrapped)
        wrapped = click.option("--quiet", "-q", "_quiet", is_flag=True, help=QUIET_HELP)(wrapped)
        wrapped = click.option(
            "--color",
            "_color",
            type=click.Choice(["auto", "always", "never"]),
            default="auto",
            show_default=True,
            help="Colours: on a terminal without NO_COLOR (auto), always, or never.",
        )(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate
