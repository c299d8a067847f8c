"""Declared models: the manifest schema as plain classes, validated without importing pydantic.

    class Platform(Model):                      # schema.py declares every table this way
        model_config = {"alias_generator": kebab}
        name: Annotated[str, AfterValidator(_name)]
        glibc: str | None = None

    Platform(name="l", os="linux", arch="x86_64")             # keyword names or aliases
    Manifest.model_validate(toml_data, by_alias=True, by_name=False)
    p.model_dump(mode="json", by_alias=True, exclude_defaults=True); p.model_copy(update={...})
    pydantic_model(Manifest)                    # the same declarations as pydantic models

pydantic costs every command that loads a manifest about 0.1 s of imports and model building; a
lock replayed from the cache takes less than that in all. The probe's facts (`kernodeck.probe.facts`)
and verify's report (`kernodeck.report`) are declared models too, so that verify and `require()`
import no pydantic either: enum fields take a member or its value, and `model_dump(mode="json")`
writes what pydantic writes (an enum's value, a path as text, a set as a list; anything else
through pydantic_core's own converter). So a manifest is validated by a
checker compiled from the annotations (strict types, as TOML has them: "5" is no number, 1 is
no boolean), which accepts only what pydantic would accept and produces the same values. Anything
else (a wrong type, a failed validator, an unknown key, a string where a date-time is due) goes
to the pydantic model built from the same declarations (`pydantic_model`), which says what is
wrong exactly as it always has, or accepts it with its own coercions. The JSON Schema and
docs/manifest.md come from those pydantic models too, so every fact about a key has one owner:
its declaration here.

Markers (`AfterValidator`, `Field`, `WithJsonSchema`, `field_validator`) take the arguments of
pydantic's namesakes that the schema uses, and become them in the pydantic models.
"""

from __future__ import annotations

import copy
import json
import math
import re
import sys
import types
import typing
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from enum import Enum
from pathlib import PurePath
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

if sys.version_info >= (3, 11):
    from typing import Self, dataclass_transform
else:  # pragma: no cover
    from typing_extensions import Self, dataclass_transform

if typing.TYPE_CHECKING:
    from pydantic import BaseModel


class AfterValidator:
    """`Annotated[T, AfterValidator(f)]`: `f(value)` returns the value or raises ValueError."""

    __slots__ = ("func",)

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func


class WithJsonSchema:
    """The JSON Schema of a field, instead of the one its type would give."""

    __slots__ = ("json_schema",)

    def __init__(self, json_schema: dict[str, Any]) -> None:
        self.json_schema = json_schema


class Field:
    """Constraints of a field (`Annotated[T, Field(...)]`), pydantic's names and meaning."""

    __slots__ = ("kwargs",)

    def __init__(
        self,
        *,
        alias: str | None = None,
        strict: bool | None = None,
        ge: float | None = None,
        gt: float | None = None,
        le: float | None = None,
        min_length: int | None = None,
    ) -> None:
        given = {"alias": alias, "strict": strict, "ge": ge, "gt": gt, "le": le, "min_length": min_length}
        self.kwargs = {k: v for k, v in given.items() if v is not None}


class _FieldValidator:
    __slots__ = ("field", "method", "mode")

    def __init__(self, field: str, mode: str, method: Any) -> None:
        self.field, self.mode, self.method = field, mode, method


def field_validator(field: str, *, mode: Literal["before", "after"] = "after") -> Callable[[Any], Any]:
    """A classmethod that checks (or converts) one field: "before" its type, or "after"."""

    def mark(method: Any) -> Any:
        return _FieldValidator(field, mode, method)

    return mark


class _Fallback(Exception):
    """The checker cannot vouch for this input: pydantic decides (and says what is wrong)."""


Check = Callable[[Any, bool], Any]  # (value, by alias only) -> value, or raises _Fallback


