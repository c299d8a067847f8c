"""Every read -> modify -> write of repro.toml takes the manifest's edit lock: eight concurrent
`capture --variant` keep eight variants; a writer that cannot get the lock writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernodeck.capture import capture
from kernodeck.errors import UsageError
from kernodeck.manifest import edit
from kernodeck.manifest.edit import lock_path
from kernodeck.manifest.load import load_manifest
from kernodeck.support.filelocks import held

MANIFEST = (
    'schema-version = 1\n[reference]\nname = "t"\nid = "2026-12-01.1"\n[python]\nversion = "3.11"\n'
    '[[platform]]\nname = "linux"\nos = "linux"\narch = "x86_64"\n'
    '[[data]]\nname = "d"\npath = "data.bin"\nsha256 = "' + "0" * 64 + '"\n'
)

# One writer: waits until every writer has started, then captures its variant.
WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kernodeck.capture import capture
    manifest, go, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    (go.parent / f"ready-{name}").touch()
    while not go.exists():
        time.sleep(0.005)
    r = capture(manifest, variant=name, system_probe=None, python=sys.executable)
    assert r.written, r.render()
    """
)


def test_eight_concurrent_captures_keep_eight_variants(tmp_path: Path) -> None:
    manifest = tmp_path / "repro.toml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    (tmp_path / "data.bin").write_bytes(b"the data changed\n")
    go = tmp_path / "go"
    names = [f"v{i}" for i in range(8)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(manifest), str(go), name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    try:
        while len(list(tmp_path.glob("ready-*"))) < len(names) and all(p.poll() is None for p in procs):
            pass
        go.touch()  # all eight read, change and write at once
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * 8, results
    m = load_manifest(manifest)
    assert sorted(v.name for v in m.variant) == names
    assert len({v.id for v in m.variant}) == 8  # each took an id the others had not
    assert all(v.changes == {"data[0].sha256": m.variant[0].changes["data[0].sha256"]} for v in m.variant)
    assert lock_path(manifest) == tmp_path / ".repro.toml.lock"


def test_a_writer_that_cannot_get_the_lock_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = tmp_path / "repro.toml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    (tmp_path / "data.bin").write_bytes(b"the data changed\n")
    before = manifest.read_bytes()
    monkeypatch.setattr(edit, "EDIT_WAIT_S", 0.05)
    # another holder of the lock (flock: another open file excludes, even in this process)
    with held(lock_path(manifest), 5) as got:
        assert got
        with pytest.raises(UsageError) as e:
            capture(manifest, system_probe=None, python=sys.executable)
    assert "another kernodeck process has been editing" in e.value.message
    assert manifest.read_bytes() == before
    # once free, the same capture writes
    assert capture(manifest, system_probe=None, python=sys.executable).written
    assert manifest.read_bytes() != before
