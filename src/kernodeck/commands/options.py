"""Options and arguments shared by several commands: one CLI grammar.

- The manifest (or a bundle folder) is the first positional argument of every command that takes
  one, default `repro.toml`; a folder means the `repro.toml` inside it. The old `--manifest PATH`
  spelling still works for one release and prints a deprecation note.
- `--json FILE|-` everywhere: a file, or `-` for stdout (the human report then goes to stderr).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_MANIFEST = "repro.toml"


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
            kwargs[dest] = Path(given) if given is not None else Path(DEFAULT_MANIFEST)
            return fn(*args, **kwargs)

        wrapped = click.option("--manifest", "_manifest_option", default=None, hidden=True)(wrapper)
        wrapped = click.argument(dest, required=False, default=None, metavar=f"[{what}]")(wrapped)
        return wrapped  # type: ignore[return-value]

    return decorate


def manifest_file(path: Path) -> Path:
    """A manifest path as given: a folder means the repro.toml inside it."""
    return path / DEFAULT_MANIFEST if path.is_dir() else path


def json_option(help_text: str = "Also write the report as JSON to FILE ('-': stdout).") -> Callable[[F], F]:
    """`--json FILE|-`; a bare `--json` at the end of the line means stdout."""
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


def quiet_option(help_text: str = "Print no progress, only the result.") -> Callable[[F], F]:
    """`--quiet` / `-q`."""
    return click.option("--quiet", "-q", "quiet", is_flag=True, help=help_text)
