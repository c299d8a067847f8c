"""kernodeck.reqfile: requirement files read the way pip reads them (checked against pip itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernodeck.errors import ManifestError
from kernodeck.reqfile import parse_requirements_file
from tests.fixtures.index_factory import IndexFactory

pytest_plugins = ["tests.fixtures.index_fixtures"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path, **kw: Any) -> str:
    with pytest.raises(ManifestError) as e:
        parse_requirements_file(path, **kw)
    return e.value.render()


def _project(tmp: Path) -> Path:
    proj = tmp / "proj"
    _write(
        proj / "pyproject.toml",
        """[project]
name = "myproj"
version = "0.1"
dependencies = ["alpha>=1", "beta; python_version >= '3.8'"]

[project.optional-dependencies]
train = ["gamma==1.0", "myproj[viz]"]
viz = ["delta"]
""",
    )
    return proj


def test_nested_includes_continuations_markers_and_constraints(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    _write(proj / "requirements" / "base.txt", "numpy>=1.26  # the base\n-r extra/more.txt\n")
    _write(proj / "requirements" / "extra" / "more.txt", "tqdm\n")
    _write(proj / "requirements" / "constraints.txt", "numpy<3\n--constraint pins.txt\n")
    _write(proj / "requirements" / "pins.txt", "tqdm==4.66.0\n")
    top = _write(
        proj / "requirements" / "train.txt",
        "# training\n"
        "--requirement=base.txt\n"
        "-c constraints.txt\n"
        "rich>=13 \\\n"
        "   ; python_version >= '3.8'\n"
        "\n"
        "pywin32 ; sys_platform == 'win32'  # only there\n"
        "-i https://example.org/simple\n"
        "--extra-index-url https://${IX_USER}:${IX_TOKEN}@example.org/private/simple\n"
        "--pre\n",
    )
    parsed = parse_requirements_file(top, project_root=proj, display_root=proj)
    assert [(r.requirement, str(r.origin)) for r in parsed.requirements] == [
        ("numpy>=1.26", "requirements/base.txt:1"),
        ("tqdm", "requirements/extra/more.txt:1"),
        ('rich>=13; python_version >= "3.8"', "requirements/train.txt:4"),
        ('pywin32; sys_platform == "win32"', "requirements/train.txt:7"),
    ]
    assert [(c.requirement, str(c.origin)) for c in parsed.constraints] == [
        ("numpy<3", "requirements/constraints.txt:1"),
        ("tqdm==4.66.0", "requirements/pins.txt:1"),
    ]
    assert [(i.kind, i.url) for i in parsed.indexes] == [
        ("index-url", "https://example.org/simple"),
        ("extra-index-url", "https://${IX_USER}:${IX_TOKEN}@example.org/private/simple"),
    ]
    assert parsed.prereleases is True
    assert sorted(parsed.files) == [
        "requirements/base.txt",
        "requirements/constraints.txt",
        "requirements/extra/more.txt",
        "requirements/pins.txt",
        "requirements/train.txt",
    ]
    assert all(len(d) == 64 for d in parsed.files.values())


def test_literal_credential_is_an_error_at_its_line_without_the_secret(tmp_path: Path) -> None:
    f = _write(tmp_path / "r.txt", "numpy\n\n--extra-index-url https://bob:s3cr3t-t0ken@example.org/simple\n")
    msg = _error(f)
    assert "r.txt:3" in msg
    assert "s3cr3t-t0ken" not in msg
    assert "${" in msg  # the hint shows the placeholder form


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("git+https://example.org/team/tool.git@v1#egg=tool", "VCS"),
        ("tool @ git+https://example.org/team/tool.git", "VCS"),
        ("tool @ https://example.org/tool-1.0-py3-none-any.whl", "direct URL"),
        ("https://example.org/tool-1.0-py3-none-any.whl", "URL"),
        ("--no-binary :all:", "--no-binary"),
        ("--no-index", "--no-index"),
        ("--trusted-host example.org", "--trusted-host"),
        ("--some-future-option", "--some-future-option"),
        ("-e ../elsewhere", "another project"),
        ("numpy (>=", "invalid requirement"),
    ],
)
def test_what_a_lock_cannot_honour_is_an_error_naming_file_and_line(
    tmp_path: Path, line: str, needle: str
) -> None:
    (tmp_path / "elsewhere").mkdir()
    proj = tmp_path / "proj"
    f = _write(proj / "reqs.txt", f"numpy\n# a comment\n{line}\n")
    msg = _error(f, project_root=proj, display_root=proj)
    assert "reqs.txt:3" in msg
    assert needle in msg


def test_missing_included_file_names_the_including_line(tmp_path: Path) -> None:
    f = _write(tmp_path / "r.txt", "numpy\n-r nothere.txt\n")
    msg = _error(f)
    assert "r.txt:2" in msg
    assert "-r nothere.txt: the file does not exist" in msg


def test_include_cycle_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "b.txt", "-r a.txt\n")
    f = _write(tmp_path / "a.txt", "-r b.txt\n")
    assert "cycle" in _error(f)


def test_editable_project_takes_its_pyproject_dependencies(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    f = _write(proj / "requirements.txt", "-e .[train]\nrich\n")
    parsed = parse_requirements_file(f, project_root=proj)
    assert [r.requirement for r in parsed.requirements] == [
        "alpha>=1",
        'beta; python_version >= "3.8"',
        "gamma==1.0",
        "delta",
        "rich",
    ]
    assert all(str(r.origin) == "requirements.txt:1" for r in parsed.requirements[:4])
    assert parsed.project_included
    assert "pyproject.toml" in parsed.files  # editing pyproject changes the lock inputs
    # a plain path to the project itself reads the same
    g = _write(proj / "plain.txt", "./\n")
    assert [r.requirement for r in parse_requirements_file(g, project_root=proj).requirements][:2] == [
        "alpha>=1",
        'beta; python_version >= "3.8"',
    ]


def test_editable_project_with_dynamic_dependencies_is_an_error(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    _write(proj / "pyproject.toml", '[project]\nname = "x"\nversion = "1"\ndynamic = ["dependencies"]\n')
    f = _write(proj / "requirements.txt", "-e .\n")
    msg = _error(f, project_root=proj)
    assert "dynamic" in msg and "pyproject.toml" in msg
    assert "requirements.txt:1" in msg  # located at the line that asked for the project


@pytest.mark.parametrize(
    ("files", "said"),
    [
        (
            {"setup.py": "from setuptools import setup\nsetup(name='x')\n"},
            "are in setup.py, which Kernodeck does not run",
        ),
        (
            {"setup.py": "from setuptools import setup\nsetup()\n", "setup.cfg": "[metadata]\nname = x\n"},
            "are in setup.py / setup.cfg, which Kernodeck does not run",
        ),
        ({"pyproject.toml": '[tool.poetry]\nname = "x"\n'}, "no [project] table"),
        ({}, "pyproject.toml does not exist"),
    ],
)
def test_editable_project_whose_dependencies_cannot_be_read_is_located_at_its_line(
    tmp_path: Path, files: dict[str, str], said: str
) -> None:
    proj = tmp_path / "proj"
    for name, text in files.items():
        _write(proj / name, text)
    f = _write(proj / "requirements" / "train.txt", "tqdm\n-e .[train]\n")
    msg = _error(f, project_root=proj)
    first = msg.splitlines()[0]
    assert first.startswith("requirements/train.txt:2") or "train.txt:2" in first, msg
    assert "-e .[train]: " in msg and said in msg
    assert "[project] dependencies in pyproject.toml" in msg  # what to do instead


def test_local_label_becomes_a_backend_hint(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "r.txt",
        "torch==2.3.0+cu121\ntorchvision==0.18.0+cu121\nmylib==1.0+local7\n",
    )
    parsed = parse_requirements_file(f)
    assert [r.requirement for r in parsed.requirements] == [
        "torch==2.3.0",
        "torchvision==0.18.0",
        "mylib==1.0+local7",  # not a PyTorch label: kept exactly as written
    ]
    assert [(b.project, b.version, b.backend, str(b.origin)) for b in parsed.backends] == [
        ("torch", "2.3.0", "cu121", "r.txt:1"),
        ("torchvision", "0.18.0", "cu121", "r.txt:2"),
    ]
    g = _write(tmp_path / "rocm.txt", "torch==2.5.1+rocm6.2\n")
    assert [b.backend for b in parse_requirements_file(g).backends] == ["rocm6.2"]
    h = _write(tmp_path / "cpu.txt", "torch==2.5.1+cpu\n")
    assert [b.backend for b in parse_requirements_file(h).backends] == ["cpu"]


def _pip_report(tmp: Path, args: list[str], name: str) -> dict[str, str]:
    report = tmp / f"{name}.json"
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--isolated",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in doc["install"]}


def test_parsed_set_resolves_like_pip_reading_the_file(tmp_path: Path, index_factory: IndexFactory) -> None:
    f = index_factory
    f.add_wheel("alpha", "1.0")
    f.add_wheel("alpha", "2.0", requires=["beta>=1"])
    f.add_wheel("beta", "1.0")
    f.add_wheel("beta", "2.0")
    f.add_wheel("gamma", "1.0")
    f.add_wheel("gamma", "3.0")
    f.add_wheel("winonly", "1.0")
    f.add_wheel("delta", "1.0", index="extra")
    f.add_wheel("delta", "2.0", index="extra")
    with f.serve() as srv:
        proj = tmp_path / "proj"
        _write(proj / "req" / "base.txt", "alpha>=1.0\n-r sub/more.txt\n")
        _write(proj / "req" / "sub" / "more.txt", "gamma  # nested, relative to base.txt\n")
        _write(proj / "req" / "pins.txt", "beta<2\n-r sub/pins2.txt\n")
        _write(proj / "req" / "sub" / "pins2.txt", "gamma<3\n")
        top = _write(
            proj / "req" / "train.txt",
            "-r base.txt\n"
            "-c pins.txt\n"
            f"--extra-index-url {srv.url('extra')}\n"
            "delta \\\n"
            "  <2 ; python_version >= '3.0'\n"
            "# a comment line ending in a backslash does not continue \\\n"
            "winonly ; sys_platform == 'win32'\n",
        )
        parsed = parse_requirements_file(top, project_root=proj, display_root=proj)
        # as pip: a -r inside a -c file names requirements (gamma<3), not constraints
        assert sorted(r.requirement for r in parsed.requirements) == [
            "alpha>=1.0",
            'delta<2; python_version >= "3.0"',
            "gamma",
            "gamma<3",
            'winonly; sys_platform == "win32"',
        ]
        assert [c.requirement for c in parsed.constraints] == ["beta<2"]

        flat = _write(tmp_path / "flat" / "reqs.txt", "\n".join(r.requirement for r in parsed.requirements))
        cons = _write(tmp_path / "flat" / "cons.txt", "\n".join(c.requirement for c in parsed.constraints))
        extra = [a for i in parsed.indexes for a in ("--extra-index-url", i.url)]
        base = ["--index-url", srv.url()]
        from_pip = _pip_report(tmp_path, [*base, "-r", str(top)], "pip")
        from_parse = _pip_report(tmp_path, [*base, *extra, "-r", str(flat), "-c", str(cons)], "parsed")
    assert from_pip == {"alpha": "2.0", "beta": "1.0", "gamma": "1.0", "delta": "1.0"}
    assert from_parse == from_pip


_BACKEND = """
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _metadata():
    with open(os.path.join(_HERE, "METADATA"), encoding="utf-8") as f:
        return f.read()


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    info = "myproj-0.1.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return info


