"""`[packages] from`: requirements read from pyproject.toml (extras, PEP 735 groups) and requirement
files at lock time; their bytes are lock inputs; validate reports a missing source at its line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import tomlkit

from kernodeck.cli import main
from kernodeck.errors import ManifestError
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.sources import apply_sources, read_sources
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins

pytest_plugins = ["tests.fixtures.index_fixtures"]

PYPROJECT = """[project]
name = "trainer"
version = "0.3"
dependencies = ["app>=1"]

[project.optional-dependencies]
viz = ["plotter"]
all = ["trainer[viz]"]

[dependency-groups]
lint = ["linter==2.0"]
test = ["tester", {include-group = "lint"}]
"""


def _manifest(directory: Path, packages: dict[str, object], url: str = "http://127.0.0.1:9/simple") -> Path:
    doc = tomlkit.document()
    doc.add(tomlkit.comment("a manifest that reads its requirements from the project"))
    doc["schema-version"] = 1
    doc["reference"] = {"name": "t", "id": "1"}
    doc["python"] = {"version": "3.11"}
    doc["packages"] = {**packages, "index": [{"name": "default", "url": url, "default": True}]}
    aot = tomlkit.aot()
    aot.append(tomlkit.table().add("name", "linux").add("os", "linux").add("arch", "x86_64"))
    doc["platform"] = aot
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "repro.toml"
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


def test_pyproject_with_extras_and_dependency_groups(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    path = _manifest(tmp_path, {"from": ["pyproject.toml"], "extras": ["all"], "groups": ["test"]})
    sources = read_sources(load_manifest(path), path)
    assert sources.requirements == ("app>=1", "plotter", "tester", "linter==2.0")
    assert sources.inputs == {"pyproject.toml": hashlib.sha256(PYPROJECT.encode()).hexdigest()}

    none = _manifest(tmp_path / "plain", {"from": ["../pyproject.toml"], "external": True})
    assert read_sources(load_manifest(none), none).requirements == ("app>=1",)


def test_unknown_group_and_include_cycle_are_located(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    path = _manifest(tmp_path, {"from": ["pyproject.toml"], "groups": ["docs"]})
    with pytest.raises(ManifestError) as e:
        read_sources(load_manifest(path), path)
    assert "pyproject.toml" in e.value.render() and "no dependency group 'docs'" in e.value.render()

    (tmp_path / "pyproject.toml").write_text(
        PYPROJECT.replace('lint = ["linter==2.0"]', 'lint = [{include-group = "test"}]')
    )
    path = _manifest(tmp_path, {"from": ["pyproject.toml"], "groups": ["test"]})
    with pytest.raises(ManifestError) as e:
        read_sources(load_manifest(path), path)
    assert "cycle" in e.value.render()


def test_extras_without_a_pyproject_source_is_invalid(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("app\n")
    path = _manifest(tmp_path, {"from": ["requirements.txt"], "extras": ["viz"]})
    with pytest.raises(ManifestError) as e:
        load_manifest(path)
    assert "packages.extras" in e.value.render()


def test_requirement_files_merge_requirements_constraints_and_indexes(tmp_path: Path) -> None:
    req = tmp_path / "requirements"
    req.mkdir()
    (req / "base.txt").write_text("app>=1\n")
    (req / "pins.txt").write_text("dep<2\n")
    (req / "train.txt").write_text(
        "-r base.txt\n-c pins.txt\n"
        "--extra-index-url https://${IX_USER}:${IX_TOKEN}@example.org/private/simple\n"
        "--extra-index-url https://example.org/whl/cu121\n"
        "torch==2.3.0+cu121\n"
    )
    path = _manifest(tmp_path, {"from": ["requirements/train.txt"], "requirements": ["extra-tool"]})
    manifest, inputs = apply_sources(load_manifest(path), path)
    pk = manifest.packages
    assert pk.requirements == ["extra-tool", "app>=1", "torch==2.3.0"]
    assert pk.constraints == ["dep<2"]
    assert [(ix.name, ix.url, ix.default) for ix in pk.index] == [
        ("default", "http://127.0.0.1:9/simple", True),
        ("train-1", "https://${IX_USER}:${IX_TOKEN}@example.org/private/simple", False),
    ]
    assert pk.pytorch_index == "https://example.org/whl"
    assert sorted(inputs) == ["requirements/base.txt", "requirements/pins.txt", "requirements/train.txt"]


def test_validate_reports_a_missing_source_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _manifest(tmp_path, {"from": ["pyproject.toml", "requirements/gone.txt"]})
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "gone.txt" in t)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"repro.toml:{line}: packages.from[1]: source 'requirements/gone.txt' does not exist" in err
    assert "Traceback" not in err


def test_validate_reports_an_error_inside_a_source_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "requirements.txt").write_text("app\n-e git+https://example.org/x.git#egg=x\n")
    path = _manifest(tmp_path, {"from": ["requirements.txt"]})
    assert main(["validate", str(path)]) == 2
    assert "requirements.txt:2" in capsys.readouterr().err


def test_validate_warns_when_no_platform_has_a_pinned_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "requirements.txt").write_text("torch==2.3.0+cu121\n")
    path = _manifest(tmp_path, {"from": ["requirements.txt"]})
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warning: requirements.txt:1: torch==2.3.0+cu121" in err and "backend = 'cu121'" in err


def test_editing_pyproject_makes_lock_check_fail_naming_it(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    index_factory.add_wheel("redis", "5.0")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "1"\ndependencies = ["app"]\n')
    path = _manifest(proj, {"from": ["pyproject.toml"]}, url=served_index.url())
    assert main(["lock", str(path), "-q"]) == 0
    text = (proj / requirements_filename("linux")).read_text()
    assert pins(text) == {"app": "1.0", "dep": "1.0"}
    assert "# input-pins-sha256: pyproject.toml " in text  # its pin parts (kernodeck.lock.inputs)
    assert main(["lock", str(path), "--check"]) == 0
    capsys.readouterr()

    (proj / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "1"\ndependencies = ["app", "redis"]\n'
    )
    assert main(["lock", str(path), "--check"]) == 1
    out = capsys.readouterr()
    assert (
        "-# input-pins-sha256: pyproject.toml" in out.out
        and "+# input-pins-sha256: pyproject.toml" in out.out
    )
    assert "+redis==5.0" in out.out
    said = out.out + out.err
    assert "pyproject.toml changed since the file was written" in said  # the file, not "the lock inputs"
    assert "the lock inputs changed" not in said
    # verify says the same in its lock-current step (the packages layer, any environment)
    assert main(["verify", str(path), "--only", "packages", "--json", str(tmp_path / "v.json")]) in (0, 1)
    steps = json.loads((tmp_path / "v.json").read_text())["steps"]
    stale = next(s for s in steps if s["name"] == "lock-current")
    assert (
        stale["error"]
        == f"pyproject.toml changed since the file was written ({requirements_filename('linux')})"
    )
    capsys.readouterr()
    assert main(["lock", str(path), "-q"]) == 0
    assert pins((proj / requirements_filename("linux")).read_text()) == {
        "app": "1.0",
        "dep": "1.0",
        "redis": "5.0",
    }


def _via(text: str) -> dict[str, list[str]]:
    """pin -> its `# via` entries, as a lock file writes them."""
    out: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line and not line.startswith((" ", "#", "-")):
            name = line.split("==")[0]
            out[name] = []
        elif line.startswith("    # via ") and name:
            out[name].append(line.removeprefix("    # via "))
        elif line.startswith("    #   ") and name:
            out[name].append(line.removeprefix("    #   "))
    return out


def test_lock_files_say_which_source_requires_each_project(
    tmp_path: Path, index_factory: IndexFactory, served_index: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As pip-compile and uv: `# via -r requirements/base.txt` (the file that holds the line, an
    included one too), `trainer (pyproject.toml)`, and `-r repro.toml` for the manifest's own."""
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    for name, requires in (("app", ["dep>=1"]), ("dep", []), ("tool", []), ("extra-tool", []), ("both", [])):
        index_factory.add_wheel(name, "1.0", requires=requires)
    proj = tmp_path / "proj"
    (proj / "requirements").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "trainer"\nversion = "1"\ndependencies = ["app", "both"]\n'
    )
    (proj / "requirements" / "base.txt").write_text("tool\nboth>=1\n")
    (proj / "requirements" / "train.txt").write_text("-r base.txt\ndep\n")
    path = _manifest(
        proj,
        {"from": ["pyproject.toml", "requirements/train.txt"], "requirements": ["extra-tool", "both"]},
        url=served_index.url(),
    )
    assert main(["lock", str(path), "-q", "--format", "pylock"]) == 0
    text = (proj / requirements_filename("linux")).read_text()
    assert _via(text) == {
        "app": ["trainer (pyproject.toml)"],
        "both": ["-r repro.toml", "trainer (pyproject.toml)", "-r requirements/base.txt"],
        "dep": ["-r requirements/train.txt", "app"],
        "extra-tool": ["-r repro.toml"],
        "tool": ["-r requirements/base.txt"],
    }
    pylock = tomlkit.parse((proj / "pylock.linux.toml").read_text())
    dep = next(p for p in pylock["packages"] if p["name"] == "dep")
    assert list(dep["tool"]["kernodeck"]["via"]) == ["-r requirements/train.txt", "app"]
    # a manifest without `from` names itself, as before
    plain = _manifest(tmp_path / "plain", {"requirements": ["app"]}, url=served_index.url())
    assert main(["lock", str(plain), "-q"]) == 0
    assert _via((plain.parent / requirements_filename("linux")).read_text()) == {
        "app": ["-r repro.toml"],
        "dep": ["app"],
    }
