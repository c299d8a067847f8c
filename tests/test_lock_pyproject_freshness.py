"""Freshness of a lock whose requirements come from pyproject.toml (`[packages] from`): only the
parts that can change a pin count (`kernodeck.lock.inputs.PYPROJECT_PIN_PARTS`); a file written
when every byte counted is told apart; `lock --check` says a file is stale or missing from the
lock inputs alone when the index cannot be reached."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory

pytest_plugins = ["tests.fixtures.index_fixtures"]

_MANIFEST = """\
schema-version = 1

[reference]
name = "test"
id = "1"

[python]
version = "3.11"

[packages]
from = ["pyproject.toml"]
extras = ["fast"]
groups = ["dev"]

[[packages.index]]
name = "default"
url = "{url}"
default = true
{more}
[[platform]]
name = "linux"
os = "linux"
arch = "x86_64"
"""

_PYPROJECT = """\
# the project
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "proj"
version = "0.1.0"
description = "a project"
requires-python = ">=3.10"
dependencies = ["app"]

[project.optional-dependencies]
fast = ["dep>=0.5"]

[project.scripts]
proj = "proj:main"

[dependency-groups]
dev = ["dep>=0.5"]

[tool.pytest.ini_options]
addopts = "-q"

[tool.ruff]
line-length = 100

[tool.uv]
constraint-dependencies = ["dep<2"]

