"""`kernodeck init` in a Pipenv project: Pipfile's [packages] copied as requirements, its Python
taken for [python], Pipfile.lock's pins preferred by a first lock (formats.pipfile, adopt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from kernodeck.cli import main
from kernodeck.formats.pipfile import read_pipfile
from kernodeck.manifest import load_manifest
from kernodeck.manifest.adopt import project_lock

_PIPFILE = """\
[[source]]
name = "pypi"
url = "https://pypi.example.invalid/simple"
verify_ssl = true

[[source]]
name = "pytorch"
url = "https://download.pytorch.org/whl/cu121"
verify_ssl = true

[packages]
numpy = "*"
requests = {version = "==2.31.0", extras = ["socks"]}
pywin32 = {version = "*", sys_platform = "== 'win32'"}
uvloop = {version = ">=0.17", markers = "sys_platform != 'win32'"}
torch = {version = "==2.1.0", index = "pytorch"}
mylib = {git = "https://example.invalid/mylib.git", ref = "v1"}
local = {path = "./local", editable = true}

[dev-packages]
pytest = "*"
black = "*"

[requires]
python_version = "3.9"
"""

_LOCK = {
    "_meta": {"requires": {"python_version": "3.9"}},
    "default": {
        "numpy": {"hashes": ["sha256:" + "a" * 64], "index": "pypi", "version": "==1.26.4"},
        "requests": {"version": "==2.31.0", "extras": ["socks"]},
        "mylib": {"git": "https://example.invalid/mylib.git", "ref": "abc"},
    },
    "develop": {"pytest": {"version": "==8.0.0"}},
}


def test_read_pipfile(tmp_path: Path) -> None:
    (tmp_path / "Pipfile").write_text(_PIPFILE, encoding="utf-8")
    deps = read_pipfile(tmp_path / "Pipfile")
    assert deps.requirements == [
        "numpy",
        "requests[socks]==2.31.0",
        "pywin32; sys_platform == 'win32'",
        "uvloop>=0.17; sys_platform != 'win32'",
        "torch==2.1.0",
    ]
    assert deps.python == "3.9"
    notes = "\n".join(deps.notes)
    assert (
        "torch: from Pipfile source 'pytorch' (https://download.pytorch.org/whl/cu121): set backend = \"cu121\""
        in notes
    )
    assert "mylib: a Pipfile git dependency (https://example.invalid/mylib.git), which a lock" in notes
    assert "local: a Pipfile path dependency (./local), which a lock" in notes
    assert [where for where, _ in deps.unreadable] == ["packages.mylib", "packages.local"]
    # the other package categories, which [packages] groups select
    assert list(deps.categories) == ["dev-packages"]
    assert deps.categories["dev-packages"].requirements == ["pytest", "black"] and deps.dev == [
        "pytest",
        "black",
    ]


def test_init_in_a_pipenv_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Pipfile").write_text(_PIPFILE, encoding="utf-8")
    (tmp_path / "Pipfile.lock").write_text(json.dumps(_LOCK), encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    assert "note:" not in capsys.readouterr().err  # not "found no dependency list"
    m = load_manifest(tmp_path / "repro.toml")
    assert m.python.version == "3.9" and m.packages.from_ == []
    assert m.packages.requirements[:2] == ["numpy", "requests[socks]==2.31.0"]
    text = (tmp_path / "repro.toml").read_text(encoding="utf-8")
    assert "version = \"3.9\" # Pipfile [requires] python_version = '3.9'" in text
    assert "copied from Pipfile [packages], Pipenv's own format" in text
    assert "Pipfile.lock found: a platform's first `kernodeck lock` keeps its 3 pins" in text
    found = project_lock(tmp_path)
    assert found is not None and found.file == "Pipfile.lock"
    assert found.pins == {
        "numpy": Version("1.26.4"),
        "pytest": Version("8.0.0"),
        "requests": Version("2.31.0"),
    }


def test_a_requirements_file_wins_and_the_pipfile_is_named(tmp_path: Path) -> None:
    (tmp_path / "Pipfile").write_text(_PIPFILE, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("rich\n", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    m = load_manifest(tmp_path / "repro.toml")
    assert m.packages.from_ == ["requirements.txt"] and m.packages.requirements == []
    assert "also found Pipfile (Pipenv's, which `from` cannot read): not used" in (
        tmp_path / "repro.toml"
    ).read_text(encoding="utf-8")


def test_a_broken_pipfile_is_named_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "Pipfile").write_text("[packages]\nnumpy = \n", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    text = (tmp_path / "repro.toml").read_text(encoding="utf-8")
    assert "not used: Pipfile:2" in text


def test_a_broken_pipfile_lock_is_no_preference(tmp_path: Path) -> None:
    (tmp_path / "Pipfile.lock").write_text("{not json", encoding="utf-8")
    found = project_lock(tmp_path)
    assert found is not None and found.pins == {} and found.note is not None
    assert "Pipfile.lock is not valid JSON" in found.note


def test_lock_reads_a_pipfile_through_from_and_goes_stale_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Pipfile whose every entry is a requirement: init names it in `from`, the lock reads its
    [packages], `pipenv install delta` (an edit) makes `lock --check` fail, and a git entry is a
    located error at lock time."""
    from kernodeck.errors import KernodeckError
    from kernodeck.lock.orchestrate import lock_manifest
    from tests.fixtures.index_factory import IndexFactory

    factory = IndexFactory(tmp_path / "index")
    for name in ("alpha", "beta", "delta"):
        factory.add_wheel(name, "1.0")
    proj = tmp_path / "proj"
    proj.mkdir()
    pipfile = '[packages]\nalpha = "*"\nbeta = {version = "==1.0"}\n\n[dev-packages]\npytest = "*"\n'
    (proj / "Pipfile").write_text(pipfile)
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    with factory.serve() as server:
        assert main(["init", str(proj)]) == 0
        text = (proj / "repro.toml").read_text()
        assert 'from = ["Pipfile"]' in text
        assert "# groups = []   # Pipfile package categories: dev-packages" in text
        text = text.replace(
            "[packages]\n",
            f'[packages]\nindex = [{{name = "local", url = "{server.url()}", default = true}}]\n',
        )
        text = "\n".join(line for line in text.splitlines() if not line.startswith("backend ="))
        (proj / "repro.toml").write_text(text + "\n")
        assert lock_manifest(proj / "repro.toml").ok
        lock_text = next(proj.glob("requirements-rebuild-*.txt")).read_text()
        assert (
            "alpha==1.0" in lock_text and "beta==1.0" in lock_text and "# input-sha256: Pipfile" in lock_text
        )
        (proj / "Pipfile").write_text(pipfile.replace('alpha = "*"\n', 'alpha = "*"\ndelta = "*"\n'))
        assert not lock_manifest(proj / "repro.toml", check=True).ok
        (proj / "Pipfile").write_text(
            pipfile.replace('alpha = "*"\n', 'alpha = "*"\nmylib = {git = "https://example.invalid/m.git"}\n')
        )
        with pytest.raises(KernodeckError) as e:
            lock_manifest(proj / "repro.toml")
        rendered = e.value.render()
        assert "packages.mylib" in rendered and "a Pipfile git dependency" in rendered