class _Spec:
    """A model's compiled fields: (name, alias, check, required, default), in declaration order."""

    def __init__(self, model: type[Model]) -> None:
        hints = typing.get_type_hints(model, include_extras=True)
        alias_of = model.model_config.get("alias_generator") or (lambda n: n)
        validators: dict[str, list[_FieldValidator]] = {}
        for klass in reversed(model.__mro__):
            for value in vars(klass).values():
                if isinstance(value, _FieldValidator):
                    validators.setdefault(value.field, []).append(value)
        self.fields: list[tuple[str, str, Check, bool, Any]] = []
        for name in _declared(model):
            hint = hints[name]
            alias = _field_kwargs(hint).get("alias") or alias_of(name)
            check = _with_validators(model, _compile(hint), validators.get(name, []))
            required = not hasattr(model, name)
            self.fields.append((name, alias, check, required, None if required else getattr(model, name)))
        # pydantic writes a float field's int (a default such as `timeout = 300`) as a float in JSON
        self.floats = {name for name in _declared(model) if _is_float(hints[name])}
        self.untyped = {name for name in _declared(model) if _holds_any(hints[name])}
        self.names = {f[0] for f in self.fields}
        self.aliases = {f[1] for f in self.fields}


def _declared(model: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(model.__mro__):
        # a class's own annotations (3.10+: not its base's; 3.14: evaluated on access, as strings here)
        for name, ann in getattr(klass, "__annotations__", {}).items():
            if name not in names and not str(ann).startswith(("ClassVar", "typing.ClassVar")):
                names.append(name)
    return names


def _is_float(hint: Any) -> bool:
    if get_origin(hint) in (Annotated, Union, types.UnionType):
        return any(_is_float(a) for a in get_args(hint) if a is not type(None))
    return hint is float


def _holds_any(hint: Any) -> bool:
    return hint is Any or any(_holds_any(a) for a in get_args(hint))


def _field_kwargs(hint: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if get_origin(hint) is Annotated:
        for meta in hint.__metadata__:
            if isinstance(meta, Field):
                out.update(meta.kwargs)
    return out


@dataclass_transform(kw_only_default=True, field_specifiers=())
class Model:
    """A declared model (a table of the manifest, the facts a probe saw, a report). Subclasses
    declare fields as annotations with defaults."""

    model_config: ClassVar[dict[str, Any]] = {}
    _spec_cache: ClassVar[_Spec | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._spec_cache = None  # compiled on first use

    def __init__(self, **data: Any) -> None:
        # keyword names or aliases, as pydantic's populate_by_name allows
        self.__dict__.update(type(self)._validated(data, by_alias_only=False).__dict__)

    @classmethod
    def _spec(cls) -> _Spec:
        spec = cls.__dict__.get("_spec_cache")
        if spec is None:
            spec = _Spec(cls)
            cls._spec_cache = spec
        return spec

    @classmethod
    def model_validate(cls, obj: Any, *, by_alias: bool | None = None, by_name: bool | None = None) -> Self:
        """Validate a mapping (keys: aliases and names; only aliases with by_alias=True,
        by_name=False); an instance is returned as it is. Raises pydantic's ValidationError."""
        if isinstance(obj, cls):
            return obj
        return cls._validated(
            obj, by_alias_only=bool(by_alias) and by_name is False, by_alias=by_alias, by_name=by_name
        )

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Self:
        """Validate a JSON document; text that is no JSON raises pydantic's ValidationError."""
        try:
            data = json.loads(text)
        except ValueError:
            # pydantic says what is wrong (or, reading what json.loads would not, answers)
            return _from_pydantic(pydantic_model(cls).model_validate_json(text))  # type: ignore[no-any-return]
        return cls._validated(data, by_alias_only=False)

    @classmethod
    def _validated(cls, obj: Any, by_alias_only: bool, **how: Any) -> Self:
        checked: Self
        try:
            checked = _check_model(cls, obj, by_alias_only)
        except _Fallback:
            twin = pydantic_model(cls)
            how = {k: v for k, v in how.items() if v is not None}
            checked = _from_pydantic(twin.model_validate(obj, **how))
        return checked

    @classmethod
    def _construct(cls, values: dict[str, Any]) -> Self:
        obj = cls.__new__(cls)
        obj.__dict__.update(values)
        return obj

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied (not validated, as pydantic's)."""
        values = copy.deepcopy(self.__dict__) if deep else dict(self.__dict__)
        values.update(update or {})
        return type(self)._construct(values)

    def model_dump(
        self,
        *,
        mode: Literal["python", "json"] = "python",
        by_alias: bool = False,
        exclude_defaults: bool = False,
        exclude: set[str] | None = None,
    ) -> dict[str, Any]:
        """The fields as a dict, as pydantic's `model_dump` with the same arguments gives it
        (`exclude`: names of this model's own fields)."""
        out: dict[str, Any] = {}
        spec = type(self)._spec()
        for name, alias, _, required, default in spec.fields:
            if exclude and name in exclude:
                continue
            value = self.__dict__[name]
            if exclude_defaults and not required and value == default:
                continue
            if mode == "json" and type(value) is int and name in spec.floats:
                value = float(value)
            untyped = name in spec.untyped
            out[alias if by_alias else name] = _dump(value, mode, by_alias, exclude_defaults, untyped)
        return out

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={self.__dict__.get(n)!r}" for n in _declared(type(self)))
        return f"{type(self).__name__}({fields})"


# --- the checker -----------------------------------------------------------------------------------

_M = typing.TypeVar("_M", bound=Model)


def _check_model(model: type[_M], obj: Any, by_alias_only: bool) -> _M:
    if type(obj) is not dict:
        raise _Fallback
    spec = model._spec()
    for key in obj:
        if key not in spec.aliases and (by_alias_only or key not in spec.names):
            raise _Fallback  # an unknown key
    values: dict[str, Any] = {}
    for name, alias, check, required, default in spec.fields:
        if alias in obj:
            if not by_alias_only and name != alias and name in obj:
                raise _Fallback  # both spellings: pydantic decides which wins
            values[name] = check(obj[alias], by_alias_only)
        elif not by_alias_only and name in obj:
            values[name] = check(obj[name], by_alias_only)
        elif required:
            raise _Fallback
        else:
            values[name] = _fresh(default)
    return model._construct(values)


def _fresh(default: Any) -> Any:
    """A default as pydantic hands it out: immutable ones as they are, others copied."""
    if default is None or isinstance(default, (bool, int, float, str)):
        return default
    if type(default) in (list, dict) and not default:
        return type(default)()
    return copy.deepcopy(default)


def _with_validators(model: type[Model], check: Check, found: list[_FieldValidator]) -> Check:
    if not found:
        return check
    before = [v.method.__get__(None, model) for v in found if v.mode == "before"]
    after = [v.method.__get__(None, model) for v in found if v.mode == "after"]

    def checked(value: Any, by_alias_only: bool) -> Any:
        try:
            for f in before:
                value = f(value)
            value = check(value, by_alias_only)
            for f in after:
                value = f(value)
        except ValueError:
            raise _Fallback from None
        return value

    return checked


def _compile(hint: Any, strict: bool = True) -> Check:
    origin = get_origin(hint)
    if origin is Annotated:
        base, *meta = get_args(hint)
        kwargs = _field_kwargs(hint)
        inner = _compile(base, strict=kwargs.get("strict", strict))
        return _constrained(inner, kwargs, [m.func for m in meta if isinstance(m, AfterValidator)])
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {hint}")
        one = _compile(args[0], strict)
        return lambda v, a: None if v is None else one(v, a)
    if origin is Literal:
        allowed = get_args(hint)

        def literal(v: Any, a: bool) -> Any:
            if type(v) in (str, int) and any(type(v) is type(x) and v == x for x in allowed):
                return v
            raise _Fallback

        return literal
    if origin is list:
        (item_hint,) = get_args(hint)
        item = _compile(item_hint, strict)

        def a_list(v: Any, a: bool) -> Any:
            if type(v) is not list:
                raise _Fallback
            return [item(x, a) for x in v]

        return a_list
    if origin is dict:
        key_hint, value_hint = get_args(hint)
        if key_hint is not str:
            raise TypeError(f"unsupported mapping {hint}")
        value = _compile(value_hint, strict)

        def a_dict(v: Any, a: bool) -> Any:
            if type(v) is not dict or any(type(k) is not str for k in v):
                raise _Fallback
            return {k: value(x, a) for k, x in v.items()}

        return a_dict
    if isinstance(hint, type) and issubclass(hint, Model):
        model = hint

        def a_model(v: Any, a: bool) -> Any:
            return v if type(v) is model else _check_model(model, v, a)

        return a_model
    if hint is Any:
        return lambda v, a: v
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum(hint)
    if hint is float:

        def a_float(v: Any, a: bool) -> Any:
            if type(v) is float:
                return v
            if type(v) is int:
                return float(v)
            raise _Fallback

        return a_float
    if hint is datetime and not strict:
        return _lax_datetime
    if hint in (str, int, bool, datetime):
        return _exact(hint)
    raise TypeError(f"unsupported type {hint}")


#: The date-time text the checker reads itself (RFC 3339 with an offset); pydantic reads the rest.
_DATETIME_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})")


def _lax_datetime(v: Any, a: bool) -> Any:
    """A TOML date-time, or its text as uv's settings write it (`"2025-06-01T00:00:00Z"`)."""
    if type(v) is datetime:
        return v
    if type(v) is str and _DATETIME_TEXT.fullmatch(v):
        try:
            return datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith("Z") else v)
        except ValueError:
            pass  # e.g. month 13: pydantic says what is wrong
    raise _Fallback


def _enum(kind: type[Enum]) -> Check:
    """A member, or its value (pydantic's lax mode: a report read back from JSON)."""

    def member(v: Any, a: bool) -> Any:
        if type(v) is kind:
            return v
        if type(v) in (str, int):
            try:
                return kind(v)
            except ValueError:
                pass
        raise _Fallback

    return member


def _exact(kind: type) -> Check:
    def exact(v: Any, a: bool) -> Any:
        if type(v) is not kind:
            raise _Fallback
        return v

    return exact


def _constrained(inner: Check, kwargs: dict[str, Any], after: list[Callable[[Any], Any]]) -> Check:
    ge, gt, le, min_length = (kwargs.get(k) for k in ("ge", "gt", "le", "min_length"))
    if ge is None and gt is None and le is None and min_length is None and not after:
        return inner

    def constrained(v: Any, a: bool) -> Any:
        v = inner(v, a)
        if (
            (min_length is not None and len(v) < min_length)
            or (ge is not None and not v >= ge)
            or (gt is not None and not v > gt)
            or (le is not None and not v <= le)
        ):
            raise _Fallback
        try:
            for f in after:
                v = f(v)
        except ValueError:
            raise _Fallback from None
        return v

    return constrained


# --- dumping ---------------------------------------------------------------------------------------


def _dump(value: Any, mode: str, by_alias: bool, exclude_defaults: bool, untyped: bool) -> Any:
    """A field's value as pydantic dumps it; `untyped`: declared `Any`, whose infinite floats
    pydantic writes as None in JSON (a declared float stays infinite)."""
    if isinstance(value, Model):
        return value.model_dump(mode=mode, by_alias=by_alias, exclude_defaults=exclude_defaults)  # type: ignore[arg-type]
    if isinstance(value, (list, tuple)):
        items = [_dump(v, mode, by_alias, exclude_defaults, untyped) for v in value]
        return items if mode == "json" or isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _dump(v, mode, by_alias, exclude_defaults, untyped) for k, v in value.items()}
    if mode != "json":
        return value
    if isinstance(value, Enum):
        return _dump(value.value, mode, by_alias, exclude_defaults, untyped)
    if isinstance(value, (set, frozenset)):
        return [_dump(v, mode, by_alias, exclude_defaults, untyped) for v in value]
    return _json_scalar(value, untyped)


