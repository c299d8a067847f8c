"""Edit repro.toml in place with tomlkit: comments, order and formatting are kept.

Paths name a value the way error locations do: `check[0].output[1].sha256`, `resume.checkpoint.sha256`
(a sequence of keys and indexes is accepted too). Writes are atomic.

Every read -> modify -> write of a manifest (capture, record, init) runs inside `editing(path)`:
an inter-process lock (`filelocks.held`) on `.repro.toml.lock` beside it, so eight concurrent
`capture --variant` keep eight variants, not the last writer's one. The lock file stays (removing
it would let a waiting process lock a file no one else sees); it is empty and never tracked.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.toml_document import TOMLDocument

from kernodeck.errors import Issue, ManifestError, UsageError
from kernodeck.lockfile.names import edit_lock_name
from kernodeck.support.filelocks import held
from kernodeck.support.fsio import atomic_write_text

PathLike = str | Sequence[str | int]

_PART = re.compile(r"""\[(\d+)\]|"([^"]*)"|([A-Za-z0-9_-]+)""")


def parse_path(path: PathLike) -> list[str | int]:
    """`check[0].output[1].sha256` -> ["check", 0, "output", 1, "sha256"]."""
    if not isinstance(path, str):
        return list(path)
    parts: list[str | int] = []
    pos = 0
    text = path.strip()
    while pos < len(text):
        if text[pos] == ".":
            pos += 1
            continue
        m = _PART.match(text, pos)
        if m is None:
            raise ValueError(f"cannot parse key path {path!r} at {text[pos:]!r}")
        if m.group(1) is not None:
            parts.append(int(m.group(1)))
        elif m.group(2) is not None:
            parts.append(m.group(2))
        else:
            word = m.group(3)
            parts.append(int(word) if word.isdigit() and parts else word)
        pos = m.end()
    if not parts:
        raise ValueError("empty key path")
    return parts


#: Seconds a writer waits for another process editing the same manifest (a capture hashes data
#: and probes the interpreter while it holds the lock).
EDIT_WAIT_S = 600.0


def lock_path(manifest: Path) -> Path:
    """The lock file of a manifest: `.repro.toml.lock` beside it."""
    return manifest.parent / edit_lock_name(manifest.name)


@contextlib.contextmanager
def editing(path: str | Path, *, timeout: float | None = None) -> Iterator[None]:
    """Hold the manifest's inter-process lock for a read -> modify -> atomic write; a UsageError
    when another process holds it for `timeout` seconds, or when the lock cannot be taken (a
    folder that cannot be written cannot take the manifest's new version either)."""
    manifest = Path(path)
    timeout = EDIT_WAIT_S if timeout is None else timeout
    with contextlib.ExitStack() as stack:
        try:
            got = stack.enter_context(held(lock_path(manifest), timeout))
        except OSError as e:  # only the lock's own open: errors of the body pass through as they are
            raise UsageError(f"cannot lock {manifest} for editing: {e.strerror or e}") from None
        if not got:
            raise UsageError(
                f"another kernodeck process has been editing {manifest} for {timeout:.0f} s; "
                "nothing was written",
                hint="wait for it to finish (capture, check --record, init), then run this again",
            )
        yield


def load_document(path: str | Path) -> TOMLDocument:
    """Parse a TOML file for editing; a syntax error is a located ManifestError."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no manifest at {p}") from None
    except OSError as e:
        raise UsageError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark is dropped, as on load
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ManifestError([Issue(str(p), "", "file is not valid UTF-8", line=line)]) from None
    return loads_document(text, str(p))


def loads_document(text: str, filename: str = "repro.toml") -> TOMLDocument:
    try:
        return tomlkit.parse(text)
    except ParseError as e:
        raise ManifestError(
            [
                Issue(
                    filename,
                    "",
                    f"TOML syntax error: {e}",
                    line=getattr(e, "line", None),
                    col=getattr(e, "col", None),
                )
            ]
        ) from None


def get_value(doc: Any, path: PathLike, default: Any = None) -> Any:
    """The value at `path`, or `default` when any part is missing."""
    cur = doc
    for part in parse_path(path):
        try:
            cur = cur[part]
        except (KeyError, IndexError, TypeError):
            return default
    return cur


def set_value(doc: Any, path: PathLike, value: Any) -> None:
    """Set the value at `path`; missing tables on the way are created (as inline tables under an
    inline table, as [tables] otherwise). Lists and arrays of tables must already exist."""
    parts = parse_path(path)
    cur = doc
    for i, part in enumerate(parts[:-1]):
        try:
            cur = cur[part]
        except (KeyError, IndexError):
            if isinstance(part, int):
                raise KeyError(f"{_fmt(parts[: i + 1])} does not exist") from None
            new: Any = (
                tomlkit.inline_table() if isinstance(cur, tomlkit.items.InlineTable) else tomlkit.table()
            )
            cur[part] = new
            cur = cur[part]
    last = parts[-1]
    if isinstance(cur, tomlkit.items.InlineTable) and isinstance(last, str) and last not in cur:
        # keep `{ a = 1, b = 2 }` spaced like the original (tomlkit drops the space before `}`)
        spaced = cur.as_string().rstrip().endswith(" }")
        cur[last] = _item(value)
        if spaced:
            cur.add(tomlkit.ws(" "))
        return
    cur[last] = _item(value)


def remove_value(doc: Any, path: PathLike) -> bool:
    """Remove the key at `path`; False when it was not there."""
    parts = parse_path(path)
    parent = get_value(doc, parts[:-1]) if len(parts) > 1 else doc
    if parent is None:
        return False
    try:
        del parent[parts[-1]]
    except (KeyError, IndexError, TypeError):
        return False
    return True


def dumps_document(doc: TOMLDocument) -> str:
    return tomlkit.dumps(doc)


def save_document(doc: TOMLDocument, path: str | Path) -> None:
    """Write the document atomically (a reader never sees half a file)."""
    atomic_write_text(Path(path), tomlkit.dumps(doc))


def _item(value: Any) -> Any:
    if isinstance(value, list | tuple) and all(not isinstance(v, dict) for v in value):
        arr = tomlkit.array()
        arr.extend(list(value))
        return arr
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update(value)
        return table
    return value


def _fmt(parts: Sequence[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + p
    return out
