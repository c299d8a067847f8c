"""Inter-process locks on files: the one place Kernodeck takes one.

`held(path, timeout)` holds an exclusive lock on `path` (created when missing) and tells whether
it got it before `timeout`; the caller decides whether to go on unlocked (the caches do: their
writes are atomic, so the worst case is doing the same work twice). POSIX systems lock with
`flock` (per open file, so two threads of one process exclude each other too), Windows with
`msvcrt.locking` on the first byte. The lock is released when the block ends, and by the system
when the process dies: a crashed run never leaves a lock behind.

It costs one `open` and one system call per lock, where the `filelock` package cost 0.4 ms of
Python per lock and 30-90 ms to import, paid by every cold lock that reads an index.

`held_slot(path, slot, timeout)` locks one byte (`slot`) of a file shared by many names: the
index cache takes one lock per page and per metadata file, and one file per name (or per bucket
of names) cost a new file, a new inode, for each, about a third of the files a cold lock made.
POSIX record locks belong to the process, not to a descriptor, and closing any descriptor of the
file drops them all: so the file is opened once per process and kept open, and a slot taken by
two threads of one process (two names on one byte) is counted and released by the last of them.
Threads that must exclude each other take a thread lock first (the cache does, per name).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
import time
from collections.abc import Iterator

#: Seconds between two tries while another process holds the lock.
_POLL = 0.01

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    _seek_guard = threading.Lock()  # msvcrt locks from the descriptor's position, shared by threads

    def _try_byte(fd: int, offset: int) -> bool:
        with _seek_guard:
            try:
                os.lseek(fd, offset, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            except OSError:
                return False
        return True

    def _release_byte(fd: int, offset: int) -> None:
        with _seek_guard:
            os.lseek(fd, offset, os.SEEK_SET)
            with contextlib.suppress(OSError):
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    def _try(fd: int) -> bool:
        return _try_byte(fd, 0)

    def _release(fd: int) -> None:
        _release_byte(fd, 0)

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

    def _try_byte(fd: int, offset: int) -> bool:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN):
                return False  # another process holds it
            raise
        return True

    def _release_byte(fd: int, offset: int) -> None:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


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


_open: dict[str, int] = {}  # slot files, opened once per process and never closed (see the module)
_counts: dict[tuple[int, int], int] = {}  # (descriptor, slot) -> threads of this process inside
_guard = threading.Lock()


def _slot_file(path: str | os.PathLike[str]) -> int:
    key = os.path.abspath(path)
    with _guard:
        fd = _open.get(key)
        if fd is None:
            os.makedirs(os.path.dirname(key), exist_ok=True)
            fd = _open[key] = os.open(key, os.O_RDWR | os.O_CREAT, 0o644)
        return fd


def _enter_slot(fd: int, slot: int) -> bool | None:
    """True: this thread took the byte; None: another thread of this process holds it (counted);
    False: another process holds it."""
    with _guard:
        n = _counts.get((fd, slot), 0)
        if n:
            _counts[(fd, slot)] = n + 1
            return None
        if not _try_byte(fd, slot):
            return False
        _counts[(fd, slot)] = 1
        return True


def _leave_slot(fd: int, slot: int) -> None:
    with _guard:
        n = _counts.pop((fd, slot)) - 1
        if n:
            _counts[(fd, slot)] = n
        else:
            _release_byte(fd, slot)


@contextlib.contextmanager
def held_slot(path: str | os.PathLike[str], slot: int, timeout: float) -> Iterator[bool]:
    """Hold byte `slot` of `path` against other processes for the block; yields True when held
    (by this thread, or counted with another thread of this process on the same byte), False
    when `timeout` seconds passed first (the block then runs unlocked). OSError when the file (or
    its folder) cannot be created or opened. Threads of one process do not exclude each other here."""
    fd = _slot_file(path)
    end = time.monotonic() + timeout
    got = _enter_slot(fd, slot)
    while got is False and time.monotonic() < end:
        time.sleep(_POLL)
        got = _enter_slot(fd, slot)
    try:
        yield got is not False
    finally:
        if got is not False:
            _leave_slot(fd, slot)