def _json_scalar(value: Any, untyped: bool) -> Any:
    """A value that holds no other values, as pydantic writes it in JSON."""
    if value is None or type(value) in (str, int, bool):
        return value
    if isinstance(value, datetime):
        return _json_datetime(value)
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, float):
        return None if untyped and not math.isfinite(value) else value
    if isinstance(value, PurePath):
        return str(value)
    from pydantic_core import to_jsonable_python  # anything else as pydantic writes it

    return to_jsonable_python(value)


def _json_datetime(value: datetime) -> str:
    """pydantic's JSON form of a date-time: a zero offset written `Z`."""
    offset = value.utcoffset()
    if offset is not None and offset % timedelta(minutes=1):
        from pydantic_core import to_jsonable_python  # seconds in the offset: pydantic's own form

        return str(to_jsonable_python(value))
    text = value.replace(tzinfo=None).isoformat()
    if offset is None:
        return text
    if offset == timedelta(0):
        return text + "Z"
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


# --- the same declarations as pydantic models ------------------------------------------------------

_TWINS: dict[type[Model], type[BaseModel]] = {}
_PLAIN: dict[type, type[Model]] = {}


def pydantic_model(model: type[Model]) -> type[BaseModel]:
    """`model` as a pydantic model: the same fields, validators, aliases and docstring (and its
    name, which pydantic's messages and the JSON Schema use)."""
    twin = _TWINS.get(model)
    if twin is not None:
        return twin
    import pydantic

    hints = typing.get_type_hints(model, include_extras=True)
    fields: dict[str, Any] = {}
    for name in _declared(model):
        hint = _to_pydantic(hints[name])
        fields[name] = (
            (hint, _default_to_pydantic(getattr(model, name))) if hasattr(model, name) else (hint, ...)
        )
    validators = {
        attr: (
            pydantic.field_validator(v.field, mode="before")
            if v.mode == "before"
            else pydantic.field_validator(v.field, mode="after")
        )(v.method)
        for klass in reversed(model.__mro__)
        for attr, v in vars(klass).items()
        if isinstance(v, _FieldValidator)
    }
    config = {k: v for k, v in model.model_config.items()}
    twin = pydantic.create_model(
        model.__name__,
        __config__=pydantic.ConfigDict(**config),  # type: ignore[typeddict-item]
        __doc__=model.__doc__,
        __module__=model.__module__,
        __validators__=validators,
        **fields,
    )
    _TWINS[model] = twin
    _PLAIN[twin] = model
    return twin


