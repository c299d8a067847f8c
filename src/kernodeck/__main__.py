from __future__ import annotations

from kernodeck.cli import run

run()
