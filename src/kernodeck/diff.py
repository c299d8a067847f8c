"""Compare two verify reports and say which layer a difference comes from.

Differences are grouped the way the reference is described (code, data, packages, system and
backend, results) and each is attributed to a cause:

- **inputs**: code, configuration, data and weights;
- **software**: interpreter, packages, the dependency contract and the rebuild procedure;
- **execution conditions**: system (OS, driver, CUDA/ROCm), backend and device;
- **results**: application checks and resume, the *effects* the others explain.

Facts are compared; measurements (a step's `measurements` and `seconds`: timings, errors of a
computation, throughputs) are listed side by side and never make a difference. A step skipped in
either report is "not compared". The summary names the layer that explains the rest: the first
that differs in the order verify checks them, except a difference another explains (a dirty tree
whose changed files are the data files that differ is the data layer's). When only results
differ, the summary lists what Kernodeck does not observe before it suggests nondeterminism.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernodeck.errors import UsageError
from kernodeck.layers import _LAYERS, LAYER_ORDER, Layer, layer_info
from kernodeck.report import Report, Status, Step

GROUPS: tuple[str, ...] = ("code", "data", "packages", "system and backend", "results", "other")
CAUSES: tuple[str, ...] = ("inputs", "software", "execution conditions")

#: What a report does not record, which can still change an application's results.
UNOBSERVED: tuple[str, ...] = (
    "environment variables other than [determinism] env and device selection "
    "(a learning rate or a path passed through one)",
    "command-line arguments beyond the check's declared `run`",
    "files the application reads that no [[data]] or [[weights]] declares",
    "services and the network the application reaches",
)

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

#: Keys whose values change from run to run and say nothing about the environment: measurements
#: inside observed values and the inventory (the compute check's errors vary with threads).
_VOLATILE = frozenset(
    {
        "seconds",
        "import_seconds",
        "rel_err",
        "max_abs_err",
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
    #: The layer whose difference explains this one (a dirty tree made by a changed data file).
    explained_by: str | None = None

    def describe(self) -> str:
        if self.what in ("only in A", "only in B"):
            return f"{self.layer}: {self.item} {self.what}"
        return f"{self.layer}: {self.item} {self.what}: {_short(self.a)} -> {_short(self.b)}"


class Measurement(BaseModel):
    """One number a step measured in each report, side by side (never a difference)."""

    model_config = ConfigDict(extra="forbid")

    layer: str
    step: str
    key: str
    a: float | None = None
    b: float | None = None

    def describe(self) -> str:
        def num(v: float | None) -> str:
            return "none" if v is None else f"{v:g}"

        return f"{self.layer}/{self.step} {self.key}: {num(self.a)} | {num(self.b)}"


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
    #: Numbers measured in both runs, side by side: shown, never compared.
    measurements: list[Measurement] = Field(default_factory=list)
    #: Steps skipped in either report ("layer/name"): not compared, not differences.
    not_compared: list[str] = Field(default_factory=list)
    #: What Kernodeck does not observe, listed when only results differ.
    unobserved: list[str] = Field(default_factory=list)

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
        if self.not_compared:
            lines.append(f"not compared (skipped): {', '.join(self.not_compared)}")
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
    return (str(step.layer), step.name)


#: The compute step's timing as reports before `measurements` wrote it, at the end of its text.
_LEGACY_TIMING = re.compile(r"^(?P<fact>.*): rel\. error (?P<err>\S+) in (?P<ms>[0-9.]+) ms$")


def _facts_of(step: Step) -> tuple[Any, dict[str, float]]:
    """(the observed fact, the measurements) of a step; a report written before measurements were
    a field of their own had the compute step's numbers in its text: they are read back out."""
    if step.measurements or step.layer != Layer.DEVICE or step.name != "compute":
        return step.observed, step.measured()
    m = _LEGACY_TIMING.match(step.observed) if isinstance(step.observed, str) else None
    if m is None:
        return step.observed, step.measured()
    tol = re.match(r"rel\. error <= (\S+)", step.expected) if isinstance(step.expected, str) else None
    within = f"within {tol[1]}" if tol is not None else "finite"  # as kernodeck.layers.device writes it
    return f"{m['fact']}: rel. error {within}", {"ms": float(m["ms"]), "rel_err": float(m["err"])}


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


