"""docs/manifest.md, the reference of every repro.toml key, generated from the schema models.

    text = manifest_reference()        # what scripts/gen_manifest_docs.py writes

Each table of the manifest is a section: the model's docstring, then one row per key with its
type (validators named in words), whether it is required, its default and the field's docstring.
The examples under manifests/ are listed at the end. A test compares the committed file with
this output, so the reference cannot drift from the models.
"""

from __future__ import annotations

import types
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo

from kernodeck.manifest.model import pydantic_model
from kernodeck.manifest.schema import Manifest, describe_fields

#: Single-value validators of schema.py, in words.
_CHECKED: dict[str, str] = {
    "_sha256": "sha256 (64 lowercase hex)",
    "_sha256_or_empty": 'sha256 (64 lowercase hex) or "" (filled in by `kernodeck capture`)',
    "_revision": "git commit (40 lowercase hex)",
    "_name": "name (letters, digits, `.` `_` `-`)",
    "_project_name": "package name (PEP 508)",
    "_requirement": "requirement (PEP 508)",
    "_specifier": 'version specifier (e.g. ">=560.28")',
    "_quantity": 'comparison of a number (e.g. ">=1", ">=8.0")',
    "_marker": "environment marker (PEP 508)",
    "_version": "version",
    "_python_version": 'Python version ("3.11" or "3.11.7")',
    "_env_name": "environment variable name",
    "_backend": "backend (cpu, cuXYZ, rocmX.Y, xpu, mps)",
    "_index_url": "index URL (credentials only as `${VAR}`)",
}
_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    datetime: "date-time",
}


def _checked(meta: list[Any]) -> str | None:
    for m in meta:
        if isinstance(m, AfterValidator):
            name = getattr(m.func, "__name__", "")
            if name in _CHECKED:
                return _CHECKED[name]
    return None


def _type(tp: Any, meta: list[Any] | None = None) -> str:
    if meta:
        checked = _checked(meta)
        if checked is not None:
            return checked
    origin = get_origin(tp)
    if origin is Annotated:
        base, *inner = get_args(tp)
        return _type(base, list(inner))
    if origin in (Union, types.UnionType):
        parts = [_type(a) for a in get_args(tp) if a is not type(None)]
        return " or ".join(parts)
    if origin is list:
        (item,) = get_args(tp)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return "array of tables"
        return f"list of {_type(item)}"
    if origin is dict:
        key, value = get_args(tp)
        return f"table of {_type(key)} = {_type(value)}"
    if origin is Literal:
        return " or ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in get_args(tp))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "table"
    if tp in _SCALARS:
        return _SCALARS[tp]
    if tp is Any:
        return "any value"
    return getattr(tp, "__name__", str(tp))


def _toml(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, list | dict) and not value:
        return "`[]`" if isinstance(value, list) else "`{}`"
    if isinstance(value, BaseModel):
        return ""
    return f"`{value}`"


def _model_in(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in get_args(tp):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _is_array(tp: Any) -> bool:
    if get_origin(tp) is list:
        return True
    return any(_is_array(a) for a in get_args(tp) if get_origin(tp) in (Union, types.UnionType, Annotated))


def _doc(model: type[BaseModel]) -> str:
    doc = model.__doc__ or ""
    if doc.startswith(("Usage docs:", "!!! abstract")) or model.__doc__ == BaseModel.__doc__:
        return ""
    return " ".join(doc.split())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _sections(model: type[BaseModel], path: str, array: bool, out: list[str]) -> None:
    header = f"[[{path}]]" if array else (f"[{path}]" if path else "top level")
    out.append(f"## `{header}`" if path else "## Top level")
    out.append("")
    doc = _doc(model)
    if doc:
        out.append(doc)
        out.append("")
    out.append("| key | type | required | default | meaning |")
    out.append("|---|---|---|---|---|")
    nested: list[tuple[type[BaseModel], str, bool]] = []
    for name, field in model.model_fields.items():
        f: FieldInfo = field
        key = f.alias or name
        sub = _model_in(f.annotation)
        is_arr = _is_array(f.annotation)
        kind = _type(f.annotation, list(f.metadata))
        required = "yes" if f.is_required() else ""
        default = "" if f.is_required() else _toml(f.default)
        dotted = f"{path}.{key}" if path else key
        if sub is not None and kind in ("table", "array of tables", "table or None"):
            link = f"[[{dotted}]]" if is_arr else f"[{dotted}]"
            kind = f"{'array of tables' if is_arr else 'table'}, see `{link}`"
            nested.append((sub, dotted, is_arr))
        out.append(f"| `{key}` | {_cell(kind)} | {required} | {default} | {_cell(f.description or '')} |")
    out.append("")
    for sub, dotted, is_arr in nested:
        _sections(sub, dotted, is_arr, out)


def manifest_reference(examples: list[Path] | None = None, root: Path | None = None) -> str:
    """The Markdown reference of repro.toml (schema v1)."""
    out = [
        "<!-- Generated by scripts/gen_manifest_docs.py from src/kernodeck/manifest/schema.py; do not edit. -->",
        "",
        "# repro.toml reference (schema v1)",
        "",
        "Every key of the manifest, generated from the schema models. Keys are kebab-case; every table",
        "rejects unknown keys. `kernodeck validate` checks a manifest (with the line of each problem),",
        "`kernodeck schema` prints the same rules as JSON Schema for editor completion. Paths are",
        "relative to the manifest's folder.",
        "",
    ]
    describe_fields()
    _sections(pydantic_model(Manifest), "", False, out)
    if examples:
        out.append("## Examples")
        out.append("")
        for ex in examples:
            rel = ex.relative_to(root).as_posix() if root else ex.as_posix()
            out.append(f"- [`{rel}`](../{rel})")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
