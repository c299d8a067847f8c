"""The command line: commands, their options and exit codes. Work is done elsewhere.

Exit codes everywhere: 0 ok, 1 a check or resolution failed, 2 bad input or usage. A
KernodeckError is printed as message + context + hint, never as a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from kernodeck.commands.options import quiet_option
from kernodeck.errors import EXIT_USAGE, KernodeckError
from kernodeck.support.envvars import DEBUG


class _Group(click.Group):
    """The commands of `kernodeck.commands` are loaded when one of them runs or help lists them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from kernodeck.commands import COMMANDS

        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            from kernodeck.commands import COMMANDS, load

            if cmd_name in COMMANDS:
                command = load(cmd_name)
                self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KernodeckError as e:
            _tell(e.render())
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as e:  # a bug: say so plainly; the traceback only on request
            if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
                # a full disk met outside kernodeck.support.fsio (a download, a cache folder): not a bug
                from kernodeck.support.fsio import DiskFull

                full = DiskFull(Path(e.filename).parent if e.filename else Path.cwd(), e)
                click.echo(full.render(), err=True)
                ctx.exit(full.exit_code)
            if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                # a path the system refuses (permissions, a read-only file system): not a bug
                where = f": {e.filename}" if e.filename else ""
                refused = KernodeckError(
                    f"{e.strerror or e}{where}",
                    hint="check the permissions of that path, or run where you may read and write",
                )
                click.echo(refused.render(), err=True)
                ctx.exit(refused.exit_code)
            if DEBUG.raw():
                raise
            _tell(f"internal error: {type(e).__name__}: {e}")
            click.echo(
                "hint: this is a bug in kernodeck; rerun with KERNODECK_DEBUG=1 for the traceback", err=True
            )
            ctx.exit(1)


def _tell(text: str) -> None:
    """An error on stderr. It may quote paths, names and a program's output: control characters
    are made visible, and under GitHub Actions no line of it is read as a workflow command."""
    from kernodeck.render.github import commands_stopped
    from kernodeck.render.visible import visible

    with commands_stopped(sys.stderr):
        click.echo(visible(text), err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernodeck")
def cli() -> None:
    """Reproduction manifests for ML environments: lock, verify, rebuild, hand over."""


@cli.command()
@click.argument("path", required=False, default=None, type=click.Path(path_type=Path), metavar="[PATH]")
@quiet_option()
def validate(path: Path | None, quiet: bool) -> None:
    """Load and check a manifest (default: ./repro.toml, or the nearest one above)."""
    from kernodeck.commands.options import default_manifest
    from kernodeck.manifest import load_manifest

    path = path if path is not None else default_manifest()
    from kernodeck.manifest.sources import manifest_warnings

    m = load_manifest(path)
    for warning in manifest_warnings(m, path):
        click.echo(f"warning: {warning}", err=True)
    if not quiet:
        click.echo(
            f"{path}: valid (reference {m.reference.name} {m.reference.id}, "
            f"{len(m.platform)} platform{'s' if len(m.platform) != 1 else ''})"
        )


@cli.command()
def schema() -> None:
    """Print the JSON Schema of repro.toml."""
    from kernodeck.manifest.jsonschema import schema_text

    click.echo(schema_text(), nl=False)


@cli.command()
@click.argument("directory", default=".", type=click.Path(path_type=Path, file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing repro.toml.")
@click.option("--name", default=None, help="Reference name (default: the folder's name).")
@click.option(
    "--from-env",
    "from_env",
    default=None,
    metavar="PYTHON",
    help="Adopt a working environment: its leaves become the requirements, its versions preferences.",
)
def init(directory: Path, force: bool, name: str | None, from_env: str | None) -> None:
    """Write a commented starter repro.toml for a project folder."""
    from kernodeck.manifest.fromenv import ENV_PINS, adopt_environment
    from kernodeck.manifest.init import write_starter

    env = adopt_environment(from_env, directory) if from_env is not None else None
    path, notes = write_starter(directory, force=force, name=name, env=env)
    if env is not None:
        click.echo(
            f"adopted {from_env}: {len(env.requirements)} requirements (the leaves of {env.installed} "
            f"installed), versions to keep in {path.parent / ENV_PINS}"
        )
        for line in env.not_locked:
            click.echo(f"not locked: {line}")
    click.echo(f"wrote {path}; edit it, then run `kernodeck validate {path}`")
    for note in notes:
        click.echo(f"note: {note}", err=True)


def main(argv: list[str] | None = None) -> int:
    """The command line, in this process; returns the exit code (`run` is the `kernodeck`
    command itself)."""
    try:
        cli.main(args=argv, prog_name="kernodeck", standalone_mode=True)
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        click.echo(str(code), err=True)
        return EXIT_USAGE
    return 0


def run() -> NoReturn:
    """The `kernodeck` command (console script, `python -m kernodeck`): `main`, then `leave`."""
    # httpx imports its own command line (rich, pygments) and httpcore its async backends and
    # HTTP/2 stack whenever they are installed; this process runs none of them (see httpmods).
    from kernodeck.support.httpmods import keep_unused_out
    from kernodeck.support.pydanticplugins import load_none

    keep_unused_out()
    load_none()
    leave(main())


def leave(code: int) -> NoReturn:
    """End the process with `code` the way the interpreter would, without tearing it down.

    First what the interpreter does at exit: the thread pools' workers are stopped and every
    other thread joined, then the atexit handlers run (temporary folders removed, probe children
    reaped), then stdout and stderr are flushed. Then the process ends: the millions of objects of
    a lock's index pages are not freed one by one (0.07-0.13 s of every lock, measured cold and
    warm). Where this Python lacks what that needs, it exits as usual."""
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None:
        sys.exit(code)
    shutdown()
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe (`| head`) or stream: nothing more to say
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
