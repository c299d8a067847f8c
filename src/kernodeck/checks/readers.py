"""Read a check's output back from disk, one reader per format.

A reader returns `Loaded` (the value, and for arrays their dtype name) or `Unreadable(reason)`;
an unreadable output is an expected result, reported as a failed criterion, not an exception.

Arrays come back as NumPy arrays (torch tensors are converted; a dtype NumPy lacks, such as
bfloat16, is widened to float32 and its own name kept in `dtype`). JSON comes back as Python
objects, JSON Lines as a list of records, CSV as a list of row dicts. `key` picks one array of an
`.npz`, one tensor of a `.safetensors`, an entry of a `.pt` state dict, or a (dotted) key of a JSON
object; for `.jsonl`/`.csv` it picks one field of every record (a column).

NumPy, safetensors and torch are imported only when a file needs them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARRAY_SUFFIXES = (".npy", ".npz", ".safetensors", ".pt", ".pth")
SUFFIXES = (*ARRAY_SUFFIXES, ".json", ".jsonl", ".csv")


@dataclass(frozen=True)
class Loaded:
    value: Any
    dtype: str | None = None  # set for arrays and tensors
    format: str = ""


@dataclass(frozen=True)
class Unreadable:
    reason: str
    missing_file: bool = False


Result = Loaded | Unreadable


def is_numeric_format(path: str) -> bool:
    return path.lower().endswith(ARRAY_SUFFIXES)


def read_output(path: Path, key: str | None = None) -> Result:
    """Read `path` (optionally one `key` inside it)."""
    if not path.is_file():
        return Unreadable("file not found" if not path.exists() else "not a regular file", missing_file=True)
    suffix = path.suffix.lower()
    reader = _READERS.get(suffix)
    if reader is None:
        return Unreadable(
            f"no reader for {suffix or 'files without a suffix'}; readers: {', '.join(SUFFIXES)}"
        )
    try:
        return reader(path, key)
    except _NeedPackage as e:
        return Unreadable(str(e))
    except Exception as e:  # a corrupt file is a result, not a crash
        return Unreadable(f"cannot read {path.name}: {type(e).__name__}: {_first_line(e)}")


def dtype_name(dtype: Any) -> str:
    """'float32' for numpy.float32, torch.float32, 'f4', '<f4', 'float32'."""
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch.") :]
    try:
        import numpy as np

        return str(np.dtype(text).name)
    except Exception:
        return text


def lookup(obj: Any, key: str) -> tuple[bool, Any]:
    """Find `key` in nested dicts/lists: `rng.python` is obj["rng"]["python"] (or obj["rng.python"]);
    keys that contain dots themselves, like a state dict's `0.weight`, are found too."""
    if isinstance(obj, dict) and key in obj:
        return True, obj[key]
    if isinstance(obj, list | tuple) and key.isdigit():
        return (True, obj[int(key)]) if int(key) < len(obj) else (False, None)
    parts = key.split(".")
    for i in range(1, len(parts)):
        head, rest = ".".join(parts[:i]), ".".join(parts[i:])
        found, child = lookup(obj, head)
        if found:
            found, value = lookup(child, rest)
            if found:
                return True, value
    return False, None


# --- formats -----------------------------------------------------------------------------------


class _NeedPackage(Exception):
    def __init__(self, what: str, extra: str | None = None) -> None:
        if extra is not None:
            from kernodeck.interpreters import add_extra_hint

            what = f"{what}; {add_extra_hint(extra)}"
        super().__init__(what)


def _np() -> Any:
    try:
        import numpy as np
    except ImportError:
        raise _NeedPackage(
            "reading this output needs numpy in kernodeck's own environment", "checks"
        ) from None
    return np


def _npy(path: Path, key: str | None) -> Result:
    np = _np()
    arr = np.load(path, allow_pickle=False)
    if key is not None:
        return Unreadable(f"key {key!r} given, but a .npy file holds a single array")
    return Loaded(arr, dtype_name(arr.dtype), "npy")


def _npz(path: Path, key: str | None) -> Result:
    np = _np()
    with np.load(path, allow_pickle=False) as z:
        names = sorted(z.files)
        if key is None:
            if len(names) != 1:
                return Unreadable(f"holds {len(names)} arrays ({_names(names)}); set `key` to one of them")
            key = names[0]
        if key not in z.files:
            return Unreadable(f"no array {key!r} (arrays: {_names(names)})")
        arr = z[key]
    return Loaded(arr, dtype_name(arr.dtype), "npz")


