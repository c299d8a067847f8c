"""`kernodeck init --from-env PYTHON` adopts a working environment: the leaves become the
requirements, every installed version a preference the first lock keeps, the Python version and
torch's backend are the environment's own, and editable / direct-URL installs are reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest import load_manifest
from kernodeck.manifest.fromenv import ENV_PINS, from_facts, read_env_pins
from kernodeck.manifest.init import HostFacts, starter_document
from kernodeck.probe.facts import Facts
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins

pytest_plugins = ["tests.fixtures.index_fixtures"]

UV = Path(sys.executable).with_name("uv")
LINUX = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")


def _uv(args: list[str], tmp: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "UV_CACHE_DIR": str(tmp / "uv-cache"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_CONFIG": "1",
    }
    proc = subprocess.run([str(UV), *args], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr


def test_init_from_a_real_venv_then_the_first_lock_keeps_every_installed_version(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    index_factory.add_wheel("app", "1.0", requires=["dep>=1", "winonly; sys_platform == 'win32'"])
    index_factory.add_wheel("dep", "1.0")
    index_factory.add_wheel("tool", "1.0", requires=["dep"])
    index_factory.add_wheel("solo", "3.0")
    index_factory.add_wheel("pip", "24.0")
    venv = tmp_path / "venv"
    _uv(["venv", "--no-config", "--python", sys.executable, str(venv)], tmp_path)
    python = venv / "bin" / "python"
    _uv(
        [
            *("pip", "install", "--no-config", "--python", str(python), "--index-url", served_index.url()),
            *("app==1.0", "tool==1.0", "solo==3.0", "pip==24.0"),
        ],
        tmp_path,
    )
    # newer versions appear after the environment was built; a fresh lock would take them
    index_factory.add_wheel("app", "1.1", requires=["dep>=1"])
    index_factory.add_wheel("dep", "2.0")
    index_factory.add_wheel("solo", "4.0")
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["init", str(proj), "--from-env", str(python)]) == 0
    out = capsys.readouterr().out
    assert "3 requirements (the leaves of 5 installed)" in out
    m = load_manifest(proj / "repro.toml")
    # the leaves, as `pip list --not-required` (dep is required by app and tool; pip is left out)
    assert m.packages.requirements == ["app", "solo", "tool"]
    assert m.packages.from_ == []
    assert m.python.version == f"{sys.version_info.major}.{sys.version_info.minor}"
    env_pins = read_env_pins(proj)
    assert env_pins is not None
    assert {k: str(v) for k, v in env_pins.items()} == {
        "app": "1.0",
        "dep": "1.0",
        "pip": "24.0",
        "solo": "3.0",
        "tool": "1.0",
    }
    assert str(python) not in (proj / "repro.toml").read_text()  # no host path in the manifest
    doc = tomlkit.parse((proj / "repro.toml").read_text())
    index = tomlkit.aot()
    index.append(tomlkit.table().add("name", "local").add("url", served_index.url()).add("default", True))
    doc["packages"]["index"] = index
    (proj / "repro.toml").write_text(tomlkit.dumps(doc))
    capsys.readouterr()
    assert main(["lock", str(proj / "repro.toml")]) == 0
    lock = (proj / requirements_filename(m.platform[0].name)).read_text()
    assert pins(lock) == {"app": "1.0", "dep": "1.0", "solo": "3.0", "tool": "1.0"}
    # pip is installed but not needed by the lock: neither kept nor changed
    assert (
        f"{m.platform[0].name}: kept 4 of 4 pins from {ENV_PINS}; 1 not needed on this platform"
        in capsys.readouterr().err
    )
    # the preference is only a preference: --upgrade takes the newest
    assert main(["lock", str(proj / "repro.toml"), "-q", "--upgrade"]) == 0
    lock = (proj / requirements_filename(m.platform[0].name)).read_text()
    assert pins(lock) == {"app": "1.1", "dep": "2.0", "solo": "4.0", "tool": "1.0"}


def _facts(dists: list[dict[str, Any]], version: str = "3.12.4") -> Facts:
    return Facts.model_validate(
        {
            "interpreter": {"version": version},
            "platform": {"system": "Linux", "os": "linux", "machine": "x86_64"},
            "markers": {"sys_platform": "linux", "python_version": version[:4], "platform_system": "Linux"},
            "distributions": dists,
        }
    )


def test_editable_and_direct_url_installs_are_reported_and_their_dependencies_kept(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "proj"\nversion = "1"\ndependencies = ["numpy"]\n'
    )
    facts = _facts(
        [
            {
                "name": "proj",
                "version": "1",
                "requires": ["numpy"],
                "direct_url": {"url": proj.resolve().as_uri(), "dir_info": {"editable": True}},
            },
            {
                "name": "helper",
                "version": "0.3",
                "requires": ["rich"],
                "direct_url": {
                    "url": "https://user:s3cret@example.org/helper-0.3.tar.gz",
                    "archive_info": {},
                },
            },
            {"name": "numpy", "version": "1.26.4"},
            {"name": "rich", "version": "13.7.1"},
            {"name": "torch", "version": "2.13.0+cu121", "requires": ["filelock"]},
            {"name": "filelock", "version": "3.13.1"},
            {
                "name": "Kernodeck",
                "version": "0.9.0",
                "requires": ["resolvelib>=1"],
                "direct_url": {"url": "file:///opt/kernodeck", "dir_info": {"editable": True}},
            },
            {"name": "resolvelib", "version": "1.1.0"},
            {"name": "setuptools", "version": "70.0"},
        ]
    )
    (proj / "uv.lock").write_text('version = 1\n[[package]]\nname = "numpy"\nversion = "1.0"\n')
    env = from_facts(facts, proj)
    # rich is a leaf once the install that needs it cannot be locked; numpy is the project's own
    # dependency, read with its specifier from pyproject.toml (`from`), not repeated bare
    assert env.requirements == ["rich", "torch"]
    assert env.project_editable
    assert "proj" not in env.pins and "helper" not in env.pins
    assert env.pins["torch"] == "2.13.0+cu121" and env.pins["resolvelib"] == "1.1.0"
    # Kernodeck is a tool of the environment, not of the project: neither it nor what only it
    # requires is a requirement, and it is not reported as a problem
    assert not any("ernodeck" in line for line in env.not_locked)
    assert any(line.startswith("helper 0.3 was installed from a direct URL") for line in env.not_locked)
    assert not any("s3cret" in line for line in env.not_locked)
    text = tomlkit.dumps(starter_document(proj, facts=LINUX, git=None, env=env))
    assert "not locked: helper 0.3 was installed from a direct URL" in text
    assert "not locked: proj 1 is the project itself" in text
    assert "uv.lock found" not in text  # the environment's versions are preferred, not uv.lock's
    (proj / "repro.toml").write_text(text)
    m = load_manifest(proj / "repro.toml")
    assert m.packages.from_ == ["pyproject.toml"]
    assert m.packages.requirements == ["rich", "torch"]
    assert m.python.version == "3.12"
    # torch's local label sets the host platform's backend
    assert (m.platform[0].name, m.platform[0].backend) == ("linux-x86_64-cu121", "cu121")


@pytest.mark.parametrize(("label", "backend"), [("+cpu", "cpu"), ("+rocm6.2", "rocm6.2"), ("", None)])
def test_torch_label_of_the_environment_sets_the_backend(
    tmp_path: Path, label: str, backend: str | None
) -> None:
    env = from_facts(_facts([{"name": "torch", "version": f"2.13.0{label}"}]), tmp_path)
    (tmp_path / "repro.toml").write_text(
        tomlkit.dumps(starter_document(tmp_path, facts=LINUX, git=None, env=env))
    )
    assert load_manifest(tmp_path / "repro.toml").platform[0].backend == backend


def test_from_env_with_a_missing_interpreter_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path), "--from-env", str(tmp_path / "nope" / "python")]) == 2
    assert "--from-env" in capsys.readouterr().err
    assert not (tmp_path / "repro.toml").exists() and not (tmp_path / ENV_PINS).exists()


def test_the_probe_reads_requirements_after_a_blank_line_inside_a_folded_field() -> None:
    from kernodeck.probe.script import _headers

    text = (
        "Metadata-Version: 2.1\nName: plots\nVersion: 3.0\nLicense: first paragraph\n"
        "         \n         second paragraph\nRequires-Dist: cycler>=0.10\n\nthe body\nRequires-Dist: no\n"
    )
    h = _headers(text)
    assert h["requires-dist"] == ["cycler>=0.10"]
    assert "license" not in h  # not a field the probe keeps (`_KEPT`); its folded lines are skipped
