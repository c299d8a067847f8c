"""Which platforms have a lock file in a folder: one owner (kernodeck.lockfile.names.locked_platforms),
read by `lock`'s left-over check and by `init`'s covered platforms."""

from __future__ import annotations

from pathlib import Path

from kernodeck.lockfile.names import locked_platforms, manifest_file


def test_platforms_with_their_files_requirements_first(tmp_path: Path) -> None:
    for name in (
        "pylock.linux-x86_64.toml",
        "requirements-rebuild-linux-x86_64.txt",
        "pylock.macos-arm64.toml",
        "requirements-rebuild-.txt",  # no platform
        "requirements.txt",
        "notes.toml",
    ):
        (tmp_path / name).write_text("")
    found = locked_platforms(tmp_path)
    assert list(found) == ["linux-x86_64", "macos-arm64"]
    assert [p.name for p in found["linux-x86_64"]] == [
        "requirements-rebuild-linux-x86_64.txt",
        "pylock.linux-x86_64.toml",
    ]
    assert locked_platforms(tmp_path / "missing") == {}


def test_a_folder_means_the_repro_toml_inside_it(tmp_path: Path) -> None:
    assert manifest_file(tmp_path) == tmp_path / "repro.toml"
    assert manifest_file(tmp_path / "other.toml") == tmp_path / "other.toml"
    assert manifest_file(str(tmp_path)) == tmp_path / "repro.toml"
