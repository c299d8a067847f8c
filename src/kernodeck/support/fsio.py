"""Writing files so that a reader never sees half of one: the only place Kernodeck writes a file
that someone else may read while it is being written.

Every write goes to a uniquely named temporary file beside the target (`.<name>.<random>.tmp`),
is flushed (and by default fsynced), then renamed over the target. A failed write removes its
temporary file and leaves the target as it was.

A set of files that belong together (the lock files of every platform) is written with
`write_set`: every file is staged first, a journal beside them names the set, then the files are
renamed into place and the journal removed. A run killed between two renames leaves the journal:
the next `write_set` (or `recover_set`) in that folder finishes the renames, so the folder holds
either the whole old set or the whole new set, and `interrupted_set` lets a reader tell. Leftover
temporary files of earlier runs are removed then too.

Reading a file whose bytes are data (a manifest, a dataset) goes through `open_regular` /
`read_regular`: a FIFO or a device is refused instead of read for ever.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from kernodeck.errors import EXIT_FAILED, EXIT_USAGE, KernodeckError

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
            f"cannot write in {os.path.abspath(folder)}: {why}; nothing was changed there",
            hint="free some space (or write elsewhere) and run the command again",
        )
        self.errno = cause.errno
        self.strerror = cause.strerror
        self.filename = str(folder)

    def __str__(self) -> str:
        return self.message


def nearest_existing(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute, or its nearest ancestor that exists (where it would be made)."""
    found = Path(os.path.abspath(path))
    while not found.exists() and found.parent != found:
        found = found.parent
    return found


#: How a write the system refuses is worded (see `NotWritable`).
_REFUSED = {
    errno.EACCES: "permission denied",
    errno.EPERM: "not permitted",
    errno.EROFS: "the file system is read-only",
}


class NotWritable(KernodeckError, OSError):
    """A write the system refused (no permission, a read-only file system): exit 2, naming the
    folder; the target is left as it was. Still an OSError, so a cache that cannot be written is
    skipped."""

    exit_code = EXIT_USAGE

    def __init__(self, folder: Path, cause: OSError) -> None:
        why = _REFUSED.get(cause.errno or 0, cause.strerror or "refused")
        folder = nearest_existing(folder)  # a folder it could not make: the one it would be made in
        KernodeckError.__init__(
            self,
            f"cannot write in {folder}: {why}; nothing was changed there",
            hint="write somewhere you may (the command's output folder option, where it has one), "
            "or get write access to that folder",
        )
        self.errno = cause.errno
        self.strerror = cause.strerror
        self.filename = str(folder)

    def __str__(self) -> str:
        return self.message


@contextlib.contextmanager
def _writing_in(folder: Path) -> Iterator[None]:
    """A write in `folder`: the errors a user can act on raised as such (a full disk: DiskFull;
    a refused write: NotWritable), any other as it is."""
    try:
        yield
    except KernodeckError:
        raise
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(folder, e) from None
        if e.errno in _REFUSED:
            raise NotWritable(folder, e) from None
        raise


