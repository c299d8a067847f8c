"""Writing files so that a reader never sees half of one: the only place Kernodeck writes a file
that someone else may read while it is being written.

Every write goes to a uniquely named temporary file beside the target (`.<name>.<random>.tmp`),
is flushed (and by default fsynced), then renamed over the target. A failed write removes its
temporary file and leaves the target as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

#: Prefix and suffix of the temporary files written here, so leftovers can be recognised.
TMP_SUFFIX = ".tmp"


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Write `data` to `path` atomically (temporary file beside it, then rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = True) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)
