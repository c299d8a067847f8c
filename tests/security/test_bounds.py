"""Inputs stay inside their bounds: manifest paths stay in the project (after symlinks) unless
`external = true`; wrongly typed or overflowing values and over-deep TOML are located exit-2
errors, never internal errors; a full disk is a clear error that leaves the target as it was."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernodeck.api import verify
from kernodeck.errors import EXIT_FAILED, ManifestError
from kernodeck.manifest.load import loads_manifest
from kernodeck.manifest.schema import leaves_project
from kernodeck.report import Status
from kernodeck.support.fsio import DiskFull, atomic_write_bytes
from tests.fixtures.installed_env import manifest_text

ZEROS = "0" * 64
DATA = b"the dataset\n"


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _issues(text: str) -> list[Any]:
    with pytest.raises(ManifestError) as e:
        loads_manifest(text)
    return e.value.issues


CHECKPOINT = '[resume]\nrun = ["python", "x.py"]\n[resume.checkpoint]\npath = "{p}"\n'


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        (f'[[data]]\nname = "d"\npath = "/etc/passwd"\nsha256 = "{ZEROS}"\n', "data[0].path"),
        (f'[[data]]\nname = "d"\npath = "../../secret"\nsha256 = "{ZEROS}"\n', "data[0].path"),
        (f'[[data]]\nname = "d"\npath = "a/../../b"\nsha256 = "{ZEROS}"\n', "data[0].path"),
        (f'[[weights]]\nname = "w"\npath = "/root/.ssh/id_rsa"\nsha256 = "{ZEROS}"\n', "weights[0].path"),
        (
            f'[code]\nrevision = "{"a" * 40}"\n[[code.config]]\npath = "../cfg.yaml"\nsha256 = "{ZEROS}"\n',
            "code.config[0].path",
        ),
        (CHECKPOINT.format(p="/tmp/ckpt.pt"), "resume.checkpoint.path"),
        (
            '[[check]]\nname = "c"\nrun = ["true"]\n[[check.output]]\npath = "o.npy"\n'
            'reference = "../../etc/ref.npy"\natol = 0.1\n',
            "check[0].output[0].reference",
        ),
    ],
)
def test_paths_leaving_the_project_are_located_errors(extra: str, loc: str) -> None:
    issues = _issues(manifest_text(extra))
    hit = [i for i in issues if i.loc == loc]
    assert hit, [i.render() for i in issues]
    assert "outside the project" in hit[0].message and hit[0].line is not None


def test_external_entries_may_name_a_shared_mount() -> None:
    m = loads_manifest(
        manifest_text(
            f'[[data]]\nname = "d"\npath = "/mnt/shared/set.bin"\nexternal = true\nsha256 = "{ZEROS}"\n'
            + CHECKPOINT.format(p="/mnt/ckpt.pt")
            + "external = true\n"
        )
    )
    assert m.data[0].external and m.resume is not None and m.resume.checkpoint.external


def test_leaves_project_reads_paths_as_written() -> None:
    assert not leaves_project("data/x.bin") and not leaves_project("a/../b") and not leaves_project("./x")
    assert leaves_project("/x") and leaves_project("..") and leaves_project("a/../../b")
    assert leaves_project("C:/x") and leaves_project("\\\\host\\share")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(DATA)
    (proj / "data" / "link.bin").symlink_to(outside)
    return proj


def test_symlink_out_of_the_project_fails_unless_external(project: Path) -> None:
    entry = f'[[data]]\nname = "d"\npath = "data/link.bin"\nsha256 = "{_sha(DATA)}"\n'
    (project / "repro.toml").write_text(manifest_text(entry))
    report = verify(project / "repro.toml", only=["data"], use_cache=False)
    step = next(s for s in report.steps if s.name == "data:d")
    assert step.status is Status.FAILED and step.details["cause"] == "outside-project"
    assert "data/link.bin leads outside the project" in (step.error or "")
    assert step.observed is None  # nothing outside was hashed into the report

    (project / "repro.toml").write_text(manifest_text(entry + "external = true\n"))
    report = verify(project / "repro.toml", only=["data"], use_cache=False)
    step = next(s for s in report.steps if s.name == "data:d")
    assert step.status is Status.PASSED and step.details["external"] is True
    assert "(external:" in str(step.observed)


def test_weights_symlink_out_of_the_project_fails(project: Path) -> None:
    entry = f'[[weights]]\nname = "w"\npath = "data/link.bin"\nsha256 = "{_sha(DATA)}"\n'
    (project / "repro.toml").write_text(manifest_text(entry))
    report = verify(project / "repro.toml", only=["data"], use_cache=False)
    step = next(s for s in report.steps if s.name == "weights:w")
    assert step.status is Status.FAILED and step.details["cause"] == "outside-project"


def test_symlink_inside_the_project_is_fine(project: Path) -> None:
    (project / "data" / "real.bin").write_bytes(DATA)
    (project / "data" / "alias.bin").symlink_to(project / "data" / "real.bin")
    entry = f'[[data]]\nname = "d"\npath = "data/alias.bin"\nsha256 = "{_sha(DATA)}"\n'
    (project / "repro.toml").write_text(manifest_text(entry))
    assert verify(project / "repro.toml", only=["data"], use_cache=False).ok


@pytest.mark.parametrize(
    ("text", "loc", "words"),
    [
        (
            manifest_text("").replace("schema-version = 1", "schema-version = true"),
            "schema-version",
            "integer 1",
        ),
        (
            manifest_text("").replace("schema-version = 1", "schema-version = 1.0"),
            "schema-version",
            "integer 1",
        ),
        (
            manifest_text("").replace("[packages]\n", "[packages]\nexclude-newer = 1\n"),
            "packages.exclude-newer",
            "date-time",
        ),
        (
            manifest_text("").replace("[packages]\n", "[packages]\nexclude-newer = 9999-12-31T23:59:59Z\n"),
            "packages.exclude-newer",
            "too far",
        ),
        (
            manifest_text("").replace(
                "[[platform]]", "[[platform]]\nmarkers = { platform_release = \"5' or 'a'=='a\" }"
            ),
            "platform[0].markers.platform_release",
            "may not hold quotes",
        ),
    ],
)
def test_wrong_types_and_injections_are_located_errors(text: str, loc: str, words: str) -> None:
    issues = _issues(text)
    hit = [i for i in issues if i.loc == loc]
    assert hit, [i.render() for i in issues]
    assert words in hit[0].message and hit[0].line is not None


def test_deep_toml_is_a_located_error_not_a_recursion_error(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text("schema-version = 1\nx = " + "[" * 500 + "]" * 500 + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "kernodeck", "validate", str(tmp_path / "repro.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "repro.toml:2:" in r.stderr and "nested more than" in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_toml_error_at_end_of_file_has_a_line_number() -> None:
    text = 'schema-version = 1\n[reference]\nname = "x'
    issues = _issues(text)
    assert issues[0].line == 3 and "end of the file" in issues[0].message


def test_a_full_disk_is_a_clear_error_and_leaves_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    target = tmp_path / "out" / "lock.txt"
    target.parent.mkdir()
    target.write_bytes(b"old\n")
    real_fdopen = os.fdopen

    def full(fd: int, *a: Any, **kw: Any) -> Any:
        os.close(fd)
        return real_fdopen(os.open("/dev/full", os.O_WRONLY), *a, **kw)  # writes fail with ENOSPC

    monkeypatch.setattr(os, "fdopen", full)
    with pytest.raises(DiskFull) as e:
        atomic_write_bytes(target, b"new\n" * 100_000)
    monkeypatch.undo()
    assert e.value.errno == errno.ENOSPC and e.value.exit_code == EXIT_FAILED
    assert str(target.parent) in e.value.message and "no space left" in e.value.message
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["lock.txt"]  # no temp file left


def test_a_symlink_inside_a_data_folder_leading_out_fails(project: Path) -> None:
    folder = project / "data" / "set"
    folder.mkdir()
    (folder / "a.bin").write_bytes(DATA)
    (folder / "nested").mkdir()
    (folder / "nested" / "stolen").symlink_to(project.parent / "outside.bin")
    entry = f'[[data]]\nname = "set"\npath = "data/set"\nsha256 = "{ZEROS}"\n'
    (project / "repro.toml").write_text(manifest_text(entry))
    report = verify(project / "repro.toml", only=["data"], use_cache=False)
    step = next(s for s in report.steps if s.name == "data:set")
    assert step.status is Status.FAILED and step.details["cause"] == "outside-project"
    assert "data/set/nested/stolen leads outside the project" in (step.error or "")
