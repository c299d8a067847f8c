"""Inter-process locks on files: the one place Kernodeck takes one.

`held(path, timeout)` holds an exclusive lock on `path` (created when missing) and tells whether
it got it before `timeout`; the caller decides whether to go on unlocked (the caches do: their
writes are atomic, so the worst case is doing the same work twice). POSIX systems lock with
`flock` (per open file, so two threads of one process exclude each other too), Windows with
`msvcrt.locking` on the first byte. The lock is released when the block ends, and by the system
when the process dies: a crashed run never leaves a lock behind.

It costs one `open` and one system call per lock, where the `filelock` package cost 0.4 ms of
Python per lock and 30-90 ms to import, paid by every cold lock that reads an index.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator

#: Seconds between two tries while another process holds the lock.
_POLL = 0.01

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try(fd: int) -> bool:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _release(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _release(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def held(path: str | os.PathLike[str], timeout: float) -> Iterator[bool]:
    """Hold an exclusive lock on `path` for the block; yields True when held, False when
    `timeout` seconds passed first (the block then runs unlocked). OSError when the file cannot
    be opened or created."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        end = time.monotonic() + timeout
        got = _try(fd)
        while not got and time.monotonic() < end:
            time.sleep(_POLL)
            got = _try(fd)
        try:
            yield got
        finally:
            if got:
                _release(fd)
    finally:
        os.close(fd)
