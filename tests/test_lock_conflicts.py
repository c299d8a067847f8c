"""A requirements-rebuild file left with git merge conflict markers (two teammates locked at once):
verify and `lock --check` name the marker's line, `kernodeck lock` keeps the agreed pins, resolves
the conflicting ones afresh and says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.version import Version

from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from kernodeck.lockfile.read import (
    LockfileError,
    conflict_note,
    parse_lockfile,
    pins_of_text,
)
from kernodeck.support.conflicts import conflict_regions
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

A, B = "a" * 64, "b" * 64
MERGED = f"""\
# platform: linux-x86_64
--only-binary :all:

agreed==1.0 \\
    --hash=sha256:{A}
<<<<<<< HEAD
dep==1.0 \\
    --hash=sha256:{A}
=======
dep==3.0 \\
    --hash=sha256:{B}
>>>>>>> origin/main
later==2.0 \\
    --hash=sha256:{B}
"""


def test_a_strict_read_stops_at_the_first_marker_with_its_line() -> None:
    with pytest.raises(LockfileError) as e:
        parse_lockfile(MERGED, "requirements-rebuild-linux-x86_64.txt")
    assert e.value.message.startswith(
        "requirements-rebuild-linux-x86_64.txt:6: git merge conflict marker '<<<<<<< HEAD'"
    )
    assert "kernodeck lock" in (e.value.hint or "")


def test_a_lenient_read_keeps_only_the_agreed_pins() -> None:
    assert pins_of_text(MERGED) == {"agreed": Version("1.0"), "later": Version("2.0")}
    assert conflict_regions(MERGED.splitlines()) == [(6, 12)]
    note = conflict_note(MERGED, "r.txt")
    assert note is not None and "lines 6-12" in note
    assert conflict_note(MERGED.replace("<<<<<<<", "#<<<<<<"), "r.txt") is None  # not at a line start


@pytest.mark.parametrize(
    "text",
    [
        # diff3 style, with the common ancestor between ||||||| and =======
        "<<<<<<< ours\ndep==1.0\n||||||| base\ndep==0.9\n=======\ndep==3.0\n>>>>>>> theirs\nlater==2.0\n",
        # never closed: to the end of the file
        "later==2.0\n<<<<<<< HEAD\ndep==1.0\n=======\n",
    ],
)
def test_other_conflict_shapes(text: str) -> None:
    assert pins_of_text(text) == {"later": Version("2.0")}
    with pytest.raises(LockfileError, match="git merge conflict marker"):
        parse_lockfile(text)


def test_lock_after_a_conflicted_merge(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path
) -> None:
    for name in ("dep", "other"):
        index_factory.add_wheel(name, "1.0", upload_time="2024-01-01T00:00:00Z")
        index_factory.add_wheel(name, "2.0", upload_time="2024-02-01T00:00:00Z")
    manifest = write_manifest(
        tmp_path / "proj", requirements=["dep", "other"], default_url=served_index.url(), platforms=[LINUX]
    )
    cache = tmp_path / "cache"
    lock_manifest(manifest, cache_dir=cache)
    path = manifest.parent / requirements_filename(LINUX["name"])
    text = path.read_text()
    assert "dep==2.0" in text and "other==2.0" in text
    # the teammates disagreed on dep; both sides pin an older dep, and other was moved back to 1.0
    block = re.search(r"dep==2\.0 \\\n(?:    .*\n)*", text)
    assert block is not None
    ours = block.group(0).replace("dep==2.0", "dep==1.0")
    merged = text.replace(block.group(0), f"<<<<<<< HEAD\n{ours}=======\n{ours}>>>>>>> theirs\n")
    merged = merged.replace("other==2.0", "other==1.0")
    path.write_text(merged)
    first = merged.splitlines().index("<<<<<<< HEAD") + 1

    check = lock_manifest(manifest, cache_dir=cache, check=True)
    assert not check.ok
    reasons = [r for p in check.platforms for r in p.reasons]
    assert any(
        r.startswith(f"{path.name}:{first}: git merge conflict marker '<<<<<<< HEAD'") for r in reasons
    ), reasons
    assert path.read_text() == merged  # --check writes nothing

    done = lock_manifest(manifest, cache_dir=cache)
    after = path.read_text()
    assert "<<<<<<<" not in after and ">>>>>>>" not in after
    assert "other==1.0" in after  # the agreed pin is preferred, as any pin in the file
    assert "dep==2.0" in after  # the conflicting one is resolved afresh, not taken from either side
    warnings = [w for p in done.platforms for w in p.warnings]
    assert any(
        w.startswith(f"{path.name} had git merge conflict markers (lines {first}-") and "resolved afresh" in w
        for w in warnings
    ), warnings
    assert lock_manifest(manifest, cache_dir=cache, check=True).ok
