"""A requirement-file line init cannot carry (a VCS requirement, a path to another project, an
unknown option) never drops its file: the file stays in `from`, init names the line and what to
do, and `validate` and `lock` stop at that line (exit 2) until it is fixed or listed under
`[packages] skip`, which leaves the line out (validate says so) and locks the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest import load_manifest
from kernodeck.manifest.init import HostFacts, starter_document
from kernodeck.manifest.sources import read_sources
from tests.fixtures.adopt_project import write as _write
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins

pytest_plugins = ["tests.fixtures.index_fixtures"]

LINUX = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
VCS = "git+https://example.invalid/org/tool.git"


def _init(directory: Path) -> Path:
    path = directory / "repro.toml"
    path.write_text(tomlkit.dumps(starter_document(directory, facts=LINUX, git=None)), encoding="utf-8")
    return path


def _set_skip(path: Path, skip: list[str]) -> None:
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    doc["packages"]["skip"] = skip
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")


def test_a_vcs_line_keeps_its_file_and_stops_validate_and_lock_until_skipped(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    index_factory.add_wheel("rich", "13.0")
    proj = tmp_path / "proj"
    _write(proj / "requirements.txt", f"--index-url {served_index.url()}\nrich\n{VCS}\n")
    path = _init(proj)
    text = path.read_text()
    assert load_manifest(path).packages.from_ == ["requirements.txt"]
    assert "# requirements.txt:3: git+https://example.invalid/org/tool.git: a VCS requirement" in text
    assert "[packages] skip" in text
    capsys.readouterr()

    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "requirements.txt:3:" in err and "VCS requirement" in err and "Traceback" not in err
    assert main(["lock", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "requirements.txt:3:" in err and "[packages] skip" in err
    lock_file = proj / requirements_filename(load_manifest(path).platform[0].name)
    assert not lock_file.exists()  # nothing half-written, and never an empty lock with exit 0

    _set_skip(path, [VCS])
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr()
    assert f"requirements.txt:3: skipped ([packages] skip '{VCS}')" in out.out + out.err
    assert main(["lock", str(path)]) == 0
    out = capsys.readouterr()
    assert f"requirements.txt:3: skipped ([packages] skip '{VCS}'): not locked" in out.out + out.err
    assert pins(lock_file.read_text()) == {"rich": "13.0"}  # the file's other requirements are locked


def test_init_says_so_and_the_same_line_in_two_files_is_named_in_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path / "requirements.txt", f"rich\n{VCS}\n")
    _write(tmp_path / "requirements-gpu.txt", f"{VCS}\ntorch\n")
    assert main(["init", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    for where in ("requirements.txt:2", "requirements-gpu.txt:1"):
        assert f"{where}: a line a lock cannot take; `kernodeck validate` and `lock` fail there" in err
        assert f"# {where}: {VCS}: a VCS requirement" in (tmp_path / "repro.toml").read_text()


def test_a_path_to_another_project_and_an_unknown_option_are_each_named(tmp_path: Path) -> None:
    _write(tmp_path / "requirements.txt", "rich\n-e ../other-project\n--frobnicate\ntqdm\n")
    _write(tmp_path / "requirements-gpu.txt", "torch\n")
    path = _init(tmp_path)
    text = path.read_text()
    m = load_manifest(path)
    assert m.packages.from_ == ["requirements.txt", "requirements-gpu.txt"]
    assert "# requirements.txt:2: -e ../other-project: a path to another project" in text
    assert "# requirements.txt:3: unknown or unsupported option --frobnicate" in text
    assert "not used" not in text
    _set_skip(path, ["-e ../other-project", "--frobnicate"])
    sources = read_sources(load_manifest(path), path)
    assert sources.requirements == ("rich", "tqdm", "torch")
    assert sources.skipped == (
        ("-e ../other-project", "requirements.txt:2"),
        ("--frobnicate", "requirements.txt:3"),
    )


def test_skip_names_a_line_by_its_project_and_an_entry_naming_nothing_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path / "requirements.txt", f"rich\ntool @ {VCS}\n{VCS}#egg=Other_Tool\n")
    path = _init(tmp_path)
    _set_skip(path, ["tool", "other-tool"])
    sources = read_sources(load_manifest(path), path)
    assert sources.requirements == ("rich",)
    assert [where for _, where in sources.skipped] == ["requirements.txt:2", "requirements.txt:3"]

    _set_skip(path, ["tool", "other-tool", "gone"])
    capsys.readouterr()
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "packages.skip[2]" in err and "'gone' names no line" in err


def test_a_file_that_cannot_be_read_as_a_whole_is_still_left_out(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_bytes(b"rich\n\xff\xfe\n")
    text = _init(tmp_path).read_text()
    assert "not used: requirements.txt" in text and "UTF-8" in text


def test_a_skip_entry_is_shown_without_a_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = "git+https://deploy:s3cr3t-token@example.invalid/org/tool.git"
    _write(tmp_path / "requirements.txt", f"rich\n{line}\n")
    path = _init(tmp_path)
    _set_skip(path, [line])
    capsys.readouterr()
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr()
    assert "requirements.txt:2: skipped" in out.out + out.err
    assert "s3cr3t-token" not in out.out + out.err
