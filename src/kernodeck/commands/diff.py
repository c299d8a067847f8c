from __future__ import annotations

import click

from kernodeck.errors import UsageError


@click.command()
@click.argument("a")
@click.argument("b")
def diff(a: str, b: str) -> None:
    """Compare two verify reports, grouped by layer."""
    raise UsageError("diff is not built yet")
