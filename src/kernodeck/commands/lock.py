from __future__ import annotations

import click

from kernodeck.errors import UsageError


@click.command()
@click.argument("manifest", default="repro.toml")
def lock(manifest: str) -> None:
    """Resolve repro.toml into requirements-rebuild-<platform>.txt for every platform."""
    raise UsageError("lock is not built yet")
