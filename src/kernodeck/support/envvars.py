"""Every `KERNODECK_*` environment variable, declared once: its name, type, default and documentation.

Code reads a variable through its declaration (`CACHE_DIR.path()`, `HTTP_TIMEOUT.number()`), never by
spelling the name; `docs/environment.md` is generated from these declarations
(`python scripts/gen_environment_docs.py`, and a test fails when the committed page is stale).

Standard library only: the CLI imports it at start-up, and the application's process
(`kernodeck.determinism.apply`) too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["path", "seconds", "bytes", "flag", "set", "text", "list", "integer"]

#: How each kind is written in the documentation.
KIND_WORDS: dict[str, str] = {
    "path": "a path",
    "seconds": "seconds (a positive number)",
    "bytes": "bytes (a positive number)",
    "flag": "`1`, `true`, `yes` or `on` (anything else: off)",
    "set": "any non-empty value",
    "text": "text",
    "list": "space-separated `NAME=URL` entries",
    "integer": "an integer",
}

_TRUE = ("1", "true", "yes", "on")


class BadValue(ValueError):
    """A variable's value is not of its kind; the caller raises its own located error from it."""

    def __init__(self, var: EnvVar, text: str, problem: str) -> None:
        super().__init__(f"{var.name}={text!r} {problem}")
        self.var = var
        self.hint = f"unset {var.name} or give it {KIND_WORDS[var.kind]}"


