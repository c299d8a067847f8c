"""A bundle of a project whose requirements come from `[packages] from` files: the receiver's code
layer counts the same code files the bundle recorded (the from files are lock inputs, not code),
and capture's edit lock never travels as code."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kernodeck.api import verify
from kernodeck.handover.bundle import write_bundle
from kernodeck.handover.sums import read
from kernodeck.report import Status
from tests.fixtures.fresh_lock import empty_lock


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def test_from_files_are_lock_inputs_and_the_edit_lock_is_not_code(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "app.py").write_text("print('hi')\n")
    (proj / "requirements.txt").write_text("-r base.txt\n")
    (proj / "base.txt").write_text("tiny==1.0\n")
    (proj / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "s"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[packages]\nfrom = ["requirements.txt"]\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    empty_lock(proj / "repro.toml", "linux-x86_64")
    (proj / ".repro.toml.lock").write_text("")  # left by `kernodeck capture`
    _git(proj, "init", "-q")
    _git(proj, "add", "-A")
    _git(proj, "commit", "-qm", "code")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=proj, capture_output=True, text=True
    ).stdout.strip()
    manifest = proj / "repro.toml"
    manifest.write_text(manifest.read_text() + f'[code]\nrevision = "{head}"\n')
    empty_lock(manifest, "linux-x86_64").write_text("--only-binary :all:\n")
    empty_lock(manifest, "linux-x86_64")
    _git(proj, "commit", "-qam", "capture")
    out = tmp_path / "bundle"
    write_bundle(out, manifest=proj, environ={}, home=tmp_path, allow_dirty=True)
    listed = read(out)
    assert {"requirements.txt", "base.txt", "app.py"} <= set(listed)
    assert ".repro.toml.lock" not in listed
    report = verify(out / "repro.toml", only=["code"], cache_dir=tmp_path / "cache")
    files = next(s for s in report.steps if s.name == "files")
    assert files.status is Status.PASSED, files.error
    assert files.details["files"] == files.details["recorded_files"]
