"""Options shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def manifest_option(dest: str = "manifest") -> Callable[[F], F]:
    """`--manifest PATH`: a repro.toml, or the folder that holds one."""
    return click.option(
        "--manifest",
        dest,
        default="repro.toml",
        show_default=True,
        type=click.Path(path_type=Path),
        help="The manifest (or its folder).",
    )
