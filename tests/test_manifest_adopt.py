"""`kernodeck init` reads the project: it refers to the requirement files and pyproject.toml the
project installs from (never copies them), sets the backend a local label asks for, and proposes
data and model folders with their fingerprints; the first lock then follows those sources."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from kernodeck.cli import main
from kernodeck.fingerprint import fingerprint
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest import load_manifest
from kernodeck.manifest.init import HostFacts, starter_document
from kernodeck.manifest.sources import read_sources
from tests.fixtures.adopt_project import uv_compile as _uv_compile
from tests.fixtures.adopt_project import uv_lock as _uv_lock
from tests.fixtures.adopt_project import write as _write
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins

pytest_plugins = ["tests.fixtures.index_fixtures"]

LINUX = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
MACOS = HostFacts("3.11", "cpython", "macos", "arm64", macos="14.0")


def _starter(directory: Path, facts: HostFacts = LINUX) -> str:
    return tomlkit.dumps(starter_document(directory, facts=facts, git=None))


def _init(directory: Path, facts: HostFacts = LINUX) -> Path:
    path = directory / "repro.toml"
    path.write_text(_starter(directory, facts), encoding="utf-8")
    return path


def test_requirements_with_includes_editable_project_and_local_label(tmp_path: Path) -> None:
    _write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "trainer"\nversion = "1"\ndependencies = ["numpy>=1.26"]\n'
        '[dependency-groups]\ntest = ["pytest"]\n',
    )
    _write(
        tmp_path / "requirements.txt",
        "-r requirements/base.txt\n-c requirements/constraints.txt\n"
        "--extra-index-url https://example.org/whl/cu121\n-e .\ntorch==2.3.0+cu121\n",
    )
    _write(tmp_path / "requirements" / "base.txt", "tqdm\n")
    _write(tmp_path / "requirements" / "constraints.txt", "tqdm<5\n")
    _write(tmp_path / "requirements-dev.txt", "-r requirements.txt\nruff\n")
    _write(tmp_path / "requirements-docs.txt", "sphinx\n")
    _write(tmp_path / "requirements-rebuild-linux.txt", "# a kernodeck lock file, never a source\n")
    path = _init(tmp_path)
    text = path.read_text()
    m = load_manifest(path)
    # requirements.txt stands for everything the project installs: base.txt through -r, the
    # project's own dependencies through -e .; requirements-dev.txt includes it, docs is for docs
    assert m.packages.from_ == ["requirements.txt"]
    assert "also found requirements-dev.txt" in text and "also found requirements-docs.txt" in text
    assert "requirements-rebuild-linux.txt" not in text
    assert m.packages.requirements == []
    assert (m.platform[0].name, m.platform[0].backend) == ("linux-x86_64-cu121", "cu121")
    assert "requirements.txt:5: torch==2.3.0+cu121" in text
    sources = read_sources(m, path)
    assert sources.requirements == ("tqdm", "numpy>=1.26", "torch==2.3.0")
    assert sources.constraints == ("tqdm<5",)
    assert "DESIGN.md" not in text


def test_macos_host_ignores_a_cuda_label(tmp_path: Path) -> None:
    _write(tmp_path / "requirements.txt", "torch==2.3.0+cu121\n")
    m = load_manifest(_init(tmp_path, MACOS))
    assert m.platform[0].backend is None


def test_pyproject_only_is_referred_to_with_its_extras_and_groups_named(tmp_path: Path) -> None:
    _write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "p"\nversion = "1"\ndependencies = ["numpy"]\n'
        '[project.optional-dependencies]\ntrain = ["rich"]\n[dependency-groups]\nlint = ["ruff"]\n',
    )
    path = _init(tmp_path)
    text = path.read_text()
    m = load_manifest(path)
    assert m.packages.from_ == ["pyproject.toml"]
    assert "# extras = []   # the project has: train" in text
    assert "# groups = []   # dependency groups: lint" in text


def test_a_requirements_file_with_a_line_a_lock_cannot_take_stays_in_from(tmp_path: Path) -> None:
    # its other requirements (numpy) never silently disappear: the line is named, and validate and
    # lock stop at it until it is fixed or skipped (tests/test_init_uncarried_lines.py)
    _write(tmp_path / "requirements.txt", "numpy\ngit+https://example.org/team/tool.git#egg=tool\n")
    path = _init(tmp_path)
    text = path.read_text()
    m = load_manifest(path)
    assert m.packages.from_ == ["requirements.txt"]
    assert "# requirements.txt:2: git+https://example.org/team/tool.git#egg=tool: a VCS" in text
    assert "not used" not in text


def test_data_and_model_folders_are_proposed_commented_out_with_fingerprints(tmp_path: Path) -> None:
    _write(tmp_path / "data" / "train.jsonl", '{"x": 1}\n')
    _write(tmp_path / "data" / "val" / "v.jsonl", '{"x": 2}\n')
    _write(tmp_path / "checkpoints" / "step1.bin", "weights")
    (tmp_path / "models").mkdir()  # empty: nothing to propose
    _write(tmp_path / "weights" / "yolo.py", "class Model: ...\n")  # code and configs only, as
    _write(tmp_path / "weights" / "yolov5s.yaml", "depth_multiple: 0.33\n")  # YOLOv5's models/
    path = _init(tmp_path)
    text = path.read_text()
    m = load_manifest(path)
    assert m.data == [] and m.weights == []  # proposed, not declared
    data_fp = fingerprint(tmp_path / "data").sha256
    ckpt_fp = fingerprint(tmp_path / "checkpoints").sha256
    assert f'# [[data]]\n# name = "data"\n# path = "data"\n# sha256 = "{data_fp}"   # 2 files' in text
    assert f'# [[weights]]\n# name = "checkpoints"\n# path = "checkpoints"\n# sha256 = "{ckpt_fp}"' in text
    assert 'name = "models"' not in text and 'name = "weights"' not in text
    # uncommented, the proposal is a valid entry whose fingerprint verify accepts
    uncommented = text.replace("# [[data]]", "[[data]]").replace('# name = "data"', 'name = "data"')
    uncommented = uncommented.replace('# path = "data"', 'path = "data"').replace(
        f'# sha256 = "{data_fp}"', f'sha256 = "{data_fp}"'
    )
    path.write_text(uncommented)
    assert load_manifest(path).data[0].sha256 == data_fp


def test_init_then_lock_follows_the_project_sources(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("app", "2.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    index_factory.add_wheel("progress", "4.0")
    proj = tmp_path / "proj"
    _write(proj / "pyproject.toml", '[project]\nname = "proj"\nversion = "1"\ndependencies = ["app"]\n')
    _write(
        proj / "requirements.txt",
        f"--index-url {served_index.url()}\n-r base.txt\n-c constraints.txt\n-e .\n",
    )
    _write(proj / "base.txt", "progress\n")
    _write(proj / "constraints.txt", "app<2\n")
    assert main(["init", str(proj)]) == 0
    assert main(["validate", str(proj / "repro.toml")]) == 0
    m = load_manifest(proj / "repro.toml")
    assert main(["lock", str(proj / "repro.toml"), "-q"]) == 0
    lock = (proj / requirements_filename(m.platform[0].name)).read_text()
    # progress is reached through -r base.txt, app through -e . and kept below 2 by -c
    assert pins(lock) == {"app": "1.0", "dep": "1.0", "progress": "4.0"}
    for name in ("requirements.txt", "base.txt", "constraints.txt"):
        assert f"# input-sha256: {name} " in lock
    assert "# input-pins-sha256: pyproject.toml " in lock  # its pin parts only
    assert main(["lock", str(proj / "repro.toml"), "--check"]) == 0
    _write(proj / "base.txt", "progress\n# a comment changes the input, too\n")
    assert main(["lock", str(proj / "repro.toml"), "--check"]) == 1
    assert "base.txt" in capsys.readouterr().out


def _uv_locked(tmp_path: Path, index_factory: IndexFactory, served_index: Server) -> Path:
    """A project whose uv.lock (made by uv) pins app 1.0 and dep 1.0; then newer versions appear."""
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    proj = tmp_path / "proj"
    _write(
        proj / "pyproject.toml",
        '[project]\nname = "proj"\nversion = "1"\nrequires-python = ">=3.10"\ndependencies = ["app", "dep"]\n',
    )
    _uv_lock(proj, served_index.url(), tmp_path)
    index_factory.add_wheel("app", "1.1", requires=["dep>=1"])
    index_factory.add_wheel("dep", "2.0")
    _write(proj / "requirements.txt", f"--index-url {served_index.url()}\n-e .\n")
    return proj


def test_first_lock_keeps_the_pins_of_a_real_uv_lock(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    proj = _uv_locked(tmp_path, index_factory, served_index)
    # newer versions appeared after uv locked; a fresh lock would take them
    assert 'name = "app"\nversion = "1.0"' in (proj / "uv.lock").read_text()
    assert main(["init", str(proj)]) == 0
    text = (proj / "repro.toml").read_text()
    assert "uv.lock found: a platform's first `kernodeck lock` keeps its 2 pins" in text
    m = load_manifest(proj / "repro.toml")
    platform = m.platform[0].name
    assert main(["lock", str(proj / "repro.toml"), "-q"]) == 0
    assert pins((proj / requirements_filename(platform)).read_text()) == {"app": "1.0", "dep": "1.0"}
    # the preference is a preference: --upgrade takes the newest
    assert main(["lock", str(proj / "repro.toml"), "-q", "--upgrade"]) == 0
    assert pins((proj / requirements_filename(platform)).read_text()) == {"app": "1.1", "dep": "2.0"}


def test_preferences_from_poetry_and_pylock_files(tmp_path: Path) -> None:
    from kernodeck.manifest.adopt import project_lock

    _write(
        tmp_path / "poetry.lock",
        '[[package]]\nname = "Rich"\nversion = "13.7.1"\n\n[[package]]\nname = "click"\nversion = "8.1.7"\n',
    )
    found = project_lock(tmp_path)
    assert found is not None and found.file == "poetry.lock"
    assert {k: str(v) for k, v in found.pins.items()} == {"click": "8.1.7", "rich": "13.7.1"}
    assert found.note is None  # one version each: nothing to say
    _write(
        tmp_path / "pylock.toml",
        'lock-version = "1.0"\n[[packages]]\nname = "numpy"\nversion = "2.1.0"\n'
        '[[packages]]\nname = "torch"\nversion = "2.5.1"\n[[packages]]\nname = "torch"\nversion = "2.5.0"\n',
    )
    found = project_lock(tmp_path)
    assert found is not None and found.file == "pylock.toml"  # pylock.toml before poetry.lock
    assert {k: str(v) for k, v in found.pins.items()} == {"numpy": "2.1.0"}  # torch: two versions
    # and the note says so: the first lock does not keep uv's (or the lock's) version of it
    assert found.note == (
        "pylock.toml pins torch at several versions (forked by markers): a first lock does not "
        "prefer any of them and resolves them afresh"
    )


def test_large_files_elsewhere_are_proposed_but_not_those_of_a_venv(tmp_path: Path) -> None:
    from kernodeck.manifest.adopt import LARGE_FILE

    big = b"\x01" * LARGE_FILE
    _write(tmp_path / "pyproject.toml", '[project]\nname = "p"\nversion = "1"\ndependencies = []\n')
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "table.npy").write_bytes(big)
    (tmp_path / "encoder.safetensors").write_bytes(big + b"w")
    (tmp_path / "assets" / "small.npy").write_bytes(b"x" * 1000)
    venv = tmp_path / "env"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "lib" / "libhuge.so").write_bytes(big)
    (tmp_path / ".git" / "objects").mkdir(parents=True)
    (tmp_path / ".git" / "objects" / "pack").write_bytes(big)
    text = _starter(tmp_path)
    table_fp = fingerprint(tmp_path / "assets" / "table.npy").sha256
    enc_fp = fingerprint(tmp_path / "encoder.safetensors").sha256
    assert f'# [[data]]\n# name = "table"\n# path = "assets/table.npy"\n# sha256 = "{table_fp}"' in text
    assert f'# [[weights]]\n# name = "encoder"\n# path = "encoder.safetensors"\n# sha256 = "{enc_fp}"' in text
    assert "small.npy" not in text and "libhuge" not in text and "objects/pack" not in text


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "poetry.lock",
            '[[package]]\nname = "app"\nversion = "1.0"\n\n[[package]]\nname = "dep"\nversion = "1.0"\n',
        ),
        (
            "pylock.toml",
            'lock-version = "1.0"\ncreated-by = "test"\n\n[[packages]]\nname = "app"\nversion = "1.0"\n\n'
            '[[packages]]\nname = "dep"\nversion = "1.0"\n',
        ),
    ],
)
def test_first_lock_keeps_the_pins_of_a_poetry_or_pylock_file(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    text: str,
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    for version in ("1.0", "1.1"):
        index_factory.add_wheel("app", version, requires=["dep>=1"])
    for version in ("1.0", "2.0"):
        index_factory.add_wheel("dep", version)
    proj = tmp_path / "proj"
    _write(proj / "requirements.txt", f"--index-url {served_index.url()}\napp\n")
    _write(proj / name, text)
    assert main(["init", str(proj)]) == 0
    m = load_manifest(proj / "repro.toml")
    assert m.packages.from_ == ["requirements.txt"]
    assert main(["lock", str(proj / "repro.toml"), "-q"]) == 0
    assert pins((proj / requirements_filename(m.platform[0].name)).read_text()) == {
        "app": "1.0",
        "dep": "1.0",
    }


def test_a_uv_lock_merged_with_conflicts_keeps_its_agreed_pins_and_says_so(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    proj = _uv_locked(tmp_path, index_factory, served_index)
    # two teammates: one bumped dep, the merge stopped at its version line
    lock = (proj / "uv.lock").read_text()
    assert 'name = "dep"\nversion = "1.0"\n' in lock
    lock = lock.replace(
        'name = "dep"\nversion = "1.0"\n',
        'name = "dep"\n<<<<<<< HEAD\nversion = "1.0"\n=======\nversion = "1.5"\n>>>>>>> bump\n',
    )
    (proj / "uv.lock").write_text(lock)
    first = lock.splitlines().index("<<<<<<< HEAD") + 1
    where = f"lines {first}-{first + 4}"
    assert main(["init", str(proj)]) == 0
    assert (
        f"uv.lock has git merge conflict markers ({where}): a first lock prefers the pins outside"
        in (proj / "repro.toml").read_text()
    )
    capsys.readouterr()
    assert main(["lock", str(proj / "repro.toml")]) == 0
    got = capsys.readouterr()
    out = got.out + got.err
    assert f"note: uv.lock has git merge conflict markers ({where})" in out
    assert "kept 1 of 1 pins from uv.lock" in out, out
    platform = load_manifest(proj / "repro.toml").platform[0].name
    # app keeps uv.lock's 1.0; dep, in conflict, is resolved afresh (neither side is preferred)
    assert pins((proj / requirements_filename(platform)).read_text()) == {"app": "1.0", "dep": "2.0"}


def test_a_project_lock_that_cannot_be_read_is_named_not_silently_skipped(tmp_path: Path) -> None:
    from kernodeck.manifest.adopt import first_lock_source, project_lock

    _write(tmp_path / "uv.lock", 'version = 1\n[[package]]\nname = "rich"\nversion = \n')
    found = project_lock(tmp_path)
    assert found is not None and found.pins == {} and found.file == "uv.lock"
    assert found.note is not None and found.note.startswith("uv.lock is not valid TOML (")
    assert found.note.endswith("a first lock does not prefer its pins")
    assert first_lock_source(tmp_path) == ("uv.lock", {}, found.note)
    # a readable lock after it is used, as before
    _write(tmp_path / "poetry.lock", '[[package]]\nname = "click"\nversion = "8.1.7"\n')
    found = project_lock(tmp_path)
    assert found is not None and found.file == "poetry.lock" and found.note is None
    assert {k: str(v) for k, v in found.pins.items()} == {"click": "8.1.7"}


def test_a_pip_tools_layout_locks_from_the_in_files_and_keeps_the_compiled_pins(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    index_factory.add_wheel("app", "1.0", requires=["dep>=1"])
    index_factory.add_wheel("dep", "1.0")
    index_factory.add_wheel("lint", "1.0")
    proj = tmp_path / "proj"
    _write(proj / "requirements.in", f"--index-url {served_index.url()}\napp\n")
    _write(proj / "requirements-dev.in", "-c requirements.txt\nlint\n")
    compiled = _uv_compile(proj, "requirements.in", "requirements.txt", served_index.url(), tmp_path)
    assert compiled.startswith("# This file was autogenerated by uv") and "dep==1.0" in compiled
    _uv_compile(proj, "requirements-dev.in", "requirements-dev.txt", served_index.url(), tmp_path)
    # a hand-written .txt beside an .in stays what the project installs
    _write(proj / "requirements_extra.in", "dep\n")
    _write(proj / "requirements_extra.txt", "dep\n")
    index_factory.add_wheel("app", "1.1", requires=["dep>=1"])
    index_factory.add_wheel("dep", "2.0")

    assert main(["init", str(proj)]) == 0
    text = (proj / "repro.toml").read_text()
    assert 'from = ["requirements.in", "requirements_extra.txt"]' in text, text
    assert "# requirements.txt is compiled by uv from requirements.in: `from` names the .in file" in text
    assert "# also found requirements-dev.in (add it to `from` if the reproduction installs it)" in text
    assert (
        "requirements-dev.txt, requirements.txt found: a platform's first `kernodeck lock` keeps its" in text
    )
    capsys.readouterr()
    assert main(["lock", str(proj / "repro.toml")]) == 0
    got = capsys.readouterr()
    assert "kept 2 of 2 pins from requirements-dev.txt, requirements.txt" in got.out + got.err
    platform = load_manifest(proj / "repro.toml").platform[0].name
    # the compiled versions, not the newest: app 1.1 and dep 2.0 appeared after the compile
    assert pins((proj / requirements_filename(platform)).read_text()) == {"app": "1.0", "dep": "1.0"}


def test_compiled_by_reads_the_headers_both_tools_write(tmp_path: Path) -> None:
    from kernodeck.manifest.adopt import compiled_by

    f = tmp_path / "requirements.txt"
    f.write_text(
        "#\n# This file is autogenerated by pip-compile with Python 3.11\n# by the following command:\n"
    )
    assert compiled_by(f) == "pip-compile"
    f.write_text("# This file was autogenerated by uv via the following command:\n#    uv pip compile x.in\n")
    assert compiled_by(f) == "uv"
    f.write_text("numpy==2.1.0\n# autogenerated by hand, not by a tool\n")
    assert compiled_by(f) is None
    assert compiled_by(tmp_path / "missing.txt") is None


def test_a_folder_of_projects_adopts_no_development_file_and_names_the_projects(tmp_path: Path) -> None:
    """A monorepo root with only a development requirements file: its tools are not the
    reproduction; init names the projects in the folders below and what to run."""
    _write(tmp_path / "requirements-dev.txt", "pre-commit>=3.8\npyright>=1.1\n")
    for sub in ("moshi", "moshi_mlx"):
        _write(
            tmp_path / sub / "pyproject.toml",
            f'[project]\nname = "{sub}"\nversion = "1"\ndependencies = []\n',
        )
    _write(tmp_path / "scripts" / "setup.cfg", "[flake8]\nmax-line-length = 120\n")  # tool settings only
    _write(tmp_path / "docs" / "pyproject.toml", "[tool.ruff]\nline-length = 100\n")  # no project either
    text = _starter(tmp_path)
    m = load_manifest(_init(tmp_path))
    assert m.packages.from_ == [] and m.packages.requirements == []
    assert "below (moshi/pyproject.toml, moshi_mlx/pyproject.toml):" in text  # no scripts/, docs/
    assert "`kernodeck init moshi` or `kernodeck init moshi_mlx`" in text
    # with no project below, the development file is what the project has (unchanged)
    for sub in ("moshi", "moshi_mlx"):
        (tmp_path / sub / "pyproject.toml").unlink()
    assert load_manifest(_init(tmp_path)).packages.from_ == ["requirements-dev.txt"]


def test_a_conda_pip_list_installing_a_setup_py_project_copies_its_install_requires(tmp_path: Path) -> None:
    """`-e .` in a conda environment's pip: list installs setup.py's install_requires too: they are
    copied beside the environment's packages (those it names already kept as it has them)."""
    _write(
        tmp_path / "environment.yaml",
        "name: ldm\ndependencies:\n  - python=3.8.5\n  - pytorch=1.11.0\n  - numpy=1.19.2\n"
        "  - pip:\n    - einops==0.3.0\n    - -e .\n",
    )
    _write(
        tmp_path / "setup.py",
        "from setuptools import setup\nsetup(name='x', install_requires=['torch', 'numpy', 'tqdm'])\n",
    )
    text = _starter(tmp_path)
    m = load_manifest(_init(tmp_path))
    assert m.packages.requirements == ["torch==1.11.0.*", "numpy==1.19.2.*", "einops==0.3.0", "tqdm"]
    assert (
        "environment.yaml:8: -e .: the project itself: setup.py install_requires copied (read, never run): tqdm"
        in text
    )
    assert "which Kernodeck does not run: add them here" not in text
