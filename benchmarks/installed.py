"""Kernodeck timed as an installed copy runs: from compiled modules.

An installed tool has its modules' .pyc files. A source tree edited since its last import has
none for the edited modules, and with PYTHONDONTWRITEBYTECODE set (as on some machines) every
timed run would compile them again: tens of milliseconds that no user pays.
"""

from __future__ import annotations

import compileall
import functools
from collections.abc import Mapping
from pathlib import Path

import kernodeck


@functools.cache
def compile_tree(root: Path) -> None:
    """Compile every module under `root` (untimed), as installing it would."""
    compileall.compile_dir(str(root), quiet=1)


def _compiled() -> None:
    compile_tree(Path(kernodeck.__file__).parent)


def as_installed(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for the timed commands, once Kernodeck's modules are compiled (untimed)."""
    _compiled()
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
