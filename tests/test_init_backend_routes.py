"""`init` proposes one platform per backend the project routes torch to, named after it and with
a comment naming the evidence: a requirements file's PyTorch index, conda's `pytorch-cuda=` /
`cudatoolkit=`, uv's `[tool.uv.sources]` / `[[tool.uv.index]]` by extra or by marker. uv's
routing extras are selected in `[packages] extras` when they only name torch and do not conflict
(else each on its variant's `[[platform]] extras`); the first lock
then gives each variant its own torch build."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest import load_manifest
from kernodeck.manifest.fromenv import EnvAdoption
from kernodeck.manifest.init import HostFacts, starter_document
from tests.fixtures.adopt_project import write as _write
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins, with_default_index

pytest_plugins = ["tests.fixtures.index_fixtures"]

LINUX = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")
MACOS = HostFacts("3.11", "cpython", "macos", "arm64", macos="14.0")
BASE = "https://torch-mirror.example.org/whl"


def _init(directory: Path, facts: HostFacts = LINUX) -> tuple[Path, str]:
    path = directory / "repro.toml"
    text = tomlkit.dumps(starter_document(directory, facts=facts, git=None))
    path.write_text(text, encoding="utf-8")
    return path, text


def _platforms(path: Path) -> list[tuple[str, str | None]]:
    return [(p.name, p.backend) for p in load_manifest(path).platform]


def _uv_project(directory: Path, base: str, sources: str, extras: str) -> None:
    _write(
        directory / "pyproject.toml",
        '[project]\nname = "app"\nversion = "1"\nrequires-python = ">=3.10"\ndependencies = []\n'
        f"[project.optional-dependencies]\n{extras}\n"
        f"[tool.uv.sources]\n{sources}\n"
        f'[[tool.uv.index]]\nname = "pytorch-cpu"\nurl = "{base}/cpu"\nexplicit = true\n'
        f'[[tool.uv.index]]\nname = "pytorch-cu126"\nurl = "{base}/cu126"\nexplicit = true\n',
    )


BY_EXTRA = 'torch = [{ index = "pytorch-cpu", extra = "cpu" }, { index = "pytorch-cu126", extra = "cu126" }]'
BY_MARKER = (
    'torch = [{ index = "pytorch-cpu", marker = "sys_platform != \'linux\'" },'
    ' { index = "pytorch-cu126", marker = "sys_platform == \'linux\'" }]'
)


def test_a_pytorch_index_in_a_requirements_file_gives_its_cuda_platform(tmp_path: Path) -> None:
    _write(tmp_path / "requirements.txt", f"--extra-index-url {BASE}/cu117\ntorch==1.13.1\nrich\n")
    path, text = _init(tmp_path)
    assert _platforms(path) == [("linux-x86_64-cu117", "cu117")]
    assert f'backend = "cu117" # requirements.txt:1: --extra-index-url {BASE}/cu117' in text
    assert "require-accelerator = true" in text


def test_condas_pytorch_cuda_gives_its_cuda_platform(tmp_path: Path) -> None:
    _write(
        tmp_path / "environment.yml",
        "name: x\ndependencies:\n  - python=3.9\n  - pytorch=1.13\n  - pytorch-cuda=11.7\n  - pip:\n    - rich\n",
    )
    path, text = _init(tmp_path)
    assert _platforms(path) == [("linux-x86_64-cu117", "cu117")]
    assert 'backend = "cu117" # environment.yml:5: pytorch-cuda=11.7' in text


def test_uv_routing_by_extra_gives_one_platform_per_variant_and_selects_the_extras(tmp_path: Path) -> None:
    _uv_project(tmp_path, BASE, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch>=2.6"]')
    path, text = _init(tmp_path)
    m = load_manifest(path)
    assert _platforms(path) == [("linux-x86_64-cpu", "cpu"), ("linux-x86_64-cu126", "cu126")]
    assert (
        "backend = \"cu126\" # pyproject.toml [tool.uv.sources] torch -> index 'pytorch-cu126' for extra 'cu126'"
        in text
    )
    assert m.packages.extras == ["cpu", "cu126"]
    assert str(m.packages.pytorch_index) == BASE  # the project's own index base, not the default
    assert "require-accelerator = false" in text  # one variant runs on the CPU
    # macOS runs only the CPU build: one platform, and the comment says why the other is not here
    path, text = _init(tmp_path, MACOS)
    assert _platforms(path) == [("macos-arm64-cpu", "cpu")]
    assert "for extra 'cu126': not proposed (macos runs no cu126 build); add a [[platform]]" in text


def test_uv_routing_by_marker_keeps_the_variant_this_machine_takes(tmp_path: Path) -> None:
    _uv_project(tmp_path, BASE, BY_MARKER, 'train = ["torch>=2.6"]')
    path, text = _init(tmp_path)
    assert _platforms(path) == [("linux-x86_64-cu126", "cu126")]
    assert "where sys_platform == 'linux'" in text
    assert load_manifest(path).packages.extras == []  # routing by marker selects no extra
    path, _ = _init(tmp_path, MACOS)
    assert _platforms(path) == [("macos-arm64-cpu", "cpu")]


def test_routing_extras_that_require_more_than_torch_are_named_not_selected(tmp_path: Path) -> None:
    _uv_project(tmp_path, BASE, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch>=2.6", "nvidia-ml-py"]')
    path, text = _init(tmp_path)
    assert load_manifest(path).packages.extras == []
    assert "# extras cpu, cu126 route torch by backend in uv and require more than torch" in text
    assert len(_platforms(path)) == 2


def test_the_first_lock_gives_each_uv_variant_its_own_torch(
    tmp_path: Path,
    pytorch_index: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    proj = tmp_path / "proj"
    _uv_project(proj, served_index.pytorch_base, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch>=2.6"]')
    path, _ = _init(proj)
    with_default_index(path, served_index.url())  # PyPI's part, served on loopback
    assert main(["lock", str(path), "-q"]) == 0
    torch = {
        name: pins((proj / requirements_filename(name)).read_text())["torch"]
        for name in ("linux-x86_64-cpu", "linux-x86_64-cu126")
    }
    assert torch == {"linux-x86_64-cpu": "2.6.0+cpu", "linux-x86_64-cu126": "2.6.0+cu126"}


def test_routing_extras_asking_for_different_versions_go_each_on_its_own_platform(tmp_path: Path) -> None:
    """uv installs one routing extra at a time (`uv sync --extra cu126`); selected together, every
    platform would require every extra's range (kohya-ss/musubi-tuner's layout). Each variant's
    [[platform]] selects its own extra instead, and [packages] none of them."""
    _uv_project(tmp_path, BASE, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch>=2.7.1"]')
    path, text = _init(tmp_path)
    m = load_manifest(path)
    assert m.packages.extras == []
    assert [(p.name, p.backend, p.extras) for p in m.platform] == [
        ("linux-x86_64-cpu", "cpu", ["cpu"]),
        ("linux-x86_64-cu126", "cu126", ["cu126"]),
    ]
    assert (
        "# extras cpu, cu126 ask for different versions: each variant's [[platform]] selects its own" in text
    )
    assert 'extras = ["cu126"] # as `uv sync --extra cu126` installs this variant' in text
    # macOS runs only the CPU variant: its platform selects only the cpu extra
    path, _ = _init(tmp_path, MACOS)
    assert [(p.name, p.extras) for p in load_manifest(path).platform] == [("macos-arm64-cpu", ["cpu"])]
    _uv_project(tmp_path, BASE, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch >= 2.6"]')  # the same range
    path, text = _init(tmp_path)
    assert "ask for different versions" not in text
    assert load_manifest(path).packages.extras == ["cpu", "cu126"]
    assert all(p.extras == [] for p in load_manifest(path).platform)


def test_routing_extras_declared_conflicting_go_each_on_its_own_platform(tmp_path: Path) -> None:
    """The same ranges, but `[tool.uv] conflicts` says uv never installs them together."""
    _uv_project(tmp_path, BASE, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch>=2.6"]')
    pyproject = tmp_path / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    conflicts = '[tool.uv]\nconflicts = [[{ extra = "cpu" }, { extra = "cu126" }]]\n'
    _write(pyproject, text.replace("[tool.uv.sources]", conflicts + "[tool.uv.sources]"))
    path, text = _init(tmp_path)
    m = load_manifest(path)
    assert m.packages.extras == []
    assert [p.extras for p in m.platform] == [["cpu"], ["cu126"]]
    assert "# extras cpu, cu126 are declared conflicting ([tool.uv] conflicts)" in text


def test_the_first_lock_of_conflicting_variants_gives_each_its_own_range(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cpu's torch>=2.6 and cu126's torch>=2.7.1: with 2.6.0 only on the cpu index, the cpu
    variant locks it (selected together, it would have to meet >=2.7.1 too and fail)."""
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    index_factory.add_wheel("torch", "2.6.0+cpu", index="cpu")
    index_factory.add_wheel("torch", "2.7.1+cu126", index="cu126")
    proj = tmp_path / "proj"
    _uv_project(proj, served_index.pytorch_base, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch>=2.7.1"]')
    path, _ = _init(proj)
    with_default_index(path, served_index.url())
    assert main(["lock", str(path), "-q"]) == 0
    torch = {
        name: pins((proj / requirements_filename(name)).read_text())["torch"]
        for name in ("linux-x86_64-cpu", "linux-x86_64-cu126")
    }
    assert torch == {"linux-x86_64-cpu": "2.6.0+cpu", "linux-x86_64-cu126": "2.7.1+cu126"}


def test_an_adopted_environment_keeps_variant_extras_only_with_the_pyproject_in_from(tmp_path: Path) -> None:
    """`init --from-env`: the project installed editable keeps pyproject.toml in `from`, so each
    variant's extra stays on its platform; otherwise no extra of it can be selected, and init
    does not say one is."""
    _uv_project(tmp_path, BASE, BY_EXTRA, 'cpu = ["torch>=2.6"]\ncu126 = ["torch>=2.7.1"]')
    for editable, extras in ((True, [["cpu"], ["cu126"]]), (False, [[], []])):
        env = EnvAdoption(
            "3.11", "cpython", ["torch==2.7.1"], project_editable=editable, torch_version="2.7.1+cu126"
        )
        doc = starter_document(tmp_path, facts=LINUX, git=None, env=env)
        path = tmp_path / "repro.toml"
        text = tomlkit.dumps(doc)
        path.write_text(text, encoding="utf-8")
        m = load_manifest(path)
        assert [p.extras for p in m.platform] == extras
        assert ("each variant's [[platform]] selects its own" in text) is editable
        assert main(["validate", str(path)]) == 0