class _Collector:
    """The differences, measurements and steps not compared, as `diff_reports` finds them."""

    def __init__(self) -> None:
        self.diffs: list[Difference] = []
        self.measurements: list[Measurement] = []
        self.not_compared: list[str] = []

    def add(self, layer: str, item: str, what: str, va: Any, vb: Any) -> None:
        group, cause = layer_info(layer)
        self.diffs.append(Difference(layer=layer, group=group, cause=cause, item=item, what=what, a=va, b=vb))

    def steps(self, a: Report, b: Report) -> None:
        steps_a = {_step_key(s): s for s in a.steps}
        steps_b = {_step_key(s): s for s in b.steps}
        for skey in dict.fromkeys([*steps_a, *steps_b]):
            sa, sb = steps_a.get(skey), steps_b.get(skey)
            # a step missing where its layer was not asked for was not observed there
            asked = _asked(a if sa is None else b, skey[0])
            self.step(skey[0], skey[1], sa, sb, asked=asked)

    def step(self, layer: str, name: str, sa: Step | None, sb: Step | None, *, asked: bool = True) -> None:
        if sa is None or sb is None:
            present = sa or sb
            assert present is not None
            if present.status is Status.SKIPPED or not asked:
                self.not_compared.append(f"{layer}/{name}")  # it did not run: it says nothing
            else:
                self.add(layer, f"step {name}", "only in A" if sb is None else "only in B", None, None)
            return
        observed_a, measured_a = _facts_of(sa)
        observed_b, measured_b = _facts_of(sb)
        self.measured(layer, name, measured_a, measured_b)
        if Status.SKIPPED in (sa.status, sb.status):
            self.not_compared.append(f"{layer}/{name}")
            return
        if _normalize(sa.expected) != _normalize(sb.expected):
            self.add(layer, f"step {name}", "expected", sa.expected, sb.expected)
        if _normalize(observed_a) != _normalize(observed_b):
            self.add(layer, f"step {name}", "observed", observed_a, observed_b)
        elif sa.status != sb.status:
            self.add(layer, f"step {name}", "status", sa.status.value, sb.status.value)

    def measured(self, layer: str, name: str, ma: dict[str, float], mb: dict[str, float]) -> None:
        for key in dict.fromkeys([*ma, *mb]):
            self.measurements.append(
                Measurement(layer=layer, step=name, key=key, a=ma.get(key), b=mb.get(key))
            )

    def inventory(self, a: Report, b: Report) -> None:
        flat_a = dict(_flatten(a.inventory, ""))
        flat_b = dict(_flatten(b.inventory, ""))
        for key in dict.fromkeys([*flat_a, *flat_b]):
            va, vb = flat_a.get(key, _MISSING), flat_b.get(key, _MISSING)
            if va == vb:
                continue
            layer = _inventory_layer(key.split(".", 1)[0])
            if layer == "other":
                layer = _inventory_layer(key)
            if va is _MISSING:
                self.add(layer, f"inventory {key}", "only in B", None, vb)
            elif vb is _MISSING:
                self.add(layer, f"inventory {key}", "only in A", va, None)
            else:
                self.add(layer, f"inventory {key}", "value", va, vb)


def _asked(report: Report, layer: str) -> bool:
    """Whether the run behind `report` was asked to check `layer` (its `--only`/`--skip`, and for
    the application and resume layers its `checks`)."""
    only, skip = report.settings.get("only") or [], report.settings.get("skip") or []
    if (only and layer not in only) or layer in skip:
        return False
    return layer not in (Layer.APPLICATION, Layer.RESUME) or report.settings.get("checks", True) is True


def diff_reports(a: Report, b: Report, *, a_name: str = "A", b_name: str = "B") -> DiffResult:
    """Every difference in facts between two reports, grouped by layer, with a summary of the
    causes; measurements side by side (never a difference); skipped steps not compared."""
    found = _Collector()
    found.steps(a, b)
    found.inventory(a, b)
    if (a.platform or b.platform) and a.platform != b.platform:
        found.add("platform", "platform", "value", a.platform, b.platform)
    _explain_dirty_tree(found.diffs, a, b)
    notes: list[str] = []
    if a.reference_id != b.reference_id:
        notes.append(
            f"reference id differs: {a.reference_id} -> {b.reference_id} (a new identity was recorded)"
        )
    result = _result(found.diffs, notes, a_name, b_name, a, b)
    result.measurements = found.measurements
    result.not_compared = found.not_compared
    return result


