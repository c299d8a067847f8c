"""capture: record the reference environment into repro.toml, keeping every comment."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import tomlkit
from click.testing import CliRunner

from kernodeck.capture import SystemObservation, capture, next_reference_id
from kernodeck.cli import cli
from kernodeck.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "manifests" / "embeddings"
TODAY = dt.date(2026, 12, 2)


def _git(cwd: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        ["git", *env_args, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The embeddings example in a git repository of its own."""
    proj = tmp_path / "embeddings"
    shutil.copytree(
        EXAMPLE, proj, ignore=shutil.ignore_patterns("__pycache__", "requirements-rebuild-*", "out")
    )
    _git(proj, "init", "-q")
    _git(proj, "add", "-A")
    _git(proj, "commit", "-q", "-m", "example")
    return proj


def _comments(text: str) -> list[str]:
    """Every comment of a TOML file: whole-line comments and the trailing comments of values."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            out.append(s)
            continue
        m = re.search(
            r"""\s#\s.*$|\s#$""", re.sub(r'"(?:[^"\\]|\\.)*"', lambda x: "_" * len(x.group(0)), line)
        )
        if m:
            out.append(line[m.start() :].strip())
    return out


def test_capture_keeps_every_comment_and_gives_a_new_identity(project: Path) -> None:
    path = project / "repro.toml"
    original = path.read_text()
    comments = _comments(original)
    assert len(comments) > 5
    result = capture(path, system_probe=None, today=TODAY)
    assert result.written
    new = path.read_text()
    for c in comments:
        assert c in new, f"comment lost: {c}"
    head = _git(project, "rev-parse", "HEAD")
    assert any(c.key == "code.revision" and c.new == head for c in result.changes)
    m = load_manifest(path)
    assert m.code is not None and m.code.revision == head
    assert m.reference.id == result.new_id != result.old_id
    assert "code.revision" in result.render() and result.new_id in result.render()
    # only the recorded values changed: same number of lines, same order of keys
    assert len(new.splitlines()) == len(original.splitlines())
    assert list(tomlkit.parse(new)) == list(tomlkit.parse(original))


def test_capture_again_changes_nothing(project: Path) -> None:
    path = project / "repro.toml"
    capture(path, system_probe=None, today=TODAY)
    stable = path.read_bytes()
    result = capture(path, system_probe=None, today=TODAY)  # HEAD did not move, nothing else changed
    assert not result.changes and result.new_id is None and not result.written
    assert path.read_bytes() == stable
    assert "nothing changed" in result.render()


def test_changed_data_is_listed_and_the_id_is_bumped(project: Path) -> None:
    path = project / "repro.toml"
    capture(path, system_probe=None, today=TODAY)
    first_id = load_manifest(path).reference.id
    with (project / "data" / "samples.jsonl").open("a") as f:
        f.write('{"id": "extra", "text": "one more ticket"}\n')
    result = capture(path, system_probe=None, today=TODAY)
    keys = [c.key for c in result.changes]
    assert "data[0].sha256" in keys
    assert result.old_id == first_id
    day, n = first_id.rsplit(".", 1)
    assert result.new_id == f"{day}.{int(n) + 1}"


def test_variant_is_written_beside_the_reference(project: Path) -> None:
    path = project / "repro.toml"
    capture(path, system_probe=None, today=TODAY)
    ref = load_manifest(path)
    with (project / "data" / "samples.jsonl").open("a") as f:
        f.write('{"id": "extra", "text": "one more ticket"}\n')
    result = capture(path, variant="more-samples", note="a 17th ticket", system_probe=None, today=TODAY)
    m = load_manifest(path)
    assert m.reference.id == ref.reference.id  # the reference keeps its identity
    assert m.data[0].sha256 == ref.data[0].sha256  # and its values
    (v,) = m.variant
    assert v.name == "more-samples" and v.based_on == ref.reference.id and v.id == result.new_id
    assert v.note == "a 17th ticket"
    assert set(v.changes) == {"data[0].sha256"}
    # recapturing the same variant replaces it instead of adding a second entry
    capture(path, variant="more-samples", system_probe=None, today=TODAY)
    assert len(load_manifest(path).variant) == 1


def test_observed_gpu_system_is_recorded(project: Path) -> None:
    path = project / "repro.toml"

    def probe(_python: str) -> SystemObservation:
        return SystemObservation(
            nvidia_driver="560.35.03",
            cuda="12.6",
            gpus=[{"name": "NVIDIA L4", "compute_capability": "8.9", "memory_gib": 22.5}],
        )

    result = capture(path, system_probe=probe, today=TODAY)
    m = load_manifest(path)
    assert m.system.nvidia_driver == ">=560.35.03"
    assert m.system.cuda == "12.6"
    assert m.system.gpu is not None
    assert (
        m.system.gpu.count == ">=1"
        and m.system.gpu.compute_capability == ">=8.9"
        and m.system.gpu.memory_gib == ">=22"
    )
    assert {"system.cuda", "system.nvidia-driver"} <= {c.key for c in result.changes}


def test_cpu_probe_leaves_gpu_expectations(tmp_path: Path) -> None:
    src = (ROOT / "tests" / "data" / "design-example.toml").read_text()
    path = tmp_path / "repro.toml"
    path.write_text(src)
    result = capture(path, system_probe=lambda _p: SystemObservation(), today=TODAY, dry_run=True)
    assert not any(c.key.startswith("system.") for c in result.changes)
    assert any("no accelerator observed" in n for n in result.notes)
    assert path.read_text() == src  # dry run


def test_next_reference_id() -> None:
    assert next_reference_id("2026-12-02.1", TODAY) == "2026-12-02.2"
    assert next_reference_id("2026-11-30.4", TODAY) == "2026-12-02.1"
    assert next_reference_id("v1", TODAY) == "2026-12-02.1"
    assert next_reference_id("2026-12-02.1", TODAY, {"2026-12-02.2"}) == "2026-12-02.3"


def test_cli_capture(project: Path) -> None:
    res = CliRunner().invoke(cli, ["capture", str(project), "--no-system"])
    assert res.exit_code == 0, res.output
    assert "code.revision" in res.output and "new reference id" in res.output


def test_capture_records_the_revision_of_a_project_that_was_not_a_checkout_at_init(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """init before `git init` (or before the first commit) writes no [code] table; once there is a
    commit, capture records its revision (a fill: the reference keeps its identity) and drops
    init's placeholder, as the README's loop promises ("capture: record the code revision")."""
    from kernodeck.cli import main

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "requirements.txt").write_text("rich\n")
    _git(proj, "init", "-q")  # a repository without a commit is not a revision yet
    assert main(["init", str(proj)]) == 0
    text = (proj / "repro.toml").read_text()
    assert "\n[code]\n" not in text and "`kernodeck capture` records it after the first commit" in text
    result = capture(proj / "repro.toml", system_probe=None, today=TODAY)
    assert not result.written and any(n.startswith("code revision not captured") for n in result.notes)

    _git(proj, "add", "-A")
    _git(proj, "commit", "-q", "-m", "first")
    head = _git(proj, "rev-parse", "HEAD")
    result = capture(proj / "repro.toml", system_probe=None, today=TODAY)
    assert result.written and result.new_id is None  # filled in, same identity
    m = load_manifest(proj / "repro.toml")
    assert m.code is not None and m.code.revision == head
    text = (proj / "repro.toml").read_text()
    assert "not a git checkout yet" not in text
    # and it stays put: a second capture changes nothing
    assert not capture(proj / "repro.toml", system_probe=None, today=TODAY).written
