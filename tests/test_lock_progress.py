"""Who shows a lock's progress: the library reports to the progress object it is given (none by
default, never a display of its own), the command line picks rich only on a terminal without -q."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernodeck.commands.lock import RichProgress, progress_for
from kernodeck.lock.orchestrate import LockProgress, lock_manifest
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, WINDOWS, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


class Recorder:
    """A LockProgress that remembers every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def start(self, platforms: Sequence[str]) -> None:
        self.calls.append(("start", *platforms))

    def pinned(self, platform: str, what: str) -> None:
        self.calls.append(("pinned", platform, what))

    def metadata(self, platform: str) -> None:
        self.calls.append(("metadata", platform))

    def done(self, platform: str, pins: int) -> None:
        self.calls.append(("done", platform, str(pins)))

    def close(self) -> None:
        self.calls.append(("close",))


def test_lock_reports_to_the_progress_it_is_given_resolved_and_replayed(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    index_factory.add_wheel("app", "1.0", requires=["dep"])
    index_factory.add_wheel("dep", "1.0")
    manifest = write_manifest(
        tmp_path / "proj",
        requirements=["app"],
        default_url=served_index.url(),
        platforms=[LINUX, WINDOWS],
        exclude_newer="2026-06-01T00:00:00Z",
    )
    cache = tmp_path / "cache"
    rec = Recorder()
    progress: LockProgress = rec
    lock_manifest(manifest, cache_dir=cache, progress=progress, upgrade=True)
    assert rec.calls[0] == ("start", "linux", "windows") and rec.calls[-1] == ("close",)
    assert sorted(c for c in rec.calls if c[0] == "done") == [
        ("done", "linux", "2"),
        ("done", "windows", "2"),
    ]
    assert {c[1:] for c in rec.calls if c[0] == "pinned"} >= {("linux", "app 1.0"), ("windows", "dep 1.0")}
    # a replay reports the same platforms done, without resolving
    again = Recorder()
    lock_manifest(manifest, cache_dir=cache, progress=again, upgrade=True)
    assert again.calls == [
        ("start", "linux", "windows"),
        ("done", "linux", "2"),
        ("done", "windows", "2"),
        ("close",),
    ]
    # without a progress object the library shows nothing, even when told quiet=False (deprecated)
    with pytest.warns(DeprecationWarning, match="quiet"):
        lock_manifest(manifest, cache_dir=cache, quiet=False, refresh=True, upgrade=True)
    assert capfd.readouterr().err == ""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_command_shows_rich_progress_only_on_a_terminal_without_quiet() -> None:
    assert isinstance(progress_for(False, _Tty()), RichProgress)
    assert progress_for(True, _Tty()) is None
    assert progress_for(False, io.StringIO()) is None
