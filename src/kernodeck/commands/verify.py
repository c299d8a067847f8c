from __future__ import annotations

import click

from kernodeck.errors import UsageError


@click.command()
@click.argument("manifest", default="repro.toml")
def verify(manifest: str) -> None:
    """Check a live environment against repro.toml, layer by layer."""
    raise UsageError("verify is not built yet")


@click.command()
def doctor() -> None:
    """Describe the environment: interpreter, packages, system, torch, devices."""
    raise UsageError("doctor is not built yet")
