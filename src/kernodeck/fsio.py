"""Writing files so that a reader never sees half of one: the only place Kernodeck writes a file
that someone else may read while it is being written.

Every write goes to a uniquely named temporary file beside the target (`.<name>.<random>.tmp`),
is flushed (and by default fsynced), then renamed over the target. A failed write removes its
temporary file and leaves the target as it was.

Reading a file whose bytes are data (a manifest, a dataset) goes through `open_regular` /
`read_regular`: a FIFO or a device is refused instead of read for ever.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import tempfile
from pathlib import Path

from kernodeck.errors import EXIT_FAILED, KernodeckError

#: Prefix and suffix of the temporary files written here, so leftovers can be recognised.
TMP_SUFFIX = ".tmp"


class DiskFull(KernodeckError, OSError):
    """A write that found no space left (or the quota used up): exit 1, naming the folder; the
    target is left as it was. Still an OSError, so that a cache that cannot be written is skipped."""

    exit_code = EXIT_FAILED

    def __init__(self, folder: Path, cause: OSError) -> None:
        why = "no space left on the device" if cause.errno == errno.ENOSPC else "the disk quota is used up"
        KernodeckError.__init__(
            self,
            f"cannot write in {folder}: {why}; nothing was changed there",
            hint="free some space (or write elsewhere) and run the command again",
        )
        self.errno = cause.errno
        self.strerror = cause.strerror
        self.filename = str(folder)

    def __str__(self) -> str:
        return self.message


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
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(target.parent, e) from None
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = True) -> None:
    """Write UTF-8 `text` to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)


class NotRegularFile(OSError):
    """A path that names a FIFO, a device, a socket or a directory where a file's bytes are wanted."""


def _kind(mode: int) -> str:
    import stat

    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> io.FileIO:
    """Open a regular file for reading (unbuffered); NotRegularFile for anything else.

    Reading a FIFO blocks for ever and a device such as /dev/zero never ends: the file is opened
    without blocking and checked on its descriptor (no window between a check and the open).
    """
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _kind(st.st_mode)
            why = f"{kind}, not a regular file" if kind.startswith("a ") else kind
            raise NotRegularFile(errno.EINVAL, why, str(path))
        if os.name == "posix":
            os.set_blocking(fd, True)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular file; NotRegularFile for a FIFO, device, socket or directory."""
    with open_regular(path) as f:
        return f.readall()
