"""Read repro.toml into a Manifest, or raise ManifestError with every problem located.

TOML syntax errors give file:line:col, the offending line and a caret. Schema errors are all
collected, each with its dotted location and, where the locator finds it, the line it is on.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin

from kernodeck.errors import Issue, ManifestError, UsageError
from kernodeck.lockfile.names import manifest_file
from kernodeck.manifest.model import pydantic_model
from kernodeck.manifest.schema import Manifest, cross_field_problems
from kernodeck.support.fsio import NotRegularFile, read_regular
from kernodeck.support.tomltext import MAX_DEPTH, parse_toml, too_deep

if TYPE_CHECKING:
    from pydantic import BaseModel

Loc = tuple[str | int, ...]

#: A UTF-8 byte-order mark, which some editors write at the start of a file; TOML readers reject it.
BOM = "\ufeff"
_LONG_QUOTED = re.compile(r"'([^'\n]{100,})'|\"([^\"\n]{100,})\"")
#: The longest message and location part shown whole; longer ones are cut, with their length.
_MESSAGE_MAX = 2000
_LOC_PART_MAX = 80


def load_manifest(path: str | Path = "repro.toml") -> Manifest:
    """Load and validate a manifest file; raises ManifestError (all problems) or UsageError."""
    p = manifest_file(path)
    try:
        raw = read_regular(p)
    except NotRegularFile as e:
        raise UsageError(
            f"cannot read manifest {p}: {e.strerror}", hint="pass the path of a repro.toml file"
        ) from None
    except FileNotFoundError:
        raise UsageError(
            f"no manifest at {p}", hint="run `kernodeck init` to write a starter repro.toml, or pass its path"
        ) from None
    except OSError as e:
        raise UsageError(f"cannot read manifest {p}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ManifestError([Issue(str(p), "", "file is not valid UTF-8", line=line)]) from None
    return loads_manifest(text, str(p))


def loads_manifest(text: str, filename: str = "repro.toml") -> Manifest:
    """Validate manifest text; raises ManifestError carrying every problem found."""
    data = parse_toml(text, filename)
    locator = Locator(text)
    try:
        manifest = Manifest.model_validate(data, by_alias=True, by_name=False)
    except RecursionError:
        msg = f"TOML nested more than {MAX_DEPTH} levels deep (arrays or inline tables)"
        raise ManifestError([Issue(filename, "", msg, line=too_deep(text))]) from None
    except ValueError as e:  # pydantic's ValidationError: pydantic is imported only for a bad manifest
        from pydantic import ValidationError

        if not isinstance(e, ValidationError):
            raise
        issues = [_issue_from_error(err, filename, locator, data) for err in e.errors(include_url=False)]
        raise ManifestError(_dedupe(issues)) from None
    problems = cross_field_problems(manifest)
    if problems:
        issues = [_issue(filename, locator, loc, msg) for loc, msg in problems]
        raise ManifestError(issues)
    return manifest


def format_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"'
            out += ("." if out else "") + key
    return out


def _shorten_quoted(message: str) -> str:
    """Very long quoted values in a message, cut in the middle so the message stays readable;
    a message still longer than _MESSAGE_MAX characters is cut there (a 10 MB value is never
    printed whole)."""

    def cut(m: re.Match[str]) -> str:
        v = m[1] if m[1] is not None else m[2]
        return f"'{v[:60]}...{v[-20:]}' ({len(v)} characters)"

    message = _LONG_QUOTED.sub(cut, message)
    if len(message) > _MESSAGE_MAX:
        return f"{message[:_MESSAGE_MAX]}... (a message of {len(message)} characters, cut)"
    return message


def _shown_loc(loc: Loc) -> str:
    """A location as messages show it, a very long key cut (with its length)."""
    return format_loc(
        tuple(
            f"{p[:_LOC_PART_MAX]}...({len(p)} characters)"
            if isinstance(p, str) and len(p) > _LOC_PART_MAX
            else p
            for p in loc
        )
    )


def _issue(filename: str, locator: Locator, loc: Loc, message: str, hint: str | None = None) -> Issue:
    return Issue(filename, _shown_loc(loc), _shorten_quoted(message), line=locator.line_of(loc), hint=hint)


def _clean_loc(loc: tuple[Any, ...]) -> Loc:
    """Drop pydantic's internal union/function tags from an error location."""
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, int) or (isinstance(part, str) and not re.search(r"[\[\(]", part)):
            out.append(part)
    return tuple(out)