def _default_to_pydantic(default: Any) -> Any:
    if isinstance(default, Model):
        twin = pydantic_model(type(default))
        return twin.model_construct(
            _fields_set=set(), **{k: _default_to_pydantic(v) for k, v in default.__dict__.items()}
        )
    return default


def _to_pydantic(hint: Any) -> Any:
    """A type hint with declared models and markers replaced by pydantic's."""
    origin = get_origin(hint)
    if origin is Annotated:
        base, *meta = get_args(hint)
        args = (_to_pydantic(base), *(_marker_to_pydantic(m) for m in meta))
        return Annotated[args]
    if origin in (Union, types.UnionType):
        return Union[tuple(_to_pydantic(a) for a in get_args(hint))]  # noqa: UP007
    if origin is list:
        return list[_to_pydantic(get_args(hint)[0])]  # type: ignore[misc]
    if origin is dict:
        k, v = get_args(hint)
        return dict[_to_pydantic(k), _to_pydantic(v)]  # type: ignore[misc]
    if isinstance(hint, type) and issubclass(hint, Model):
        return pydantic_model(hint)
    return hint


def _marker_to_pydantic(meta: Any) -> Any:
    import pydantic

    if isinstance(meta, AfterValidator):
        return pydantic.AfterValidator(meta.func)
    if isinstance(meta, Field):
        field: Any = pydantic.Field
        return field(**meta.kwargs)
    if isinstance(meta, WithJsonSchema):
        return pydantic.WithJsonSchema(meta.json_schema)
    return meta


