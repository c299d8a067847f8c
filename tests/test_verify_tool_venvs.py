"""verify of environments other tools make: a venv virtualenv made (as Poetry, Hatch and tox make
them: pip seeded with a RECORD that lists folders and scripts without hashes), and a project
installed the way Poetry installs it (absolute paths in its RECORD, its dev group installed)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernodeck.api import verify
from kernodeck.report import Report, Status
from tests.fixtures.index_factory import build_wheel_bytes

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine != "x86_64", reason="the manifest declares linux x86_64"
)
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _wheel(folder: Path, name: str) -> str:
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n"
    filename, data = build_wheel_bytes(name, "1.0", metadata=meta)
    (folder / filename).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _pip(python: Path, wheels: Path, *names: str) -> None:
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install", "--isolated", "-q"),
            *("--disable-pip-version-check", "--no-index", "--find-links", str(wheels), *names),
        ],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A project whose manifest locks `alpha` (wheels in tmp/wheels), its own cache."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    digest = _wheel(wheels, "alpha")
    _wheel(wheels, "beta")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "repro.toml").write_text(
        f'schema-version = 1\n[reference]\nname = "tools"\nid = "1"\n[python]\nversion = "{PY}"\n'
        '[packages]\nrequirements = ["alpha"]\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    (proj / "requirements-rebuild-linux-x86_64.txt").write_text(
        f"--only-binary :all:\n\nalpha==1.0 \\\n    --hash=sha256:{digest}\n    # via -r repro.toml\n"
    )
    old = os.environ.get("KERNODECK_CACHE_DIR")
    os.environ["KERNODECK_CACHE_DIR"] = str(tmp_path / "cache")
    yield proj
    if old is None:
        os.environ.pop("KERNODECK_CACHE_DIR", None)
    else:
        os.environ["KERNODECK_CACHE_DIR"] = old


def _verify(project: Path, python: Path) -> Report:
    return verify(project / "repro.toml", python=python, compute=False, only=("packages",))


def _step(report: Report, name: str) -> object:
    return next((s for s in report.steps if s.name == name), None)


def test_a_virtualenv_venv_has_no_record_warnings_and_a_changed_seeded_file_still_shows(
    project: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "virtualenv", "-q", "--no-periodic-update", "--activators", "", str(venv)],
        check=True,
        timeout=240,
    )
    site = next((venv / "lib").glob("python3.*/site-packages"))
    seeded = sorted(p.name for p in site.glob("*.virtualenv"))
    assert any(n.startswith("pip-") for n in seeded), seeded  # virtualenv's marker: what it seeded
    record = next(site.glob("pip-*.dist-info")) / "RECORD"
    rows = record.read_text().splitlines()
    assert any(r.endswith("__pycache__,,") for r in rows)  # a folder, listed without a hash
    python = venv / "bin" / "python"
    _pip(python, tmp_path / "wheels", "alpha==1.0")
    report = _verify(project, python)
    warned = {s.name: s.error for s in report.steps if s.status is not Status.PASSED}
    assert warned == {}, warned
    assert _step(report, "records") is not None
    # a file of the seeded pip that RECORD does hash is still checked
    init = site / "pip" / "__init__.py"
    init.write_text(init.read_text() + "# changed\n")
    report = _verify(project, python)
    step = _step(report, "record:pip")
    assert step is not None and step.status is Status.WARNING  # type: ignore[attr-defined]
    assert "pip/__init__.py" in (step.error or "")  # type: ignore[attr-defined]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_a_project_installed_as_poetry_installs_it(project: Path, tmp_path: Path) -> None:
    """Poetry 2.5's editable install of the project, as it wrote it: a .pth pointing at the
    checkout, every RECORD row an absolute path; and `poetry install` brings the dev group."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    site = next((tmp_path / "venv" / "lib").glob("python3.*/site-packages"))
    _pip(python, tmp_path / "wheels", "alpha==1.0", "beta==1.0")
    (project / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "mlproj"\nversion = "0.1.0"\n'
        '[tool.poetry.dependencies]\npython = "^3.10"\nalpha = "*"\n'
        '[tool.poetry.group.dev.dependencies]\nbeta = "*"\n'
        '[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n'
    )
    info = site / "mlproj-0.1.0.dist-info"
    info.mkdir()
    files = {
        site / "mlproj.pth": f"{project}\n".encode(),
        info / "METADATA": b"Metadata-Version: 2.3\nName: mlproj\nVersion: 0.1.0\nRequires-Dist: alpha\n\n",
        info
        / "WHEEL": b"Wheel-Version: 1.0\nGenerator: poetry-core 2.2.1\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        info / "INSTALLER": b"poetry",
        info
        / "direct_url.json": f'{{"dir_info": {{"editable": true}}, "url": "{project.as_uri()}"}}'.encode(),
    }
    for path, data in files.items():
        path.write_bytes(data)
    record = [f"{p},sha256={_b64(d)},{len(d)}" for p, d in files.items()] + [f"{info / 'RECORD'},,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    report = _verify(project, python)
    unlisted = _step(report, "records-unlisted")
    assert unlisted is None or unlisted.status is Status.PASSED, unlisted  # type: ignore[attr-defined]
    assert _step(report, "project:mlproj").status is Status.PASSED  # type: ignore[attr-defined]
    unlocked = _step(report, "unlocked")
    assert unlocked is not None and unlocked.status is Status.WARNING  # type: ignore[attr-defined]
    hint = unlocked.hint or ""  # type: ignore[attr-defined]
    assert 'Poetry group "dev" of pyproject.toml' in hint and "`poetry install --without dev`" in hint


def test_packages_pipenv_installed_with_dev_are_named_with_the_pipfile(project: Path, tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    _pip(python, tmp_path / "wheels", "alpha==1.0", "beta==1.0")  # `pipenv install --dev`
    (project / "Pipfile").write_text('[packages]\nalpha = "*"\n\n[dev-packages]\nbeta = "*"\n')
    unlocked = _step(_verify(project, python), "unlocked")
    assert unlocked is not None and unlocked.status is Status.WARNING  # type: ignore[attr-defined]
    hint = unlocked.hint or ""  # type: ignore[attr-defined]
    assert hint.startswith("they come with Pipfile's [dev-packages], which [packages] does not select")
    assert "`pipenv sync`, without --dev" in hint


def test_dev_packages_of_a_pipfile_from_reads_are_selected_with_groups(project: Path, tmp_path: Path) -> None:
    # `from` reads the Pipfile: its [dev-packages] are a group the manifest can select
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    _pip(python, tmp_path / "wheels", "alpha==1.0", "beta==1.0")  # `pipenv install --dev`
    (project / "Pipfile").write_text('[packages]\nalpha = "*"\n\n[dev-packages]\nbeta = "*"\n')
    manifest = project / "repro.toml"
    manifest.write_text(manifest.read_text().replace('requirements = ["alpha"]', 'from = ["Pipfile"]'))
    unlocked = _step(_verify(project, python), "unlocked")
    assert unlocked is not None and unlocked.status is Status.WARNING  # type: ignore[attr-defined]
    hint = unlocked.hint or ""  # type: ignore[attr-defined]
    assert hint.startswith("they come with Pipfile's [dev-packages], which [packages] does not select: add ")
    assert 'groups = ["dev-packages"] to [packages]' in hint and "requirements to [packages]" not in hint


def test_one_package_of_a_part_among_others_is_said_in_the_singular(project: Path, tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    _wheel(tmp_path / "wheels", "gamma")
    _pip(python, tmp_path / "wheels", "alpha==1.0", "beta==1.0", "gamma==1.0")
    (project / "Pipfile").write_text('[packages]\nalpha = "*"\n\n[dev-packages]\nbeta = "*"\n')
    unlocked = _step(_verify(project, python), "unlocked")
    hint = unlocked.hint or ""  # type: ignore[attr-defined]
    assert hint.startswith("beta comes with Pipfile's [dev-packages]"), hint
