"""`kernodeck init` in a Poetry project: `[tool.poetry.dependencies]` copied as PEP 508 requirements,
what cannot be copied named (formats.poetrydeps)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from kernodeck.cli import main
from kernodeck.errors import KernodeckError
from kernodeck.formats.poetrydeps import poetry_specifier, read_poetry
from kernodeck.manifest import load_manifest
from kernodeck.support.tomltext import parse_toml


@pytest.mark.parametrize(
    ("poetry", "pep440"),
    [
        ("^1.2.3", ">=1.2.3,<2.0.0"),
        ("^1.2", ">=1.2,<2.0"),
        ("^1", ">=1,<2"),
        ("^0.2.3", ">=0.2.3,<0.3.0"),
        ("^0.0.3", ">=0.0.3,<0.0.4"),
        ("^0.0", ">=0.0,<0.1"),
        ("^0", ">=0,<1"),
        ("~1.2.3", ">=1.2.3,<1.3.0"),
        ("~1.2", ">=1.2,<1.3"),
        ("~1", ">=1,<2"),
        ("~=1.2", "~=1.2"),
        ("1.2.3", "==1.2.3"),
        ("=1.2.3", "==1.2.3"),
        ("1.2.*", "==1.2.*"),
        ("*", ""),
        (">=1.2,<2", ">=1.2,<2"),
        (">= 1.2 < 2.0", ">=1.2,<2.0"),
        ("^2.0.0rc1", ">=2.0.0rc1,<3.0.0"),
    ],
)
def test_poetry_constraints_as_pep440(poetry: str, pep440: str) -> None:
    assert poetry_specifier(poetry) == pep440
    SpecifierSet(pep440)  # valid


@pytest.mark.parametrize("bad", ["^1.0 || ^2.0", "latest", "^1.*", ">=1.2,,"])
def test_what_pep440_cannot_say_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        poetry_specifier(bad)


_PYPROJECT = """\
[tool.poetry]
name = "mlproj"
version = "0.1.0"

[tool.poetry.dependencies]
python = ">=3.12,<3.13"
numpy = "^1.26"
requests = { version = "~2.31", extras = ["socks"] }
pywin32 = { version = "306", platform = "win32" }
tomli = { version = "^2.0", python = "<3.11" }
scipy = [
    { version = "<1.11", python = "<3.9" },
    { version = "^1.11", python = ">=3.9" },
]
uvloop = { version = "*", markers = "sys_platform != 'win32'" }
pandas = { version = "^2.1", optional = true }
torch = { version = "2.2.0", source = "pytorch-cpu" }
internal = { version = "1.0", source = "corp" }
mylib = { git = "https://example.invalid/mylib.git", tag = "v1" }
local = { path = "../local", develop = true }
either = "^1.0 || ^2.0"

[tool.poetry.extras]
data = ["pandas"]

[tool.poetry.group.dev.dependencies]
pytest = "^8.0"
ruff = "*"

[tool.poetry.dev-dependencies]
black = "*"

[[tool.poetry.source]]
name = "pytorch-cpu"
url = "https://download.pytorch.org/whl/cpu"
priority = "explicit"

