"""Compare two verify reports and say which layer a difference comes from.

Differences are grouped the way the reference is described (code, data, packages, system and
backend, results) and each is attributed to a cause:

- **inputs**: code, configuration, data and weights;
- **software**: interpreter, packages, the dependency contract and the rebuild procedure;
- **execution conditions**: system (OS, driver, CUDA/ROCm), backend and device;
- **results**: application checks and resume, the *effects* the others explain.

The summary names the first layer that differs in the order verify checks them, because changing
several layers at once blurs the diagnosis. Volatile values (timings) are never compared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernodeck.errors import UsageError
from kernodeck.layers import _LAYERS, LAYER_ORDER, layer_info
from kernodeck.report import Report, Status, Step

GROUPS: tuple[str, ...] = ("code", "data", "packages", "system and backend", "results", "other")
CAUSES: tuple[str, ...] = ("inputs", "software", "execution conditions")

#: Inventory keys (lower case) that name a layer, checked as substrings when no key matches exactly.
_INVENTORY_HINTS: tuple[tuple[str, str], ...] = (
    ("revision", "code"),
    ("git", "code"),
    ("config", "code"),
    ("weight", "weights"),
    ("data", "data"),
    ("interpreter", "interpreter"),
    ("python", "interpreter"),
    ("implementation", "interpreter"),
    ("freeze", "packages"),
    ("distribution", "packages"),
    ("package", "packages"),
    ("contract", "contract"),
    ("torch", "backend"),
    ("backend", "backend"),
    ("hip", "backend"),
    ("gpu", "device"),
    ("device", "device"),
    ("driver", "system"),
    ("nvidia", "system"),
    ("cuda", "system"),
    ("rocm", "system"),
    ("glibc", "system"),
    ("kernel", "system"),
    ("machine", "system"),
    ("os", "system"),
    ("platform", "system"),
    ("system", "system"),
)

#: Keys whose values change from run to run and say nothing about the environment.
_VOLATILE = frozenset(
    {
        "seconds",
        "duration",
        "elapsed",
        "elapsed_s",
        "wall_s",
        "time_s",
        "timestamp",
        "started",
        "finished",
        "ms",
    }
)


class Difference(BaseModel):
    model_config = ConfigDict(extra="forbid")

    layer: str
    group: str
    cause: str
    item: str  # "step <name>", "inventory <dotted key>"
    what: str  # "observed", "expected", "status", "only in A", "only in B", "value"
    a: Any = None
    b: Any = None

    def describe(self) -> str:
        if self.what in ("only in A", "only in B"):
            return f"{self.layer}: {self.item} {self.what}"
        return f"{self.layer}: {self.item} {self.what}: {_short(self.a)} -> {_short(self.b)}"


class DiffResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    a: str
    b: str
    identical: bool
    summary: str
    causes: list[str] = Field(default_factory=list)
    first_layer: str | None = None
    layers: list[str] = Field(default_factory=list)
    groups: dict[str, list[Difference]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2) + "\n"

    def render(self) -> str:
        lines = [f"A: {self.a}", f"B: {self.b}", ""]
        for group in GROUPS:
            diffs = self.groups.get(group)
            if not diffs:
                continue
            lines.append(f"{group}:")
            lines.extend(f"  - {d.describe()}" for d in diffs)
        lines.extend(f"note: {n}" for n in self.notes)
        if len(lines) > 3:
            lines.append("")
        lines.append(self.summary)
        return "\n".join(lines)


# --- comparing ---------------------------------------------------------------------------------


def _layer_rank(layer: str) -> int:
    return LAYER_ORDER.index(layer) if layer in LAYER_ORDER else len(LAYER_ORDER)


def _normalize(value: Any) -> Any:
    """The comparable part of a value: volatile keys dropped, tuples as lists."""
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items() if str(k).lower() not in _VOLATILE}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _step_key(step: Step) -> tuple[str, str]:
    return (step.layer, step.name)


def _inventory_layer(key: str) -> str:
    low = key.lower()
    if low in _LAYERS:
        return low
    for hint, layer in _INVENTORY_HINTS:
        if hint in low:
            return layer
    return "other"


def _flatten(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in value)
    ):  # a list of named records (distributions, devices): compare them by name
        value = {v["name"]: {k: x for k, x in v.items() if k != "name"} for v in value}
    if isinstance(value, dict) and value:
        for k in value:
            if str(k).lower() in _VOLATILE:
                continue
            yield from _flatten(value[k], f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, _normalize(value)


def diff_reports(a: Report, b: Report, *, a_name: str = "A", b_name: str = "B") -> DiffResult:
    """Every difference between two reports, grouped by layer, with a summary of the causes."""
    diffs: list[Difference] = []

    def add(layer: str, item: str, what: str, va: Any, vb: Any) -> None:
        group, cause = layer_info(layer)
        diffs.append(Difference(layer=layer, group=group, cause=cause, item=item, what=what, a=va, b=vb))

    steps_a = {_step_key(s): s for s in a.steps}
    steps_b = {_step_key(s): s for s in b.steps}
    for skey in list(dict.fromkeys([*steps_a, *steps_b])):
        layer, name = skey
        sa, sb = steps_a.get(skey), steps_b.get(skey)
        if sa is None or sb is None:
            present = sa or sb
            assert present is not None
            if present.status is Status.SKIPPED:
                continue  # a step that did not run in one report says nothing about the environment
            add(layer, f"step {name}", "only in A" if sb is None else "only in B", None, None)
            continue
        if _normalize(sa.expected) != _normalize(sb.expected):
            add(layer, f"step {name}", "expected", sa.expected, sb.expected)
        if _normalize(sa.observed) != _normalize(sb.observed):
            add(layer, f"step {name}", "observed", sa.observed, sb.observed)
        elif sa.status != sb.status:
            add(layer, f"step {name}", "status", sa.status.value, sb.status.value)

    flat_a = dict(_flatten(a.inventory, ""))
    flat_b = dict(_flatten(b.inventory, ""))
    for key in list(dict.fromkeys([*flat_a, *flat_b])):
        va, vb = flat_a.get(key, _MISSING), flat_b.get(key, _MISSING)
        if va == vb:
            continue
        layer = _inventory_layer(key.split(".", 1)[0])
        if layer == "other":
            layer = _inventory_layer(key)
        if va is _MISSING:
            add(layer, f"inventory {key}", "only in B", None, vb)
        elif vb is _MISSING:
            add(layer, f"inventory {key}", "only in A", va, None)
        else:
            add(layer, f"inventory {key}", "value", va, vb)

    if (a.platform or b.platform) and a.platform != b.platform:
        add("platform", "platform", "value", a.platform, b.platform)

    notes: list[str] = []
    if a.reference_id != b.reference_id:
        notes.append(
            f"reference id differs: {a.reference_id} -> {b.reference_id} (a new identity was recorded)"
        )
    return _result(diffs, notes, a_name, b_name)


class _Missing:
    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "<missing>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Missing)

    def __hash__(self) -> int:
        return 0


_MISSING: Any = _Missing()


def _result(diffs: list[Difference], notes: list[str], a_name: str, b_name: str) -> DiffResult:
    diffs.sort(key=lambda d: _layer_rank(d.layer))
    groups: dict[str, list[Difference]] = {}
    for d in diffs:
        groups.setdefault(d.group, []).append(d)
    layers = list(dict.fromkeys(d.layer for d in diffs))
    causes = [c for c in CAUSES if any(d.cause == c for d in diffs)]
    first = layers[0] if layers else None
    if not diffs:
        summary = "identical: no layer differs"
    else:
        if causes:
            summary = "differs in " + " and ".join(causes)
            summary += f" ({', '.join(layers)}); first layer that differs: {first}"
            if len(causes) > 1 or len({d.group for d in diffs if d.group != "results"}) > 1:
                summary += (
                    "; several layers differ at once, which blurs the diagnosis: change one layer at a time"
                )
        elif all(d.cause == "results" for d in diffs):
            summary = (
                f"only results differ ({', '.join(layers)}); inputs, software and execution conditions "
                "match, so look at nondeterminism (seeds, determinism settings, precision)"
            )
        else:
            summary = (
                f"differs in unclassified items ({', '.join(layers)}); first layer that differs: {first}"
            )
    return DiffResult(
        a=a_name,
        b=b_name,
        identical=not diffs,
        summary=summary,
        causes=causes,
        first_layer=first,
        layers=layers,
        groups=groups,
        notes=notes,
    )


# --- inputs ------------------------------------------------------------------------------------


def load_report(path: str | Path) -> Report:
    """A verify (or rebuild) report from its JSON file; UsageError "not a kernodeck report: why"
    when it is not one (never its content: a value in the file is not quoted)."""
    from kernodeck.support.fsio import read_regular

    p = Path(path)
    try:
        data = read_regular(p)
    except FileNotFoundError:
        raise UsageError(f"no report at {p}", hint="write one with `kernodeck verify --json FILE`") from None
    except OSError as e:
        raise UsageError(f"cannot read report {p}: {e.strerror or e}") from None
    try:
        return Report.from_json(data.decode("utf-8"))
    except RecursionError:
        why = "nested too deeply to read"
    except (ValueError, TypeError) as e:
        why = _not_a_report(e)
    raise UsageError(
        f"{p} is not a kernodeck report: {why}",
        hint="pass files written by `kernodeck verify --json FILE`, `live`, or a repro.toml",
    )


def _not_a_report(e: Exception) -> str:
    """Why a JSON text is not a report, in one line: a validation error's first location and
    message (without the input value it quotes)."""
    lines = str(e).splitlines()
    if len(lines) >= 3 and "validation error" in lines[0]:
        return f"{lines[1].strip()}: {lines[2].strip().split(' [type=', 1)[0]}"
    return lines[0] if lines else type(e).__name__
