"""Click commands other than the manifest ones, one module per command family.

Each module defines click commands; COMMANDS names them for cli.py, which imports a command's
module only when that command runs (or `--help` lists them): `kernodeck lock` does not load
verify's, rebuild's or report's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click

#: command name -> "module:attribute" of its click command, the module under kernodeck.commands
COMMANDS: dict[str, str] = {
    "lock": "lock:lock",
    "verify": "verify:verify",
    "doctor": "verify:doctor",
    "check": "check:check",
    "rebuild": "handover:rebuild",
    "bundle": "handover:bundle",
    "capture": "handover:capture",
    "diff": "diff:diff",
    "report": "report:report",
}


def load(name: str) -> click.Command:
    """The click command `name` (one of COMMANDS), its module imported now."""
    module, _, attribute = COMMANDS[name].partition(":")
    command: click.Command = getattr(importlib.import_module(f"kernodeck.commands.{module}"), attribute)
    return command
