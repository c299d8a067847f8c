from __future__ import annotations

import click

from kernodeck.errors import UsageError


@click.command()
@click.argument("names", nargs=-1)
def check(names: tuple[str, ...]) -> None:
    """Run the application checks and the resume check."""
    raise UsageError("check is not built yet")