def _changed_files(step: Step | None) -> set[str]:
    """The files a code layer's clean-tree step found changed (its observed list)."""
    if step is None or not isinstance(step.observed, list):
        return set()
    return {str(x) for x in step.observed}


def _data_paths(report: Report) -> dict[str, str]:
    """step name -> the project path of each data and weights step that recorded one."""
    return {
        s.name: str(s.details["path"])
        for s in report.steps
        if s.layer == Layer.DATA and isinstance(s.details.get("path"), str)
    }


def _explain_dirty_tree(diffs: list[Difference], a: Report, b: Report) -> None:
    """A dirty tree whose changed files are all data files that differ is the data layer's
    difference: the code difference is marked as explained by it."""
    dirty = [d for d in diffs if d.layer == Layer.CODE and d.item == "step clean-tree"]
    if not dirty:
        return
    tree = {str(s.layer): s for s in a.steps if s.name == "clean-tree"}.get("code")
    other = {str(s.layer): s for s in b.steps if s.name == "clean-tree"}.get("code")
    changed = _changed_files(tree) ^ _changed_files(other)
    paths = {**_data_paths(a), **_data_paths(b)}
    differing = {
        paths[d.item.removeprefix("step ")]
        for d in diffs
        if d.layer == Layer.DATA and d.item.removeprefix("step ") in paths
    }
    if changed and all(any(f == p or f.startswith(p.rstrip("/") + "/") for p in differing) for f in changed):
        for d in dirty:
            d.explained_by = Layer.DATA.value


class _Missing:
    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "<missing>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Missing)

    def __hash__(self) -> int:
        return 0


_MISSING: Any = _Missing()


def _result(
    diffs: list[Difference], notes: list[str], a_name: str, b_name: str, a: Report, b: Report
) -> DiffResult:
    diffs.sort(key=lambda d: _layer_rank(d.layer))
    groups: dict[str, list[Difference]] = {}
    for d in diffs:
        groups.setdefault(d.group, []).append(d)
    layers = list(dict.fromkeys(d.layer for d in diffs))
    own = [d for d in diffs if d.explained_by is None]
    causes = [c for c in CAUSES if any(d.cause == c for d in own)]
    first = own[0].layer if own else None
    unobserved: list[str] = []
    if not diffs:
        summary = "identical: no layer differs"
    elif causes:
        summary = _causes_summary(own, causes, diffs)
    elif all(d.cause == "results" for d in own):
        unobserved = _unobserved(a, b)
        summary = (
            f"only results differ ({', '.join(layers)}); inputs, software and execution conditions "
            "match as far as Kernodeck observed. Not observed: " + "; ".join(unobserved) + ". "
            "If those were the same in both runs, look at nondeterminism (seeds, determinism settings, precision)"
        )
    else:
        summary = f"differs in unclassified items ({', '.join(layers)}); first layer that differs: {first}"
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
        unobserved=unobserved,
    )


def _causes_summary(own: list[Difference], causes: list[str], diffs: list[Difference]) -> str:
    layers = list(dict.fromkeys(d.layer for d in own))
    summary = (
        "differs in "
        + " and ".join(causes)
        + f" ({', '.join(layers)}); first layer that differs: {layers[0]}"
    )
    explained = list(dict.fromkeys(f"{d.layer} by {d.explained_by}" for d in diffs if d.explained_by))
    if explained:
        summary += f" (explained: {', '.join(explained)})"
    if len(causes) > 1 or len({d.group for d in own if d.group != "results"}) > 1:
        summary += "; several layers differ at once, which blurs the diagnosis: change one layer at a time"
    return summary


def _unobserved(a: Report, b: Report) -> list[str]:
    """What Kernodeck did not observe, first what the two runs declared differently."""
    out: list[str] = []
    runs_a = {s.name: s.details for s in a.steps if s.layer in (Layer.APPLICATION, Layer.RESUME)}
    for s in b.steps:
        mine = runs_a.get(s.name)
        if mine is None:
            continue
        for key, what in (("argv", "arguments"), ("env", "environment set by the check")):
            if key in s.details and _normalize(mine.get(key)) != _normalize(s.details[key]):
                out.append(
                    f"the {what} of {s.layer}/{s.name} differ: {_short(mine.get(key))} -> {_short(s.details[key])}"
                )
    return out + list(UNOBSERVED)


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
