"""Freshness from lock inputs only: `lock-inputs-sha256` in the header, `lock --check` at 0 for
edits that cannot change a pin and at 1 (with what changed) for those that can; hand-edited pins
and files with the old header are reported."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lock.inputs import lock_inputs_sha256
from kernodeck.lockfile.names import requirements_filename
from kernodeck.lockfile.read import read_lockfile
from kernodeck.manifest import Manifest
from kernodeck.manifest.load import load_manifest
from tests.fixtures.index_factory import IndexFactory, Server

pytest_plugins = ["tests.fixtures.index_fixtures"]

_MANIFEST = """\
schema-version = 1
# a comment

[reference]
name = "test"
id = "1"

[code]
revision = "{rev}"

[python]
version = "3.11"

[packages]
requirements = ["app", "dep>=1"]
exclude-newer = "2026-06-01T00:00:00Z"

[[packages.index]]
name = "default"
url = "{url}"
default = true

[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"

[[platform]]
name = "windows"
os = "windows"
arch = "x86_64"

[system]
cuda = "12.6"

[[data]]
name = "samples"
path = "data/samples.jsonl"
sha256 = "{sha}"

[[weights]]
name = "model"
path = "weights/model.safetensors"
sha256 = "{sha}"

[determinism]
seed = 0

[[check]]
name = "smoke"
run = ["python", "-c", "print(1)"]

[[check.output]]
path = "out.npz"
reference = "ref.npz"
atol = 0.1
"""


@pytest.fixture
def project(
    index_factory: IndexFactory, served_index: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    for index in ("default", "mirror"):
        index_factory.add_wheel(
            "app", "1.0", requires=["dep>=0.5"], upload_time="2024-01-01T00:00:00Z", index=index
        )
        index_factory.add_wheel("dep", "0.5", upload_time="2024-01-01T00:00:00Z", index=index)
        index_factory.add_wheel("dep", "1.0", upload_time="2024-01-01T00:00:00Z", index=index)
    path = tmp_path / "proj" / "repro.toml"
    path.parent.mkdir()
    path.write_text(_MANIFEST.format(rev="a" * 40, sha="0" * 64, url=served_index.url()), encoding="utf-8")
    assert main(["lock", str(path), "-q"]) == 0
    return path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


_NO_PIN_CHANGE: list[tuple[str, str, str]] = [
    ("comment", "# a comment", "# another comment"),
    ("reference id", 'id = "1"', 'id = "2"'),
    ("code revision", "a" * 40, "b" * 40),
    (
        "data fingerprint",
        f'path = "data/samples.jsonl"\nsha256 = "{"0" * 64}"',
        f'path = "data/samples.jsonl"\nsha256 = "{"1" * 64}"',
    ),
    (
        "weights fingerprint",
        f'path = "weights/model.safetensors"\nsha256 = "{"0" * 64}"',
        f'path = "weights/model.safetensors"\nsha256 = "{"2" * 64}"',
    ),
    ("check tolerance", "atol = 0.1", "atol = 0.5"),
    ("determinism", "seed = 0", "seed = 7"),
    ("system", 'cuda = "12.6"', 'cuda = "12.8"'),
    ("requirement order", '["app", "dep>=1"]', '["dep>=1", "app"]'),
]


@pytest.mark.parametrize(("what", "old", "new"), _NO_PIN_CHANGE, ids=[c[0] for c in _NO_PIN_CHANGE])
def test_edits_that_cannot_change_a_pin_keep_check_at_0(
    project: Path, what: str, old: str, new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (project.parent / requirements_filename("linux")).read_bytes()
    _edit(project, old, new)
    capsys.readouterr()
    assert main(["lock", str(project), "--check"]) == 0, capsys.readouterr()
    assert (project.parent / requirements_filename("linux")).read_bytes() == before


def _index_url_edit(served: Server) -> tuple[str, str]:
    return served.url(), served.url("mirror")


# (what, the edit, what --check names: the header shows which input changed where it can)
_PIN_INPUTS: list[tuple[str, Callable[[Server], tuple[str, str]], Callable[[Server], str]]] = [
    ("requirement", lambda s: ('"dep>=1"]', '"dep>=1", "dep<2"]'), lambda s: "the lock inputs changed ("),
    (
        "exclude-newer",
        lambda s: ("2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"),
        lambda s: "exclude-newer is now 2026-07-01T00:00:00Z (was 2026-06-01T00:00:00Z)",
    ),
    (
        "glibc",
        lambda s: (
            'name = "linux"\nos = "linux"\narch = "x86_64"',
            'name = "linux"\nos = "linux"\narch = "x86_64"\nglibc = "2.17"',
        ),
        lambda s: (
            "the platform is now cpython 3.11, manylinux_2_17 x86_64 (was cpython 3.11, manylinux_2_28 x86_64)"
        ),
    ),
    (
        "index url",
        _index_url_edit,
        lambda s: f"the indexes are now --index-url {s.url('mirror')} (were --index-url {s.url()})",
    ),
]


@pytest.mark.parametrize(("what", "edit", "reason"), _PIN_INPUTS, ids=[c[0] for c in _PIN_INPUTS])
def test_input_edits_make_check_exit_1_with_a_diff(
    project: Path,
    served_index: Server,
    what: str,
    edit: Callable[[Server], tuple[str, str]],
    reason: Callable[[Server], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    linux = project.parent / requirements_filename("linux")
    before = linux.read_bytes()
    old, new = edit(served_index)
    _edit(project, old, new)
    capsys.readouterr()
    assert main(["lock", str(project), "--check", "--platform", "linux"]) == 1
    captured = capsys.readouterr()
    assert "requirements-rebuild-linux.txt: out of date" in captured.err
    assert f"  {reason(served_index)}" in captured.err, captured.err
    if what != "requirement":  # named: the catch-all is not said as well
        assert "the lock inputs changed" not in captured.err
    assert "-# lock-inputs-sha256:" in captured.out and "+# lock-inputs-sha256:" in captured.out
    assert linux.read_bytes() == before
    assert main(["lock", str(project), "-q"]) == 0
    assert main(["lock", str(project), "--check"]) == 0


def test_hand_edited_pin_is_reported(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    linux = project.parent / requirements_filename("linux")
    text = linux.read_text(encoding="utf-8")
    assert "dep==1.0" in text
    linux.write_text(text.replace("dep==1.0", "dep==0.5"), encoding="utf-8")
    capsys.readouterr()
    assert main(["lock", str(project), "--check"]) == 1
    err = capsys.readouterr().err
    assert "requirements-rebuild-linux.txt: out of date" in err
    assert "dep==0.5 does not satisfy the requirement 'dep>=1'" in err
    assert "the lock inputs changed" not in err


def test_a_file_that_differs_only_in_comments_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lock written by a Kernodeck that annotated differently (its `# via`) installs the same:
    --check still exits 1 (the file would change), saying only the comments differ; a changed
    hash is still a pin or hash difference."""
    linux = project.parent / requirements_filename("linux")
    fresh = linux.read_text(encoding="utf-8")
    assert "    #   -r repro.toml\n    #   app\n" in fresh
    linux.write_text(fresh.replace("    #   -r repro.toml\n    #   app\n", "    #   app\n"), encoding="utf-8")
    capsys.readouterr()
    assert main(["lock", str(project), "--check"]) == 1
    err = capsys.readouterr().err
    assert "only comments differ" in err and "the same pins, hashes and options" in err
    assert "the pins or hashes differ" not in err

    digest = fresh.split("--hash=sha256:", 1)[1][:64]
    linux.write_text(fresh.replace(digest, "f" * 64), encoding="utf-8")
    assert main(["lock", str(project), "--check"]) == 1
    err = capsys.readouterr().err
    assert "the pins or hashes differ from a fresh lock" in err and "only comments differ" not in err


def test_old_header_is_stale_once_with_a_hint(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    linux = project.parent / requirements_filename("linux")
    linux.write_text(
        linux.read_text(encoding="utf-8").replace("# lock-inputs-sha256: ", "# manifest-sha256: "),
        encoding="utf-8",
    )
    capsys.readouterr()
    assert main(["lock", str(project), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("the header format changed") == 1
    assert "re-run `kernodeck lock`" in err
    assert main(["lock", str(project), "-q"]) == 0
    assert main(["lock", str(project), "--check"]) == 0


def test_header_records_the_digest_and_extra_inputs_join_it(project: Path, served_index: Server) -> None:
    manifest = load_manifest(project)
    lock = read_lockfile(project.parent / requirements_filename("linux"))
    assert lock.lock_inputs_sha256 == lock_inputs_sha256(manifest, "linux", default_index=None)
    assert lock.manifest_sha256 is None
    base = lock_inputs_sha256(manifest, "linux", default_index=None)
    with_file = lock_inputs_sha256(manifest, "linux", default_index=None, extra={"reqs.txt": "a" * 64})
    other_file = lock_inputs_sha256(manifest, "linux", default_index=None, extra={"reqs.txt": "b" * 64})
    assert len({base, with_file, other_file}) == 3
    # platforms are resolved jointly by default: a new platform is an input of every file
    alone = manifest.model_copy(
        update={"packages": manifest.packages.model_copy(update={"same_versions": "no"})}
    )
    fewer = alone.model_copy(update={"platform": [p for p in alone.platform if p.name == "linux"]})
    assert lock_inputs_sha256(alone, "linux", default_index=None) == lock_inputs_sha256(
        fewer, "linux", default_index=None
    )
    joint_fewer = manifest.model_copy(
        update={"platform": [p for p in manifest.platform if p.name == "linux"]}
    )
    assert lock_inputs_sha256(joint_fewer, "linux", default_index=None) != base


def test_verify_warns_only_when_the_lock_inputs_changed(project: Path) -> None:
    from kernodeck.layers.context import Context
    from kernodeck.layers.packages import _stale

    manifest = load_manifest(project)
    platform = manifest.get_platform("linux")
    ctx = Context(root=project.parent, manifest_file=project, python="python", platform=platform)
    lock = read_lockfile(project.parent / requirements_filename("linux"))
    _edit(project, 'id = "1"', 'id = "2"')
    assert _stale(lock, ctx) == []
    _edit(project, '"dep>=1"]', '"dep>=1", "dep<2"]')
    steps = _stale(lock, ctx)
    assert [s.name for s in steps] == ["lock-current"]
    assert (steps[0].error or "") == (
        "repro.toml changed its lock inputs since the file was written (requirements-rebuild-linux.txt)"
    )


def test_values_at_their_defaults_do_not_count() -> None:
    """A key written at its default and the same key left out give one digest, so a Kernodeck that
    learns a new key (with a default) leaves every existing lock fresh."""
    from kernodeck.lock.inputs import lock_inputs_sha256
    from kernodeck.manifest.load import loads_manifest

    base = (
        'schema-version = 1\n[reference]\nname = "d"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[packages]\nrequirements = ["a"]\n{extra}\n[[platform]]\nname = "p"\nos = "linux"\narch = "x86_64"\n'
    )
    plain = loads_manifest(base.format(extra=""), "repro.toml")
    explicit = loads_manifest(
        base.format(extra='same-versions = "prefer"\nprereleases = false\nconstraints = []'), "repro.toml"
    )
    changed = loads_manifest(base.format(extra='same-versions = "no"'), "repro.toml")

    def digest(m: Manifest) -> str:
        return lock_inputs_sha256(m, "p", default_index="https://index.invalid/simple")

    assert digest(plain) == digest(explicit)
    assert digest(plain) != digest(changed)


_WINDOWS = '[[platform]]\nname = "windows"\nos = "windows"\narch = "x86_64"\n'


def test_a_removed_platforms_files_are_named_by_check_and_removed_by_lock(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A platform taken out of the manifest leaves its lock files behind, where a teammate could
    still install from them: --check names them and exits 1, a full lock removes them (a lock of
    chosen platforms leaves them); files another manifest or a person wrote stay."""
    folder = project.parent
    assert main(["lock", str(project), "-q", "--format", "pylock"]) == 0
    windows = [folder / requirements_filename("windows"), folder / "pylock.windows.toml"]
    assert all(f.is_file() for f in windows)
    other = folder / requirements_filename("gpu")
    other.write_text("# Generated by kernodeck from other.toml; do not edit.\ndep==1.0\n", encoding="utf-8")
    by_hand = folder / requirements_filename("mine")
    by_hand.write_text("dep==1.0\n", encoding="utf-8")
    _edit(project, _WINDOWS, "")
    capsys.readouterr()

    assert main(["lock", str(project), "--check", "--format", "pylock"]) == 1
    err = capsys.readouterr().err
    for f in windows:
        assert (
            f"{f.name}: left over\n  repro.toml declares no platform windows any more; `kernodeck lock` removes it"
            in err
        )
    assert "the platforms changed (windows removed): they are locked together" in err
    assert "error: the lock files of 2 platform(s) would change" in err  # linux's, and windows' left over
    assert all(f.is_file() for f in windows)

    assert main(["lock", str(project), "-q", "--format", "pylock", "--platform", "linux"]) == 0
    assert all(f.is_file() for f in windows)

    assert main(["lock", str(project), "--format", "pylock", "--json", str(folder / "lock.json")]) == 0
    err = capsys.readouterr().err
    assert "removed requirements-rebuild-windows.txt: repro.toml declares no platform windows any more" in err
    assert "versions held back to match a removed platform too; `kernodeck lock --upgrade`" in err
    assert not any(f.exists() for f in windows)
    assert other.is_file() and by_hand.is_file()
    report = json.loads((folder / "lock.json").read_text(encoding="utf-8"))
    assert report["left_over"] == [{"platform": "windows", "files": [str(f) for f in windows]}]
    assert main(["lock", str(project), "--check", "--format", "pylock"]) == 0


def test_an_added_platform_is_named_in_the_others_reasons(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(project, _WINDOWS, _WINDOWS + '\n[[platform]]\nname = "arm"\nos = "linux"\narch = "aarch64"\n')
    capsys.readouterr()
    assert main(["lock", str(project), "--check"]) == 1
    err = capsys.readouterr().err
    assert "requirements-rebuild-linux.txt: out of date\n  the platforms changed (arm added)" in err
    assert "requirements-rebuild-arm.txt: missing" in err
    assert "the lock inputs changed (" not in err


def test_a_requirement_taken_out_of_the_manifest_is_named(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dep stays pinned (app needs it), so no pin tells; the `# via -r repro.toml` lines do."""
    _edit(project, 'requirements = ["app", "dep>=1"]', 'requirements = ["app"]')
    capsys.readouterr()
    assert main(["lock", str(project), "--check", "--platform", "linux"]) == 1
    err = capsys.readouterr().err
    assert "  repro.toml no longer requires dep\n" in err
    assert "the lock inputs changed (" not in err


def test_a_requirement_added_to_the_manifest_is_said_once(
    project: Path, index_factory: IndexFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    index_factory.add_wheel("extra-tool", "1.0", upload_time="2024-01-01T00:00:00Z")
    _edit(project, 'requirements = ["app", "dep>=1"]', 'requirements = ["app", "dep>=1", "extra-tool"]')
    capsys.readouterr()
    assert main(["lock", str(project), "--check", "--platform", "linux"]) == 1
    err = capsys.readouterr().err
    assert "  repro.toml requires extra-tool now\n" in err
    assert "required by the manifest but not pinned" not in err  # the same fact, not said twice