[tool.poetry.dependencies]
python = ">=3.10"
"""

# (what, old, new): edits that cannot change a pin
_NO_PIN_CHANGE = [
    ("version bump", 'version = "0.1.0"', 'version = "0.2.0"'),
    ("description", 'description = "a project"', 'description = "another"'),
    ("pytest table", 'addopts = "-q"', 'addopts = "-x"'),
    ("ruff table", "line-length = 100", "line-length = 120"),
    ("comment", "# the project", "# the project, renamed"),
    ("trailing comment", 'dependencies = ["app"]', 'dependencies = ["app"]  # the app'),
    ("scripts", 'proj = "proj:main"', 'proj = "proj:run"'),
    ("build-system", 'requires = ["setuptools>=61"]', 'requires = ["setuptools>=70"]'),
]

# edits that can change a pin, one per counted part
_PIN_CHANGE = [
    ("dependencies", 'dependencies = ["app"]', 'dependencies = ["app", "dep>=1"]'),
    ("optional-dependencies", 'fast = ["dep>=0.5"]', 'fast = ["dep>=1"]'),
    ("dependency-groups", 'dev = ["dep>=0.5"]', 'dev = ["dep>=1"]'),
    ("requires-python", 'requires-python = ">=3.10"', 'requires-python = ">=3.11"'),
    ("uv constraints", 'constraint-dependencies = ["dep<2"]', 'constraint-dependencies = ["dep<1"]'),
    ("uv sources", "[tool.uv]\n", '[tool.uv]\nsources = { dep = { index = "corp" } }\n'),
    (
        "poetry dependencies",
        '[tool.poetry.dependencies]\npython = ">=3.10"',
        '[tool.poetry.dependencies]\npython = ">=3.10"\nnumpy = "^2"',
    ),
    ("project name", 'name = "proj"', 'name = "proj2"'),
]


def _project(root: Path, url: str, more: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(_PYPROJECT, encoding="utf-8")
    path = root / "repro.toml"
    path.write_text(_MANIFEST.format(url=url, more=more), encoding="utf-8")
    return path


def _publish(f: IndexFactory) -> None:
    f.add_wheel("app", "1.0", requires=["dep>=0.5"])
    f.add_wheel("dep", "0.5")
    f.add_wheel("dep", "1.0")


def _edit(path: Path, old: str, new: str) -> str:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return text


@pytest.fixture
def locked(index_factory: IndexFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    _publish(index_factory)
    with index_factory.serve() as server:
        path = _project(tmp_path / "proj", server.url())
        assert main(["lock", str(path), "-q"]) == 0
        yield path


def test_only_the_pin_parts_of_pyproject_count(locked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = locked.parent / "pyproject.toml"
    text = (locked.parent / requirements_filename("linux")).read_text(encoding="utf-8")
    assert re.search(r"^# input-pins-sha256: pyproject.toml [0-9a-f]{64}$", text, re.M)
    for what, old, new in _NO_PIN_CHANGE:
        before = _edit(pyproject, old, new)
        capsys.readouterr()
        assert main(["lock", str(locked), "--check"]) == 0, (what, capsys.readouterr().err)
        pyproject.write_text(before, encoding="utf-8")
    for what, old, new in _PIN_CHANGE:
        before = _edit(pyproject, old, new)
        capsys.readouterr()
        assert main(["lock", str(locked), "--check"]) == 1, what
        assert "pyproject.toml changed since the file was written" in capsys.readouterr().err, what
        pyproject.write_text(before, encoding="utf-8")
    assert main(["lock", str(locked), "--check"]) == 0


def test_a_file_written_when_every_byte_counted_is_told_apart(
    locked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an earlier Kernodeck recorded pyproject.toml by its bytes (and a digest made of them)
    linux = locked.parent / requirements_filename("linux")
    raw = hashlib.sha256((locked.parent / "pyproject.toml").read_bytes()).hexdigest()
    text = re.sub(
        r"input-pins-sha256: pyproject.toml [0-9a-f]{64}",
        f"input-sha256: pyproject.toml {raw}",
        linux.read_text(),
    )
    linux.write_text(re.sub(r"lock-inputs-sha256: [0-9a-f]{64}", "lock-inputs-sha256: " + "0" * 64, text))
    capsys.readouterr()
    assert main(["lock", str(locked), "--check"]) == 1
    err = capsys.readouterr().err
    assert "written by an earlier Kernodeck, which counted every byte of pyproject.toml" in err
    assert "pyproject.toml changed" not in err  # it did not
    assert main(["lock", str(locked), "-q"]) == 0
    assert main(["lock", str(locked), "--check"]) == 0


def test_check_with_the_index_down(
    index_factory: IndexFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    _publish(index_factory)
    with index_factory.serve() as server:
        path = _project(tmp_path / "proj", server.url())
        assert main(["lock", str(path), "-q"]) == 0
    # the index is gone (its port closed), nothing is cached, a dependency was added and a
    # platform declared: neither can be re-resolved, both verdicts are known all the same
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cold"))
    _edit(path.parent / "pyproject.toml", 'dependencies = ["app"]', 'dependencies = ["app", "dep>=1"]')
    _edit(
        path,
        "[[platform]]",
        '[[platform]]\nname = "windows"\nos = "windows"\narch = "x86_64"\n\n[[platform]]',
    )
    capsys.readouterr()
    report = tmp_path / "check.json"
    assert main(["lock", str(path), "--check", "--json", str(report)]) == 1
    err = capsys.readouterr().err
    context = json.loads(report.read_text())["error"]["context"]
    assert "no file for declared platform windows (requirements-rebuild-windows.txt)" in context
    assert (
        "requirements-rebuild-linux.txt is stale (inputs changed: pyproject.toml changed since the file was written)"
        in err
    )
    assert "no file for declared platform windows (requirements-rebuild-windows.txt)" in err
    # unchanged inputs, index still down: the failure is said, no stale claim is made
    _edit(path.parent / "pyproject.toml", 'dependencies = ["app", "dep>=1"]', 'dependencies = ["app"]')
    _edit(path, '[[platform]]\nname = "windows"\nos = "windows"\narch = "x86_64"\n\n', "")
    capsys.readouterr()
    assert main(["lock", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "cannot lock platform linux" in err or "error:" in err
    assert "is stale" not in err and "no file for" not in err


def test_verify_counts_the_same_parts_of_pyproject(locked: Path) -> None:
    """verify's lock-current step reads freshness from the same owner: a version bump is no
    change, a dependency edit is, and is named by its file."""
    from kernodeck.layers.context import Context
    from kernodeck.layers.packages import _stale
    from kernodeck.lockfile.read import read_lockfile
    from kernodeck.manifest.load import load_manifest

    platform = load_manifest(locked).get_platform("linux")
    ctx = Context(root=locked.parent, manifest_file=locked, python="python", platform=platform)
    lock = read_lockfile(locked.parent / requirements_filename("linux"))
    pyproject = locked.parent / "pyproject.toml"
    _edit(pyproject, 'version = "0.1.0"', 'version = "0.2.0"')
    assert _stale(lock, ctx) == []
    _edit(pyproject, 'dependencies = ["app"]', 'dependencies = ["app", "dep>=1"]')
    (step,) = _stale(lock, ctx)
    assert step.error == "pyproject.toml changed since the file was written (requirements-rebuild-linux.txt)"