def _temp_beside(target: Path) -> tuple[int, str]:
    """A new temporary file beside `target` (`.<name>.<random>.tmp`), open for writing: (fd, path).

    Its mode is what `target` ends with once the temporary file replaces it: the mode `target`
    has now when it exists, else what a plain `open()` creates (0666 less the umask), so a lock
    file is as readable as the files pip-compile or an editor writes there (not 0600, as
    `tempfile.mkstemp` would leave it, unreadable to the rest of a team on a shared machine)."""
    try:
        keep: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        keep = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = os.path.join(target.parent, f".{target.name}.{os.urandom(6).hex()}{TMP_SUFFIX}")
        try:
            fd = os.open(tmp, flags, 0o666 if keep is None else keep)
        except FileExistsError:
            continue
        if keep is not None and os.name == "posix":
            with contextlib.suppress(OSError):
                os.fchmod(fd, keep)  # the umask applied at creation: the exact mode back
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(target.parent))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Write `data` to `path` atomically (temporary file beside it, then rename)."""
    target = Path(path)
    with _writing_in(target.parent):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _temp_beside(target)
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


def append_text(path: str | os.PathLike[str], text: str, *, after: str = "") -> None:
    """Append UTF-8 `text` to `path` in one `O_APPEND` write (the file made if missing).

    For a file other processes append to at the same time (GitHub's step summary): the system
    places each append at the end, so no writer's text is lost, and a symbolic link is written
    through, never replaced. `after` goes first when the file is not empty (a separator). Not for
    files that must never be seen half-written."""
    target = Path(path)
    with _writing_in(target.parent):
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)
        try:
            view = memoryview(((after if os.fstat(fd).st_size else "") + text).encode("utf-8"))
            while view:  # one write for a regular file; a short write (a full disk) goes on
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def write_text_or_stdout(target: str | os.PathLike[str], text: str) -> None:
    """The writer of every `--json FILE|-`: `-` prints `text` on stdout (flushed), anything else is a
    file written atomically. (Where the human report goes meanwhile: `commands.options.human_stream`.)"""
    if str(target) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        atomic_write_text(target, text)


# --- sets of files --------------------------------------------------------------------------------

#: The journal of a set being written, in the set's folder.
SET_JOURNAL = ".kernodeck-write-set.json"


def _stage(target: Path, data: bytes) -> Path:
    with _writing_in(target.parent):
        fd, tmp = _temp_beside(target)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return Path(tmp)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """One writer of sets per folder at a time (an advisory lock on the folder itself, where the
    platform has one)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks on folders; sets are still journalled
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def interrupted_set(folder: Path) -> bool:
    """Whether a set write in `folder` was interrupted between its renames (a mixed set)."""
    return (folder / SET_JOURNAL).is_file()


def recover_set(folder: Path, owned: Callable[[str], bool]) -> list[str]:
    """Finish an interrupted set write in `folder` (rename what is still staged) and remove
    leftover temporary files of targets `owned` names. Returns the targets it finished.
    Call with the folder lock held, or from a single writer."""
    done: list[str] = []
    journal = folder / SET_JOURNAL
    if journal.is_file():
        try:
            entries = json.loads(journal.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            entries = []
        for entry in entries if isinstance(entries, list) else []:
            if not (isinstance(entry, dict) and isinstance(entry.get("target"), str)):
                continue
            target, temp = folder / Path(entry["target"]).name, folder / Path(str(entry.get("temp"))).name
            if temp.is_file():
                os.replace(temp, target)
                done.append(target.name)
        journal.unlink(missing_ok=True)
        _fsync_folder(folder)
    leftover = re.compile(r"^\.(?P<name>.+)\.[^.]+" + re.escape(TMP_SUFFIX) + "$")
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = leftover.match(p.name)
            if m and owned(m["name"]) and p.is_file():
                with contextlib.suppress(OSError):
                    p.unlink()
    return done


def write_set(
    folder: Path,
    files: Sequence[tuple[str, bytes]],
    owned: Callable[[str], bool],
    *,
    before_rename: Callable[[int], None] | None = None,
) -> None:
    """Write `files` ({name in folder: content}) so that the folder shows the whole old set or
    the whole new set: stage all, journal, rename each, drop the journal. An earlier interrupted
    set in the folder is finished first and leftover temporary files of `owned` names removed.
    (`before_rename(i)` is a test hook, called before the i-th rename.)"""
    with _writing_in(folder):
        folder.mkdir(parents=True, exist_ok=True)
    with _folder_lock(folder):
        recover_set(folder, owned)
        staged: list[tuple[Path, Path]] = []
        try:
            for name, data in files:
                target = folder / name
                staged.append((target, _stage(target, data)))
            journal = [{"target": t.name, "temp": tmp.name} for t, tmp in staged]
            atomic_write_text(folder / SET_JOURNAL, json.dumps(journal, indent=1) + "\n")
        except BaseException:
            for _t, tmp in staged:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            raise
        for i, (target, tmp) in enumerate(staged):
            if before_rename is not None:
                before_rename(i)
            os.replace(tmp, target)
        (folder / SET_JOURNAL).unlink(missing_ok=True)
        _fsync_folder(folder)


class NotRegularFile(OSError):
    """A path that names a FIFO, a device, a socket or a directory where a file's bytes are wanted."""


def _kind(mode: int) -> str:
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


def not_regular(path: str | os.PathLike[str]) -> str | None:
    """Why `path`, which exists, is not read as a file ("a socket, not a regular file"); None for
    a regular file or a directory (capture and verify read both)."""
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = _kind(mode)
    return f"{kind}, not a regular file" if kind.startswith("a ") else kind


def open_regular(path: str | os.PathLike[str]) -> io.FileIO:
    """Open a regular file for reading (unbuffered); NotRegularFile for anything else.

    Reading a FIFO blocks for ever and a device such as /dev/zero never ends: the file is opened
    without blocking and checked on its descriptor (no window between a check and the open).
    """
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
