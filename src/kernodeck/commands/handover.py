from __future__ import annotations

import click

from kernodeck.errors import UsageError


@click.command()
@click.argument("source", default="repro.toml")
def rebuild(source: str) -> None:
    """Recreate the environment in a clean folder and re-run the whole sequence."""
    raise UsageError("rebuild is not built yet")


@click.command()
@click.argument("out")
def bundle(out: str) -> None:
    """Write a hand-over folder another launch can use."""
    raise UsageError("bundle is not built yet")


@click.command()
def capture() -> None:
    """Update repro.toml from the reference environment it runs in."""
    raise UsageError("capture is not built yet")
