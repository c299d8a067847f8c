"""GitHub annotations point at the line that explains them (#44.1): the `[[data]]`, `[[check]]`,
`[packages]` or `[determinism]` entry in repro.toml, the pin's line in the lock file, the data file
itself; warnings are `::warning`; titles name the step once. Read back with the runner's rules
(`tests.fixtures.runner_commands`) from a real manifest and lock file written in tmp_path."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck import checks
from kernodeck.api import verify
from kernodeck.layers.causes import StepKind
from kernodeck.manifest import load_manifest
from kernodeck.manifest.where import ManifestLines
from kernodeck.render.github import github_annotations, github_outputs, repository_folder
from kernodeck.report import Report, Step, Where
from tests.fixtures.runner_commands import Command, runner_commands
from tests.fixtures.verify_project import MANIFEST, load, project, run

LOCK = "requirements-rebuild-linux-x86_64-cpu.txt"

DATA = """
[[data]]
name = "samples"
path = "data/samples.csv"
sha256 = "{samples}"

[[data]]
name = "labels"
path = "data/labels.csv"
sha256 = "{labels}"
size = 12

[determinism.env]
PYTHONHASHSEED = "0"
"""


def _line(path: Path, start: str, nth: int = 1) -> int:
    """The 1-based number of the `nth` line of `path` that starts with `start`."""
    found = [n for n, text in enumerate(path.read_text().splitlines(), start=1) if text.startswith(start)]
    return found[nth - 1]


def _annotations(report: Report, folder: Path, env: dict[str, str]) -> dict[str, Command]:
    """The runner's reading of the annotations, by title (each title once)."""
    out = io.StringIO()
    github_outputs(report, out, env={"GITHUB_ACTIONS": "true", **env}, folder=folder)
    commands, stopped = runner_commands(out.getvalue())
    assert not stopped
    by_title = {c.props["title"]: c for c in commands}
    assert len(by_title) == len(commands), "a title names one step"
    return by_title


def _project(workspace: Path) -> Path:
    """A project in `workspace`/ml: a lock with filelock pinned wrong and sympy left out, a data file
    with other bytes than recorded, a missing one, an unset `[determinism]` variable."""
    facts = load("cpu_linux")
    pins = {d["name"]: d["version"] for d in facts["distributions"] if d["name"] not in ("pip", "setuptools")}
    pins["filelock"] = "0.0.1"
    del pins["sympy"]
    folder = workspace / "ml"
    folder.mkdir()
    manifest = project(folder, facts, "linux-x86_64-cpu", pins=pins)
    (folder / "data").mkdir()
    (folder / "data" / "samples.csv").write_text("id,text\n1,changed\n")
    recorded = hashlib.sha256(b"id,text\n1,original\n").hexdigest()
    manifest.write_text(manifest.read_text() + DATA.format(samples=recorded, labels="0" * 64))
    return folder