def _issue_from_error(err: Any, filename: str, locator: Locator, data: dict[str, Any]) -> Issue:
    loc = _clean_loc(tuple(err["loc"]))
    kind = err["type"]
    msg = str(err["msg"])
    hint = None
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else ""
        allowed = _allowed_keys(loc[:-1])
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        msg = f"unknown key {key!r}"
        if close:
            msg += f"; did you mean {close[0]!r}?"
        elif allowed:
            hint = "allowed keys here: " + ", ".join(sorted(allowed))
    elif kind == "missing":
        msg = f"missing required key {str(loc[-1])!r}" if loc else "missing required key"
    elif kind.endswith("_type") or kind in ("model_type", "list_type", "dict_type"):
        got = _value_at(data, loc)
        msg = f"{msg}, got {type(got).__name__} {_short(got)}"
        if kind == "list_type" and isinstance(got, dict) and loc and isinstance(loc[-1], str):
            dotted = format_loc(loc)
            hint = f"write [[{dotted}]] (double brackets: a list of tables), not [{dotted}]"
    elif kind == "literal_error":
        got = _value_at(data, loc)
        msg = f"{msg}, got {_short(got)}"
    return _issue(filename, locator, loc, msg, hint)


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _value_at(data: Any, loc: Loc) -> Any:
    cur = data
    for part in loc:
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def _model_at(loc: Loc) -> type[BaseModel] | None:
    from pydantic import BaseModel

    model: Any = pydantic_model(Manifest)
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = next(
            (f for name, f in model.model_fields.items() if part in (name, f.alias)),
            None,
        )
        if field is None:
            return None
        model = _unwrap(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    """The model class inside Optional[...], list[...] or Annotated[...], if any."""
    from pydantic import BaseModel

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in get_args(tp):
        found = _unwrap(arg)
        if found is not None:
            return found
    if get_origin(tp) is None:
        return None
    return None


def _allowed_keys(loc: Loc) -> list[str]:
    model = _model_at(loc)
    if model is None:
        return []
    return [f.alias or n for n, f in model.model_fields.items()]


def _dedupe(issues: list[Issue]) -> list[Issue]:
    seen: set[tuple[str, str]] = set()
    out = []
    for i in issues:
        k = (i.loc, i.message)
        if k not in seen:
            seen.add(k)
            out.append(i)
    return out


class Locator:
    """Maps dotted locations to line numbers with a line scan of the TOML text.

    Handles [tables], [[arrays of tables]] (nested too), `key = value` lines, dotted keys, and the
    items of multi-line arrays. Anything finer (inside an inline table) falls back to the line of
    the nearest located ancestor.
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    _KEY = re.compile(
        r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=\s*(.*)$"""
    )

    def __init__(self, text: str) -> None:
        self.lines: dict[Loc, int] = {}
        # The locator is best effort; validation never depends on it.
        with contextlib.suppress(Exception):
            self._scan(text)

    @staticmethod
    def _split_key(key: str) -> list[str]:
        parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", key)
        return [p[1:-1] if p[:1] in "\"'" else p for p in parts]

    def _scan(self, text: str) -> None:
        current: Loc = ()
        counters: dict[Loc, int] = {}
        array_tables: set[Loc] = set()
        open_array: Loc | None = None
        depth = 0
        item = 0
        for lineno, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if open_array is not None:
                if stripped and not stripped.startswith("#") and not stripped.startswith("]"):
                    self.lines.setdefault((*open_array, item), lineno)
                    item += 1
                depth += _bracket_delta(stripped)
                if depth <= 0:
                    open_array = None
                continue
            m = self._HEADER.match(line)
            if m and not self._KEY.match(line):
                is_array = m.group(1) == "[["
                names = self._split_key(m.group(2))
                resolved: list[str | int] = []
                for n in names:
                    resolved.append(n)
                    prefix = tuple(resolved)
                    if prefix in array_tables and len(resolved) < len(names):
                        resolved.append(counters[prefix] - 1)
                base = tuple(resolved)
                if is_array:
                    array_tables.add(base)
                    idx = counters.get(base, 0)
                    counters[base] = idx + 1
                    self.lines.setdefault(base, lineno)
                    current = (*base, idx)
                else:
                    current = base
                self.lines.setdefault(current, lineno)
                continue
            k = self._KEY.match(line)
            if k:
                path = (*current, *self._split_key(k.group(1)))
                self.lines.setdefault(path, lineno)
                value = k.group(2).strip()
                if value.startswith("["):
                    d = _bracket_delta(value)
                    if d > 0:
                        open_array, depth, item = path, d, 0
                        inner = value[1:].strip()
                        if inner and not inner.startswith("#"):
                            self.lines.setdefault((*path, 0), lineno)
                            item = 1

    def line_of(self, loc: Loc) -> int | None:
        for n in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:n]))
            if line is not None:
                return line
        return None


def _bracket_delta(s: str) -> int:
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', "", s)
    s = s.split("#", 1)[0]
    return s.count("[") + s.count("{") - s.count("]") - s.count("}")
