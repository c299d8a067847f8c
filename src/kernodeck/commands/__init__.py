"""Click commands other than the manifest ones, one module per command family.

Each module defines click commands; COMMANDS lists them for cli.py to register.
"""

from __future__ import annotations

import click

from kernodeck.commands.check import check
from kernodeck.commands.diff import diff
from kernodeck.commands.handover import bundle, capture, rebuild
from kernodeck.commands.lock import lock
from kernodeck.commands.report import report
from kernodeck.commands.verify import doctor, verify

COMMANDS: list[click.Command] = [lock, verify, doctor, check, rebuild, bundle, capture, diff, report]