def test_every_annotation_points_at_the_line_that_explains_it(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    report = run(folder, load("cpu_linux"), only=["system", "packages", "data"])
    notes = _annotations(report, folder, {"GITHUB_WORKSPACE": str(tmp_path)})
    manifest, lock = folder / "repro.toml", folder / LOCK

    pin = notes["kernodeck verify: packages/pin:filelock"]
    declared = {(s.kind, s.details.get("package")) for s in report.steps if s.kind is not None}
    assert (StepKind.PIN, "filelock") in declared and (StepKind.DATA_FILE, None) in declared
    assert pin.name == "error" and pin.props["file"] == f"ml/{LOCK}"
    assert pin.props["line"] == str(_line(lock, "filelock==0.0.1")) and "endLine" not in pin.props

    unlocked = notes["kernodeck verify: packages/unlocked"]  # a warning, where they would be added
    assert unlocked.name == "warning" and "sympy" in unlocked.data
    assert unlocked.props["file"] == "ml/repro.toml"
    assert unlocked.props["line"] == str(_line(manifest, "[packages]"))

    samples = notes["kernodeck verify: data:samples"]  # the data file itself: its bytes differ
    assert samples.name == "error" and samples.props == {
        "file": "ml/data/samples.csv",
        "title": "kernodeck verify: data:samples",
    }
    labels = notes["kernodeck verify: data:labels"]  # missing: its [[data]] entry, header to last key
    assert labels.props["file"] == "ml/repro.toml"
    assert labels.props["line"] == str(_line(manifest, "[[data]]", nth=2))
    assert labels.props["endLine"] == str(_line(manifest, "size = 12"))

    seed = notes["kernodeck verify: system/determinism:env:PYTHONHASHSEED"]
    assert seed.props["file"] == "ml/repro.toml"
    assert seed.props["line"] == str(_line(manifest, "PYTHONHASHSEED"))

    failed_or_warned = [s for s in report.steps if s.status.value in ("failed", "warning")]
    assert len(notes) == len(failed_or_warned)  # passed and skipped steps are not annotated
    assert not any(t.count("data") > 1 for t in notes)  # the step is named once
    for note in notes.values():  # every file named is there, under the workspace
        assert (tmp_path / note.props["file"]).is_file(), note.props["file"]


def test_the_report_carries_where_without_host_paths(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    report = run(folder, load("cpu_linux"), only=["data"])
    text = report.to_json()
    assert str(tmp_path) not in text
    back = Report.from_json(text)
    (labels,) = [s for s in back.steps if s.name == "data:labels"]
    manifest = folder / "repro.toml"
    assert labels.where == Where(
        file="repro.toml", line=_line(manifest, "[[data]]", nth=2), end_line=_line(manifest, "size = 12")
    )


def test_files_are_relative_to_the_git_root_or_the_manifest_folder(tmp_path: Path) -> None:
    step = Step.failed("packages", "pin:numpy", "wrong", where=Where(file=LOCK, line=7))
    report = Report(steps=[step])
    nested = tmp_path / "repo" / "projects" / "a"
    nested.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    (note,) = _annotations(report, nested, {}).values()
    assert note.props["file"] == f"projects/a/{LOCK}" and note.props["line"] == "7"

    alone = tmp_path / "alone"
    alone.mkdir()
    (note,) = _annotations(report, alone, {}).values()
    assert note.props["file"] == LOCK  # no repository: the manifest's folder

    # a manifest outside $GITHUB_WORKSPACE: no file the runner could find, rather than a wrong one
    assert repository_folder(alone, {"GITHUB_WORKSPACE": str(nested)}) is None
    (line,) = github_annotations(report, None)
    assert line.startswith("::error title=") and "file=" not in line


CHECKS = """
[[check]]
name = "embed"
run = ["python", "-c", "pass"]

[[check.output]]
path = "present.json"

[[check.output]]
path = "vectors.json"

[[check]]
name = "crash"
run = ["python", "-c", "raise SystemExit(3)"]
timeout = 60
"""


def test_check_steps_point_at_their_check_and_output_entries(tmp_path: Path) -> None:
    manifest = tmp_path / "repro.toml"
    manifest.write_text(MANIFEST.format(system="") + CHECKS)
    steps = checks.steps(
        load_manifest(manifest),
        tmp_path,
        sys.executable,
        out_dir=tmp_path / "out",
        lines=ManifestLines(manifest),
    )
    by_name = {s.name: s for s in steps}
    outputs = by_name["embed/vectors.json: exists"]
    assert outputs.status.value == "failed"
    assert outputs.where == Where(
        file="repro.toml",
        line=_line(manifest, "[[check.output]]", nth=2),
        end_line=_line(manifest, 'path = "vectors.json"'),
    )
    crash = by_name["crash: run"]
    assert crash.status.value == "failed" and crash.where == Where(
        file="repro.toml", line=_line(manifest, "[[check]]", nth=2), end_line=_line(manifest, "timeout = 60")
    )
    first = by_name["embed: run"].where
    assert first is not None and first.line == _line(manifest, "[[check]]")
    assert first.end_line == _line(manifest, 'run = ["python", "-c", "pass"]')  # its outputs are their own


GPU = """
[system]
nvidia-driver = ">=560.28"

[system.gpu]
count = ">=1"
memory-gib = ">=2000"
"""


def test_requirement_and_gpu_steps_point_at_their_keys(tmp_path: Path) -> None:
    facts = load("h100_cu126")
    manifest = project(tmp_path, facts, "linux-x86_64-cu126", system=GPU)
    text = manifest.read_text()
    manifest.write_text(
        text.replace(
            'requirements = ["torch==2.6.*", "numpy>=2"]', 'requirements = [\n  "torch",\n  "numpy>=99",\n]'
        )
    )
    report = run(tmp_path, facts, platform="linux-x86_64-cu126", only=["packages", "system", "device"])
    notes = _annotations(report, tmp_path, {"GITHUB_WORKSPACE": str(tmp_path)})
    numpy = [
        n for t, n in notes.items() if t.startswith("kernodeck verify: packages/") and "numpy>=99" in n.data
    ]
    assert len(numpy) == 1 and numpy[0].props["file"] == "repro.toml"
    assert numpy[0].props["line"] == str(_line(manifest, '  "numpy>=99"'))
    memory = notes["kernodeck verify: device/gpu-memory"]
    assert memory.name == "error" and memory.props["line"] == str(_line(manifest, "memory-gib"))


def test_kernodeck_check_annotates_the_failed_check_on_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernodeck.cli import main

    folder = tmp_path / "project"
    folder.mkdir()
    manifest = folder / "repro.toml"
    manifest.write_text(MANIFEST.format(system="") + CHECKS)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = main(["check", str(manifest), "crash", "--python", sys.executable, "--out", str(tmp_path / "out")])
    assert code == 1
    commands, stopped = runner_commands(capsys.readouterr().out)
    assert not stopped
    (error,) = [c for c in commands if c.name == "error"]
    assert error.props == {
        "file": "project/repro.toml",
        "line": str(_line(manifest, "[[check]]", nth=2)),
        "endLine": str(_line(manifest, "timeout = 60")),
        "title": "kernodeck check: application/crash: run",
    }
    assert error.data.startswith("crash: ")


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_dirty_tree_is_a_warning_on_allow_dirty_and_a_changed_config_on_itself(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    folder = repo / "ml"
    folder.mkdir(parents=True)
    (folder / "conf.yaml").write_text("a: 1\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
    conf = hashlib.sha256(b"a: 1\n").hexdigest()
    code = f'\n[code]\nrevision = "{head.stdout.strip()}"\nallow-dirty = true\n\n[[code.config]]\npath = "conf.yaml"\nsha256 = "{conf}"\n'
    manifest = folder / "repro.toml"
    manifest.write_text(MANIFEST.format(system="") + code)
    (folder / "conf.yaml").write_text("a: 2\n")
    report = verify(manifest, only=["code"], cache_dir=tmp_path / "cache")
    notes = _annotations(report, folder, {})  # no $GITHUB_WORKSPACE: the folder holding .git
    dirty = notes["kernodeck verify: code/clean-tree"]
    assert dirty.name == "warning" and "conf.yaml" in dirty.data
    assert dirty.props["file"] == "ml/repro.toml" and dirty.props["line"] == str(
        _line(manifest, "allow-dirty")
    )
    config = notes["kernodeck verify: code/config:conf.yaml"]
    assert config.name == "error" and config.props["file"] == "ml/conf.yaml" and "line" not in config.props
    assert set(notes) == {"kernodeck verify: code/clean-tree", "kernodeck verify: code/config:conf.yaml"}


RESUME = f"""
[resume]
run = ["python", "-c", "pass"]

[resume.checkpoint]
path = "ckpt.pt"
sha256 = "{"0" * 64}"
"""


def test_resume_steps_point_at_the_resume_table_they_check(tmp_path: Path) -> None:
    manifest = tmp_path / "repro.toml"
    manifest.write_text(MANIFEST.format(system="") + RESUME)
    steps = checks.resume_steps(
        load_manifest(manifest),
        tmp_path,
        sys.executable,
        out_dir=tmp_path / "out",
        lines=ManifestLines(manifest),
    )
    failed = [s for s in steps if s.status.value == "failed"]
    assert failed and failed[0].name.startswith("checkpoint ckpt.pt")
    assert failed[0].where == Where(
        file="repro.toml", line=_line(manifest, "[resume.checkpoint]"), end_line=_line(manifest, "sha256 =")
    )


def test_a_platform_mismatch_points_at_the_chosen_platform_s_key(tmp_path: Path) -> None:
    facts = load("cpu_linux")
    project(tmp_path, facts, "linux-x86_64-cu126")
    facts["platform"]["machine"] = "aarch64"
    facts["platform"]["glibc"] = "2.17"
    report = run(tmp_path, facts, platform="linux-x86_64-cu126", only=["system"])
    manifest = tmp_path / "repro.toml"
    failed = {s.name: s.where for s in report.steps if s.status.value == "failed"}
    # the second [[platform]]'s arch line, not the first one's; the glibc it declares
    assert failed["arch"] == Where(file="repro.toml", line=_line(manifest, 'arch = "x86_64"', nth=2))
    assert failed["libc"] == Where(file="repro.toml", line=_line(manifest, 'glibc = "2.28"'))


def test_kernodeck_verify_annotates_a_changed_data_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernodeck.cli import main

    folder = _project(tmp_path)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = main(["verify", str(folder), "--only", "data", "--python", sys.executable])
    assert code == 1
    commands, stopped = runner_commands(capsys.readouterr().out)
    assert not stopped
    errors = {c.props["title"]: c.props for c in commands if c.name == "error"}
    assert errors["kernodeck verify: data:samples"]["file"] == "ml/data/samples.csv"
    assert errors["kernodeck verify: data:labels"]["file"] == "ml/repro.toml"


def test_a_changed_data_folder_points_at_its_first_changed_file(tmp_path: Path) -> None:
    from kernodeck.fingerprint import FingerprintCache, listing_path, listing_text

    facts = load("cpu_linux")
    manifest = project(tmp_path, facts, "linux-x86_64-cpu")
    shards = tmp_path / "data" / "shards"
    shards.mkdir(parents=True)
    for name in ("a.txt", "b.txt", "c.txt"):
        (shards / name).write_text(name)
    fp = FingerprintCache().fingerprint(shards)
    kept = listing_path(tmp_path, fp.sha256)  # what `kernodeck capture` keeps beside the manifest
    kept.parent.mkdir(parents=True)
    kept.write_text(listing_text(fp.listing))
    manifest.write_text(
        manifest.read_text() + f'\n[[data]]\nname = "shards"\npath = "data/shards"\nsha256 = "{fp.sha256}"\n'
    )
    (shards / "b.txt").write_text("changed")
    (step,) = [s for s in run(tmp_path, facts, only=["data"]).steps if s.name == "data:shards"]
    assert step.status.value == "failed" and step.details["changed"] == ["b.txt"]
    assert step.where == Where(file="data/shards/b.txt")