prepare_metadata_for_build_wheel = prepare_metadata_for_build_editable


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    raise NotImplementedError("a dry run builds nothing")


build_wheel = build_editable
"""


def test_editable_project_resolves_like_pip_installing_it(
    tmp_path: Path, index_factory: IndexFactory
) -> None:
    f = index_factory
    f.add_wheel("alpha", "1.0")
    f.add_wheel("alpha", "2.0")
    f.add_wheel("gamma", "1.0", requires=["alpha"])
    f.add_wheel("delta", "1.0")
    f.add_wheel("rich", "13.0")
    proj = _project(tmp_path)
    # the same dependencies as pyproject.toml, as the in-tree build backend reports them to pip
    _write(proj / "_backend" / "backend.py", _BACKEND)
    _write(
        proj / "_backend" / "METADATA",
        "Metadata-Version: 2.1\nName: myproj\nVersion: 0.1\n"
        "Requires-Dist: alpha>=1\nRequires-Dist: beta; python_version < '3'\n"
        "Provides-Extra: train\nRequires-Dist: gamma==1.0; extra == 'train'\n"
        "Requires-Dist: delta; extra == 'train'\n",
    )
    pyproject = proj / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("beta; python_version >= '3.8'", "beta; python_version < '3'")
        + '\n[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["_backend"]\n'
    )
    top = _write(proj / "requirements.txt", "-e .[train]\nrich\n")
    with f.serve() as srv:
        parsed = parse_requirements_file(top, project_root=proj)
        assert parsed.project_included
        flat = _write(tmp_path / "flat" / "reqs.txt", "\n".join(r.requirement for r in parsed.requirements))
        base = ["--index-url", srv.url()]
        from_pip = _pip_report(proj, [*base, "-r", str(top)], "pip")
        from_parse = _pip_report(tmp_path, [*base, "-r", str(flat)], "parsed")
    assert from_pip.pop("myproj") == "0.1"  # pip installs the project; a lock takes its dependencies
    assert from_pip == {"alpha": "2.0", "gamma": "1.0", "delta": "1.0", "rich": "13.0"}
    assert from_parse == from_pip


def test_find_links_folder_is_found_beside_the_file_first(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "req" / "wheels").mkdir(parents=True)
    (proj / "vendor").mkdir()
    f = _write(proj / "req" / "r.txt", "--find-links wheels\n-f vendor\n")
    parsed = parse_requirements_file(f, project_root=proj)
    assert [(i.kind, i.url) for i in parsed.indexes] == [
        ("find-links", (proj / "req" / "wheels").resolve().as_uri()),
        ("find-links", (proj / "vendor").resolve().as_uri()),
    ]
