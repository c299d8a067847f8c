"""Property tests: nothing but ManifestError ever escapes the loader, whatever the input."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernodeck.errors import ManifestError
from kernodeck.manifest import loads_manifest
from kernodeck.support.tomltext import parse_toml

EXAMPLE = (Path(__file__).parent / "data" / "design-example.toml").read_text(encoding="utf-8")
BASE = parse_toml(EXAMPLE)

keys = st.sampled_from(
    [
        "name",
        "id",
        "os",
        "arch",
        "backend",
        "version",
        "sha256",
        "path",
        "run",
        "requirements",
        "x",
        "schema-version",
    ]
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.datetimes(),
    st.dates(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(keys, st.text(max_size=8)), inner, max_size=4)
    ),
    max_leaves=12,
)


def _load(text: str) -> None:
    with contextlib.suppress(ManifestError):
        loads_manifest(text, "fuzz.toml")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_random_text(text: str) -> None:
    _load(text)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.one_of(keys, st.text(min_size=1, max_size=10)), values, max_size=6))
def test_random_documents(doc: dict[str, Any]) -> None:
    doc = {k: v for k, v in doc.items() if v is not None}
    try:
        text = tomlkit.dumps(_tomlable(doc))
    except Exception:
        return
    _load(text)


def _tomlable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _tomlable(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_tomlable(x) for x in v if x is not None]
    return v


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


PATHS = [p for p in _paths(BASE) if p]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATHS), values, st.sampled_from(["replace", "delete", "rename"]))
def test_mutations_of_the_example(path: tuple[Any, ...], value: Any, how: str) -> None:
    import copy

    doc = copy.deepcopy(BASE)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "rename" and isinstance(parent, dict):
        parent[str(last) + "x"] = parent.pop(last)
    elif value is not None:
        parent[last] = value
    try:
        text = tomlkit.dumps(_tomlable(doc))
    except Exception:
        return
    _load(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=len(EXAMPLE) - 1), st.text(max_size=5))
def test_byte_edits_of_the_example(pos: int, insert: str) -> None:
    _load(EXAMPLE[:pos] + insert + EXAMPLE[pos + 1 :])