[[tool.poetry.source]]
name = "corp"
url = "https://pypi.corp.invalid/simple"
"""


def test_read_poetry_copies_what_a_requirement_can_say_and_names_the_rest() -> None:
    deps = read_poetry(parse_toml(_PYPROJECT, "pyproject.toml"))
    assert deps is not None
    assert deps.python == ">=3.12,<3.13"
    assert deps.requirements == [
        "numpy>=1.26,<2.0",
        "requests[socks]>=2.31,<2.32",
        'pywin32==306; sys_platform == "win32"',
        'tomli>=2.0,<3.0; python_version < "3.11"',
        'scipy<1.11; python_version < "3.9"',
        'scipy>=1.11,<2.0; python_version >= "3.9"',
        "uvloop; sys_platform != 'win32'",
        "torch==2.2.0",
        "internal==1.0",
    ]
    notes = "\n".join(deps.notes)
    assert "pandas: optional (extras: data): not copied; add 'pandas>=2.1,<3.0' to requirements" in notes
    assert (
        "torch: from Poetry source 'pytorch-cpu' (https://download.pytorch.org/whl/cpu): set backend = \"cpu\""
        in notes
    )
    assert (
        "internal: from Poetry source 'corp' (https://pypi.corp.invalid/simple): declare it as a [[packages.index]]"
        in notes
    )
    assert "mylib: a Poetry git dependency (https://example.invalid/mylib.git), which a lock" in notes
    assert "local: a Poetry path dependency (../local), which a lock" in notes
    assert "either: '^1.0 || ^2.0' has alternatives (||)" in notes
    assert "Poetry group 'dev' (black, pytest, ruff): not copied" in notes


def test_a_pyproject_without_poetry_dependencies_is_not_poetry() -> None:
    assert read_poetry({"tool": {"poetry": {"name": "x"}}}) is None
    assert read_poetry({"project": {"name": "x"}}) is None


def test_init_in_a_poetry_project_writes_a_manifest_that_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text(_PYPROJECT, encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    assert "note:" not in capsys.readouterr().err  # not "lists its dependencies in Poetry's format"
    m = load_manifest(tmp_path / "repro.toml")
    assert m.packages.from_ == []
    assert m.packages.requirements[:2] == ["numpy>=1.26,<2.0", "requests[socks]>=2.31,<2.32"]
    text = (tmp_path / "repro.toml").read_text(encoding="utf-8")
    # the Python comes from the project's range when this one is outside it
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    expected = running if running == "3.12" else "3.12"
    assert m.python.version == expected
    if running != "3.12":
        assert (
            "version = \"3.12\" # pyproject.toml [tool.poetry.dependencies] python = '>=3.12,<3.13'" in text
        )
    assert "copied from pyproject.toml [tool.poetry.dependencies], Poetry's own format" in text
    assert "# mylib: a Poetry git dependency" in text


def test_a_poetry_project_that_allows_this_python_keeps_it(tmp_path: Path) -> None:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.poetry]\nname = "a"\nversion = "1"\n[tool.poetry.dependencies]\npython = "^{running}"\nrich = "^13"\n',
        encoding="utf-8",
    )
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.python.version == running
    # every entry a requirement can say: `from` reads them at lock time, nothing is copied
    assert m.packages.from_ == ["pyproject.toml"] and m.packages.requirements == []


def test_lock_reads_poetry_dependencies_through_from_and_goes_stale_when_they_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`from = ["pyproject.toml"]` of a Poetry project: its [tool.poetry.dependencies] are read at
    lock time, Poetry extras and groups selected by [packages] extras and groups, and a `poetry
    add` (an edit of the table) makes `lock --check` fail naming pyproject.toml."""
    from kernodeck.lock.orchestrate import lock_manifest
    from tests.fixtures.index_factory import IndexFactory

    factory = IndexFactory(tmp_path / "index")
    for name in ("alpha", "beta", "gamma", "delta"):
        factory.add_wheel(name, "1.0")
        factory.add_wheel(name, "2.0")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "app"\nversion = "1"\n\n[tool.poetry.dependencies]\npython = ">=3.8"\n'
        'alpha = "^1.0"\nbeta = { version = "^2.0", optional = true }\n\n[tool.poetry.extras]\nfast = ["beta"]\n\n'
        '[tool.poetry.group.dev.dependencies]\ngamma = "~1.0"\n\n'
        '[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n'
    )
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    with factory.serve() as server:
        assert main(["init", str(proj)]) == 0
        text = (proj / "repro.toml").read_text()
        assert 'from = ["pyproject.toml"]' in text
        assert "extras = []   # Poetry extras: fast" in text and "groups = []   # Poetry groups: dev" in text
        text = text.replace(
            "[packages]\n",
            f'[packages]\nextras = ["fast"]\ngroups = ["dev"]\nindex = [{{name = "local", url = "{server.url()}", default = true}}]\n',
        )
        text = "\n".join(line for line in text.splitlines() if not line.startswith("backend ="))
        (proj / "repro.toml").write_text(text + "\n")
        result = lock_manifest(proj / "repro.toml")
        assert result.ok
        lock_text = next(proj.glob("requirements-rebuild-*.txt")).read_text()
        assert "alpha==1.0" in lock_text and "beta==2.0" in lock_text and "gamma==1.0" in lock_text
        assert "delta" not in lock_text
        # `poetry add delta`: the table changes, the lock is stale and says which file changed
        pyproject = (proj / "pyproject.toml").read_text()
        (proj / "pyproject.toml").write_text(
            pyproject.replace('alpha = "^1.0"\n', 'alpha = "^1.0"\ndelta = "*"\n')
        )
        check = lock_manifest(proj / "repro.toml", check=True)
        assert not check.ok
        # a git dependency cannot be locked from an index: a located error, not a silent drop
        (proj / "pyproject.toml").write_text(
            pyproject.replace(
                'alpha = "^1.0"\n', 'alpha = "^1.0"\nmylib = { git = "https://example.invalid/m.git" }\n'
            )
        )
        with pytest.raises(KernodeckError) as e:
            lock_manifest(proj / "repro.toml")
        assert "tool.poetry.dependencies.mylib" in str(e.value.render())
        assert "a Poetry git dependency" in str(e.value.render())