def test_groups_lock_a_pipfile_s_package_categories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`groups` select a Pipfile's [dev-packages] (`pipenv install --dev`) or another category
    (`pipenv install --categories docs`) by table name, as a pyproject.toml's dependency groups;
    an unknown one is a located error naming those the Pipfile has, and a git entry in a category
    matters only once selected."""
    from kernodeck.errors import KernodeckError
    from kernodeck.lock.orchestrate import lock_manifest
    from tests.fixtures.index_factory import IndexFactory

    factory = IndexFactory(tmp_path / "index")
    for name in ("alpha", "pytest", "sphinx"):
        factory.add_wheel(name, "1.0")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "Pipfile").write_text(
        '[packages]\nalpha = "*"\n\n[dev-packages]\npytest = "*"\n\n[docs]\nsphinx = "==1.0"\n'
        'tool = {git = "https://example.invalid/tool.git"}\n'
    )
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    with factory.serve() as server:
        head = (
            'schema-version = 1\n[reference]\nname = "p"\nid = "1"\n[python]\nversion = "3.11"\n'
            f'[packages]\nfrom = ["Pipfile"]\nindex = [{{name = "local", url = "{server.url()}", default = true}}]\n'
        )
        tail = '[[platform]]\nname = "linux"\nos = "linux"\narch = "x86_64"\n'
        manifest = proj / "repro.toml"
        manifest.write_text(head + 'groups = ["dev-packages"]\n' + tail)
        assert lock_manifest(manifest).ok
        lock_text = (proj / "requirements-rebuild-linux.txt").read_text()
        assert "alpha==1.0" in lock_text and "pytest==1.0" in lock_text and "sphinx" not in lock_text
        manifest.write_text(head + 'groups = ["test"]\n' + tail)
        with pytest.raises(KernodeckError) as e:
            lock_manifest(manifest)
        said = e.value.render()
        assert "no package category 'test'" in said and "the Pipfile has: [dev-packages], [docs]" in said
        manifest.write_text(head + 'groups = ["docs"]\n' + tail)
        with pytest.raises(KernodeckError) as e:
            lock_manifest(manifest)
        assert "docs.tool" in e.value.render() and "a Pipfile git dependency" in e.value.render()


def test_groups_need_a_pyproject_or_a_pipfile_in_from(tmp_path: Path) -> None:
    from kernodeck.errors import ManifestError

    (tmp_path / "requirements.txt").write_text("alpha\n")
    (tmp_path / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "p"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[packages]\nfrom = ["requirements.txt"]\ngroups = ["dev-packages"]\n'
        '[[platform]]\nname = "linux"\nos = "linux"\narch = "x86_64"\n'
    )
    with pytest.raises(ManifestError) as e:
        load_manifest(tmp_path / "repro.toml")
    assert "groups apply to a pyproject.toml (its dependency groups) or a Pipfile" in e.value.render()
