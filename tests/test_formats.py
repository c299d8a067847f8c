"""Foreign files (kernodeck.formats): one module per format behind one interface; a file nested deeper
than the limit is a located error with exit 2 (issue #42: `init` on a deeply nested uv.lock was an
internal RecursionError), a syntax error a value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck import formats
from kernodeck.cli import cli
from kernodeck.errors import ManifestError
from kernodeck.formats import Unreadable, parse_text, pipfilelock, poetrylock, pylock, uvlock
from kernodeck.support.tomltext import MAX_DEPTH

DEEP = 5_000  # past the interpreter's recursion limit


def _deep_uv_lock() -> str:
    return 'version = 1\n\n[[package]]\nname = "a"\nversion = "1.0"\nx = ' + "[" * DEEP + "]" * DEEP + "\n"


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("uv.lock", _deep_uv_lock(), 6),
        ("poetry.lock", "[[package]]\nname = 'a'\nversion = '1'\nx = " + "{a=" * DEEP + "1" + "}" * DEEP, 4),
        ("Pipfile.lock", '{"default": ' + "[" * DEEP + "]" * DEEP + "}", 1),
    ],
)
def test_init_on_a_deeply_nested_lock_is_a_located_error(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    (tmp_path / name).write_text(text)
    (tmp_path / "main.py").write_text("print(1)\n")
    res = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert f"{name}:{line}: nested more than {MAX_DEPTH} levels deep" in res.stderr
    assert "Traceback" not in res.output and "internal error" not in res.output
    assert not (tmp_path / "repro.toml").exists()  # nothing half-written


def test_nesting_up_to_the_limit_parses() -> None:
    text = "x = " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    assert isinstance(parse_text(text, "uv.lock", "toml"), dict)
    with pytest.raises(ManifestError):
        parse_text("x = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "uv.lock", "toml")


def test_a_syntax_error_is_a_value() -> None:
    bad = parse_text("x = [", "poetry.lock", "toml")
    assert isinstance(bad, Unreadable) and bad.reason
    assert isinstance(parse_text("{", "Pipfile.lock", "json"), Unreadable)


def test_every_lock_format_has_one_module_with_the_interface() -> None:
    assert [m.NAME for m in formats.locks()] == ["uv.lock", "pylock.toml", "poetry.lock", "Pipfile.lock"]
    for module in formats.locks():
        assert module.SYNTAX in ("toml", "json")
        assert callable(module.pins) and callable(module.evidence)


def test_pins_of_each_format() -> None:
    uv = {
        "package": [
            {"name": "proj", "version": "0.1", "source": {"editable": "."}},
            {"name": "numpy", "version": "2.0.0", "source": {"registry": "x"}},
        ]
    }
    assert uvlock.pins(uv) == [("numpy", "2.0.0")]
    assert uvlock.pins({"version": 1}) is None
    assert pylock.pins({"packages": [{"name": "a", "version": "1"}, "junk"]}) == [("a", "1")]
    assert poetrylock.pins({"package": [{"name": "b", "version": "2"}]}) == [("b", "2")]
    lock = json.loads(
        '{"default": {"c": {"version": "==3.0"}, "g": {"git": "x"}}, "develop": {"d": {"version": "==4"}}}'
    )
    assert pipfilelock.pins(lock) == [("c", "3.0"), ("d", "4")]


def test_platform_evidence_of_each_format() -> None:
    uv = {"supported-markers": ["sys_platform == 'linux'"], "resolution-markers": ["python_version < '3.12'"]}
    assert uvlock.evidence(uv).key == "supported-markers"
    python_only = uvlock.evidence({"resolution-markers": ["python_version < '3.12'"], "package": []})
    assert python_only.key == "wheel tags" and python_only.markers == []
    wheels = pylock.evidence(
        {"packages": [{"wheels": [{"name": "a-1-cp311-cp311-manylinux_2_28_x86_64.whl"}]}]}
    )
    assert [p.files for p in wheels.packages] == [("a-1-cp311-cp311-manylinux_2_28_x86_64.whl",)]
    poetry = poetrylock.evidence({"package": [{"files": [{"file": "b-1.tar.gz"}]}]})
    assert [p.files for p in poetry.packages] == [("b-1.tar.gz",)]
    assert pipfilelock.evidence({}).packages == []


def test_poetry_lock_edges_extras_and_the_project_as_root() -> None:
    lock = {
        "package": [
            {
                "name": "lightning",
                "version": "2.0.8",
                "files": [{"file": "lightning-2.0.8-py3-none-any.whl"}],
                "dependencies": {
                    "pywin32": {"version": ">=300", "markers": 'sys_platform == "win32"'},
                    "numpy": [{"version": "<2", "markers": 'python_version < "3.12"'}, {"version": ">=2"}],
                    "rich": {"version": "*", "optional": True, "extras": ["jupyter"]},
                },
                "extras": {"ui": ["rich[jupyter] (>=13)"], "bad": [3]},
            },
            {"name": "julius", "version": "0.2.7", "files": [{"file": "julius-0.2.7.tar.gz"}]},
        ]
    }
    pyproject = {
        "tool": {
            "poetry": {
                "dependencies": {
                    "python": "^3.10",
                    "lightning": "^2.0",
                    "mine": {"git": "https://x.invalid/m"},
                },
                "group": {"dev": {"dependencies": {"pylint": "*"}}},
            }
        }
    }
    root, lightning, julius = poetrylock.evidence(lock, pyproject).packages
    assert root.root and [e.name for e in root.edges] == ["lightning", "mine"]  # a git one by name
    assert [e.name for e in root.groups["dev"]] == ["pylint"]
    assert [(e.name, e.marker) for e in lightning.edges] == [
        ("pywin32", 'sys_platform == "win32"'),
        ("numpy", 'python_version < "3.12"'),
        ("numpy", None),
    ]
    assert [(e.name, e.extras) for e in lightning.extras["ui"]] == [("rich", ("jupyter",))]
    assert lightning.extras["bad"] == ()
    assert formats.sdist_only([root, lightning, julius]) == [julius]
    # no pyproject.toml, or one that declares nothing: no root (every package counts by its marker)
    assert not any(p.root for p in poetrylock.evidence(lock).packages)
    assert not any(
        p.root for p in poetrylock.evidence(lock, {"project": {"dynamic": ["dependencies"]}}).packages
    )


def test_init_on_a_setup_py_too_deep_for_the_parser_is_a_located_error(tmp_path: Path) -> None:
    terms = "+".join(["1"] * 200_000)  # deeper than Python's own parser goes (3.10's crashes)
    (tmp_path / "setup.py").write_text(
        f"from setuptools import setup\nx = {terms}\nsetup(install_requires=['a'])\n"
    )
    res = CliRunner().invoke(cli, ["init", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "setup.py:2: an expression nested too deep for Python's parser" in res.stderr
    assert "internal error" not in res.output and not (tmp_path / "repro.toml").exists()


def test_a_setup_py_with_a_long_list_is_read(tmp_path: Path) -> None:
    from kernodeck.formats.setuppy import read_setup

    names = ", ".join(f"'p{i}'" for i in range(20_000))
    (tmp_path / "setup.py").write_text(
        f"from setuptools import setup\nsetup(install_requires=['a'], x=[{names}])\n"
    )
    found = read_setup(tmp_path)
    assert found is not None and found.requirements == ["a"]
