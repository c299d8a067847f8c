"""The conditions of a variance run: `--vary NAME=V1,V2,...` parsed, checked and laid out.

NAME is a built-in condition (`BUILTINS`: thread counts, determinism, float32 matmul precision,
device), a `{NAME}` placeholder in a check's `run` arguments, or else an environment variable
given to the check's process. The first value of every axis makes the baseline; every other value
is one condition that differs from the baseline in that axis alone (one factor at a time), so each
condition's effect is measured on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from kernodeck.determinism import (
    ENV_CUDNN_BENCHMARK,
    ENV_CUDNN_DETERMINISTIC,
    ENV_DETERMINISTIC,
    ENV_MATMUL_PRECISION,
)
from kernodeck.errors import UsageError
from kernodeck.manifest.schema import Check

Kind = Literal["builtin", "placeholder", "env"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = ("out", "python")  # placeholders the runner owns

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
"""What `threads=N` sets; torch takes its intra-op thread count from OMP_NUM_THREADS."""


def _threads(value: str) -> dict[str, str]:
    return dict.fromkeys(THREAD_VARIABLES, value)


def _determinism(value: str) -> dict[str, str]:
    on = value == "on"
    return {
        ENV_DETERMINISTIC: "1" if on else "0",
        ENV_CUDNN_DETERMINISTIC: "1" if on else "0",
        ENV_CUDNN_BENCHMARK: "0" if on else "1",
    }


def _precision(value: str) -> dict[str, str]:
    return {ENV_MATMUL_PRECISION: value}


def _device(value: str) -> dict[str, str]:
    # the process sees no GPU ("cpu") or the one named; an application that picks the best
    # available device then runs on it
    return {"CUDA_VISIBLE_DEVICES": "" if value == "cpu" else value.partition(":")[2] or "0"}


def _is_count(v: str) -> bool:
    return v.isdigit() and int(v) > 0


def _is_device(v: str) -> bool:
    head, _, index = v.partition(":")
    return v == "cpu" or (head == "cuda" and (not index or index.isdigit()))


@dataclass(frozen=True)
class Builtin:
    env: Callable[[str], dict[str, str]]
    valid: Callable[[str], bool]
    accepts: str
    what: str


BUILTINS: dict[str, Builtin] = {
    "threads": Builtin(
        _threads, _is_count, "positive integers", "thread count (" + ", ".join(THREAD_VARIABLES) + ")"
    ),
    "determinism": Builtin(
        _determinism, lambda v: v in ("on", "off"), "on, off", "deterministic algorithms and cuDNN settings"
    ),
    "matmul-precision": Builtin(
        _precision,
        lambda v: v in ("highest", "high", "medium"),
        "highest, high, medium",
        "float32 matmul precision (TF32)",
    ),
    "device": Builtin(
        _device, _is_device, "cpu, cuda, cuda:N", "the device the process sees (CUDA_VISIBLE_DEVICES)"
    ),
}


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[str, ...]
    kind: Kind

    def env(self, value: str) -> dict[str, str]:
        if self.kind == "builtin":
            return BUILTINS[self.name].env(value)
        return {self.name: value} if self.kind == "env" else {}


@dataclass(frozen=True)
class Condition:
    """One setting of every axis; `axis` is the one that differs from the baseline (None: the
    baseline itself)."""

    axis: str | None
    settings: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        if self.axis is None:
            return "baseline"
        return f"{self.axis}={dict(self.settings)[self.axis]}"

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.settings)
        return f"{self.label} ({shown})" if self.axis is None and shown else self.label


def placeholders(checks: Sequence[Check]) -> set[str]:
    found: set[str] = set()
    for c in checks:
        for arg in c.run:
            found.update(re.findall(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}", arg))
    return found - set(_RESERVED)


def _uses(check: Check, names: Sequence[str]) -> bool:
    return any("{" + n + "}" in arg for arg in check.run for n in names)


def parse_vary(specs: Sequence[str], checks: Sequence[Check]) -> list[Axis]:
    """The axes of `--vary NAME=V1,V2,...`, in the order given; every problem is a UsageError."""
    slots = placeholders(checks)
    axes: list[Axis] = []
    given = {spec.partition("=")[0].strip() for spec in specs}
    unset = sorted(slots - given)
    if unset:
        raise UsageError(
            f"the run of {', '.join(c.name for c in checks if _uses(c, unset))} has "
            + ", ".join("{" + n + "}" for n in unset)
            + ", which only --vary sets",
            hint=f"give --vary {unset[0]}=V1,V2,... (the first value is the baseline)",
        )
    for spec in specs:
        name, eq, rest = spec.partition("=")
        name = name.strip()
        values = tuple(v.strip() for v in rest.split(",")) if eq else ()
        if not name or not values or any(not v for v in values):
            raise UsageError(
                f"--vary {spec!r}: expected NAME=V1,V2,...",
                hint="e.g. --vary threads=1,2 or --vary batch=1,32",
            )
        if any(a.name == name for a in axes):
            raise UsageError(
                f"--vary {name} is given twice", hint="give every value in one --vary NAME=V1,V2,..."
            )
        if len(set(values)) != len(values):
            raise UsageError(f"--vary {spec!r}: a value is repeated")
        axes.append(Axis(name, values, _kind(name, values, slots)))
    return axes


def _kind(name: str, values: tuple[str, ...], slots: set[str]) -> Kind:
    if name in BUILTINS:
        b = BUILTINS[name]
        bad = [v for v in values if not b.valid(v)]
        if bad:
            raise UsageError(
                f"--vary {name}: {', '.join(map(repr, bad))} not accepted", hint=f"{name} takes {b.accepts}"
            )
        return "builtin"
    if name in slots:
        return "placeholder"
    if name in _RESERVED:
        raise UsageError(f"--vary {name}: {{{name}}} is set by kernodeck for every run")
    if not _ENV_NAME.match(name):
        raise UsageError(
            f"--vary {name!r}: neither a built-in condition, a {{placeholder}} in the check's run, "
            "nor an environment variable name",
            hint="built-in: " + ", ".join(sorted(BUILTINS)),
        )
    return "env"


def conditions(axes: Sequence[Axis]) -> list[Condition]:
    """The baseline (every axis at its first value), then each other value of each axis alone."""
    base = tuple((a.name, a.values[0]) for a in axes)
    out = [Condition(None, base)]
    for a in axes:
        for v in a.values[1:]:
            out.append(Condition(a.name, tuple((n, v if n == a.name else old) for n, old in base)))
    return out


def condition_env(cond: Condition, axes: Sequence[Axis]) -> dict[str, str]:
    by_name = {a.name: a for a in axes}
    env: dict[str, str] = {}
    for name, value in cond.settings:
        env.update(by_name[name].env(value))
    return env


def expand_placeholders(argv: Sequence[str], cond: Condition, axes: Sequence[Axis]) -> list[str]:
    kinds = {a.name: a.kind for a in axes}
    args = list(argv)
    for name, value in cond.settings:
        if kinds[name] == "placeholder":
            args = [a.replace("{" + name + "}", value) for a in args]
    return args


__all__ = [
    "BUILTINS",
    "THREAD_VARIABLES",
    "Axis",
    "Condition",
    "condition_env",
    "conditions",
    "expand_placeholders",
    "parse_vary",
    "placeholders",
]