@dataclass(frozen=True)
class EnvVar:
    name: str
    kind: Kind
    default: str  # as the documentation shows it ("" when unset means off or nothing)
    doc: str
    set_by_kernodeck: bool = False  # set for the application's process, not read from the user

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The value as set, or None when unset or empty."""
        text = (os.environ if environ is None else environ).get(self.name)
        return text if text else None

    def flag(self, environ: Mapping[str, str] | None = None) -> bool:
        text = self.raw(environ)
        return text is not None and text.strip().lower() in _TRUE

    def path(self, environ: Mapping[str, str] | None = None) -> Path | None:
        text = self.raw(environ)
        return Path(text) if text is not None else None

    def words(self, environ: Mapping[str, str] | None = None) -> list[str]:
        text = self.raw(environ)
        return text.split() if text is not None else []

    def number(self, default: float, environ: Mapping[str, str] | None = None) -> float:
        """A positive number; `default` when unset. Raises BadValue for anything else."""
        text = self.raw(environ)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            raise BadValue(self, text, "is not a number") from None
        if not value > 0:
            raise BadValue(self, text, "must be positive")
        return value


CACHE_DIR = EnvVar(
    "KERNODECK_CACHE_DIR",
    "path",
    "the user cache folder (platformdirs)",
    "Where Kernodeck keeps its caches: index pages and metadata, file fingerprints, lock replays, "
    "probe results.",
)
DEBUG = EnvVar(
    "KERNODECK_DEBUG",
    "set",
    "",
    "When set, an internal error shows its Python traceback instead of a one-line message.",
)
HTTP2 = EnvVar(
    "KERNODECK_HTTP2",
    "flag",
    "off",
    "Ask the indexes for HTTP/2 (when h2 is installed); HTTP/1.1 connections are pooled otherwise.",
)
HTTP_TIMEOUT = EnvVar(
    "KERNODECK_HTTP_TIMEOUT",
    "seconds",
    "300",
    "The total deadline of one index request, its retries included.",
)
LOCK_TIMEOUT = EnvVar(
    "KERNODECK_LOCK_TIMEOUT",
    "seconds",
    "3600",
    "The total deadline of everything one lock reads from the indexes.",
)
MAX_PAGE_BYTES = EnvVar(
    "KERNODECK_MAX_PAGE_BYTES",
    "bytes",
    "134217728 (128 MiB)",
    "The largest project page an index may serve; a bigger one is refused with an error.",
)
MAX_METADATA_BYTES = EnvVar(
    "KERNODECK_MAX_METADATA_BYTES",
    "bytes",
    "16777216 (16 MiB)",
    "The largest core metadata file a wheel or an index may hold; a bigger one is refused with an error.",
)
MIRRORS = EnvVar(
    "KERNODECK_MIRRORS",
    "list",
    "",
    "`kernodeck lock --mirror` and `kernodeck rebuild --mirror`'s default: fetch a declared index's "
    "files from a mirror (`NAME=URL`, NAME a declared index or `default`); the lock files keep the "
    "declared index.",
)
ALLOWED_SIGNERS = EnvVar(
    "KERNODECK_ALLOWED_SIGNERS",
    "path",
    "",
    "`kernodeck rebuild --allowed-signers`'s default: git's allowed_signers file a bundle's SSH "
    "signature must match; unset, a signature is reported, not required.",
)
TORCH_TIMEOUT = EnvVar(
    "KERNODECK_TORCH_TIMEOUT",
    "seconds",
    "180",
    "How long verify waits for torch's import, device and compute checks in their own process.",
)
OUT = EnvVar(
    "KERNODECK_OUT",
    "path",
    "",
    "Set by `kernodeck check` for the application it runs: the folder its outputs go to.",
    set_by_kernodeck=True,
)
SEED = EnvVar(
    "KERNODECK_SEED",
    "integer",
    "",
    "Set by `kernodeck check` from `[determinism] seed`; `kernodeck.determinism.apply()` seeds with it.",
    set_by_kernodeck=True,
)
DETERMINISTIC_ALGORITHMS = EnvVar(
    "KERNODECK_DETERMINISTIC_ALGORITHMS",
    "flag",
    "",
    "Set by `kernodeck check` from `[determinism] deterministic-algorithms`; read by `apply()`.",
    set_by_kernodeck=True,
)
CUDNN_BENCHMARK = EnvVar(
    "KERNODECK_CUDNN_BENCHMARK",
    "flag",
    "",
    "Set by `kernodeck check` from `[determinism] cudnn-benchmark`; read by `apply()`.",
    set_by_kernodeck=True,
)
CUDNN_DETERMINISTIC = EnvVar(
    "KERNODECK_CUDNN_DETERMINISTIC",
    "flag",
    "",
    "Set by `kernodeck check` from `[determinism] cudnn-deterministic`; read by `apply()`.",
    set_by_kernodeck=True,
)
FLOAT32_MATMUL_PRECISION = EnvVar(
    "KERNODECK_FLOAT32_MATMUL_PRECISION",
    "text",
    "",
    "Set by `kernodeck check` from `[determinism] float32-matmul-precision` (highest, high or medium); "
    "read by `apply()`.",
    set_by_kernodeck=True,
)
DETERMINISM_REPORT = EnvVar(
    "KERNODECK_DETERMINISM_REPORT",
    "path",
    "",
    "Set by `kernodeck check`: the JSON file `apply()` writes what it set to.",
    set_by_kernodeck=True,
)

#: Every declared variable, in the documentation's order.
ALL: tuple[EnvVar, ...] = tuple(v for v in list(globals().values()) if isinstance(v, EnvVar))


def cache_dir() -> Path:
    """The folder of Kernodeck's caches: $KERNODECK_CACHE_DIR, else the user cache folder."""
    chosen = CACHE_DIR.path()
    if chosen is not None:
        return chosen
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernodeck"))


def _table(variables: list[EnvVar]) -> list[str]:
    lines = ["| variable | value | default | meaning |", "|---|---|---|---|"]
    for var in variables:
        default = var.default or "unset"
        lines.append(f"| `{var.name}` | {KIND_WORDS[var.kind]} | {default} | {var.doc} |")
    return lines


def markdown() -> str:
    """docs/environment.md, generated from the declarations."""
    read = [v for v in ALL if not v.set_by_kernodeck]
    written = [v for v in ALL if v.set_by_kernodeck]
    return "\n".join(
        [
            "# Environment variables",
            "",
            "<!-- Generated from src/kernodeck/support/envvars.py by scripts/gen_environment_docs.py;"
            " do not edit. -->",
            "",
            "Every `KERNODECK_*` variable Kernodeck reads. An empty value is the same as unset.",
            "",
            *_table(read),
            "",
            "## Set for the application",
            "",
            "`kernodeck check` sets these in the environment of the application it runs; "
            "`kernodeck.determinism.apply()` reads them there.",
            "",
            *_table(written),
            "",
        ]
    )