def _safetensors(path: Path, key: str | None) -> Result:
    try:
        from safetensors import safe_open
    except ImportError:
        raise _NeedPackage(
            "reading .safetensors needs safetensors in kernodeck's own environment", "checks"
        ) from None
    with safe_open(str(path), framework="numpy") as f:
        names = sorted(f.keys())
    if key is None:
        if len(names) != 1:
            return Unreadable(f"holds {len(names)} tensors ({_names(names)}); set `key` to one of them")
        key = names[0]
    if key not in names:
        return Unreadable(f"no tensor {key!r} (tensors: {_names(names)})")
    try:
        with safe_open(str(path), framework="numpy") as f:
            arr = f.get_tensor(key)
        return Loaded(arr, dtype_name(arr.dtype), "safetensors")
    except Exception:
        # a dtype numpy lacks (bfloat16, float8): read it with torch
        try:
            import torch  # noqa: F401
        except ImportError:
            raise _NeedPackage(
                f"tensor {key!r} has a dtype numpy cannot hold; reading it needs torch"
            ) from None
        with safe_open(str(path), framework="pt") as f:
            return _from_tensor(f.get_tensor(key), "safetensors")


def _torch(path: Path, key: str | None) -> Result:
    try:
        import torch
    except ImportError:
        raise _NeedPackage("reading .pt/.pth needs torch in kernodeck's own environment") from None
    obj = torch.load(path, map_location="cpu", weights_only=True)
    if key is not None:
        found, obj = lookup(obj, key)
        if not found:
            return Unreadable(f"no entry {key!r}")
    if isinstance(obj, torch.Tensor):
        return _from_tensor(obj, "pt")
    return Loaded(_tensors_to_arrays(obj), None, "pt")


def _json(path: Path, key: str | None) -> Result:
    obj = json.loads(path.read_text(encoding="utf-8"))
    if key is not None:
        found, obj = lookup(obj, key)
        if not found:
            return Unreadable(f"no key {key!r}")
    return Loaded(obj, None, "json")


def _jsonl(path: Path, key: str | None) -> Result:
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                return Unreadable(f"line {n} is not JSON: {e.msg}")
    if key is None:
        return Loaded(records, None, "jsonl")
    column = []
    for n, rec in enumerate(records, start=1):
        found, v = lookup(rec, key)
        if not found:
            return Unreadable(f"record {n} has no {key!r}")
        column.append(v)
    return Loaded(column, None, "jsonl")


def _csv(path: Path, key: str | None) -> Result:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if key is None:
        return Loaded(rows, None, "csv")
    if rows and key not in rows[0]:
        return Unreadable(f"no column {key!r} (columns: {_names(list(rows[0]))})")
    return Loaded(_numbers([r[key] for r in rows]), None, "csv")


# --- helpers -----------------------------------------------------------------------------------


def _from_tensor(t: Any, fmt: str) -> Loaded:
    import torch

    t = t.detach().cpu()
    name = dtype_name(t.dtype)
    if t.dtype in (torch.bfloat16,) or "float8" in name:
        t = t.float()
    return Loaded(t.numpy(), name, fmt)


def _tensors_to_arrays(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return _from_tensor(obj, "pt").value
    if isinstance(obj, dict):
        return {k: _tensors_to_arrays(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_tensors_to_arrays(v) for v in obj]
    return obj


def _numbers(values: list[str]) -> list[Any]:
    """A CSV column of numbers as numbers (ints when all are ints); otherwise unchanged."""
    try:
        return [int(v) for v in values]
    except ValueError:
        pass
    try:
        return [float(v) for v in values]
    except ValueError:
        return list(values)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:8])
    return shown + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


#: suffix -> reader of `(path, key)`; SUFFIXES lists the same suffixes (a test holds them together).
_READERS: dict[str, Callable[[Path, str | None], Result]] = {
    ".npy": _npy,
    ".npz": _npz,
    ".safetensors": _safetensors,
    ".pt": _torch,
    ".pth": _torch,
    ".json": _json,
    ".jsonl": _jsonl,
    ".csv": _csv,
}