def _from_pydantic(value: Any) -> Any:
    """A value pydantic validated, with its model instances made into the declared models."""
    plain = _PLAIN.get(type(value))
    if plain is not None:
        return plain._construct({n: _from_pydantic(getattr(value, n)) for n in _declared(plain)})
    if isinstance(value, list):
        return [_from_pydantic(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_pydantic(v) for k, v in value.items()}
    return value


def models_of(module_name: str) -> list[type[Model]]:
    """The declared models of a module, in definition order."""
    return [
        m
        for m in vars(sys.modules[module_name]).values()
        if isinstance(m, type)
        and issubclass(m, Model)
        and m.__module__ == module_name
        and not m.__name__.startswith("_")
    ]


_described: set[str] = set()


def _attribute_docs(node: Any) -> dict[str, str]:
    """A class's attribute docstrings (the string under an annotated attribute), by attribute."""
    import ast
    import inspect

    attrs = {}
    for before, stmt in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            attrs[before.target.id] = inspect.cleandoc(stmt.value.value)
    return attrs


def describe(module_name: str) -> None:
    """Give every field of the pydantic models of a module's declared models its attribute
    docstring (the string under it) as its description, and rebuild them so that
    `model_json_schema()` says it: what pydantic's `use_attribute_docstrings` does, on demand
    (it reads the module's source)."""
    if module_name in _described:
        return
    import ast
    import inspect

    try:
        tree = ast.parse(inspect.getsource(sys.modules[module_name]))
    except (OSError, TypeError):  # no source (compiled only): no descriptions, as with pydantic's
        tree = ast.Module(body=[], type_ignores=[])
    docs = {node.name: _attribute_docs(node) for node in tree.body if isinstance(node, ast.ClassDef)}
    twins = [pydantic_model(m) for m in models_of(module_name)]
    for twin in twins:
        for name, field in twin.__pydantic_fields__.items():
            if field.description is None and name in docs.get(twin.__name__, {}):
                field.description = docs[twin.__name__][name]
    for twin in twins:  # in definition order: a model's schema reuses those of the models it holds
        twin.model_rebuild(force=True)
    _described.add(module_name)
