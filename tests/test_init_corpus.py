"""`init` on real public ML projects' dependency declarations (`tests/data/init_corpus/<layout>/`,
each with its source and expectation in CORPUS.toml), then the first `kernodeck lock` on a loopback
index serving tiny wheels of everything the layout requires (`tests/fixtures/corpus_index.py`).

Expectations are what the issue asks for (what a uv or pip-tools user would call right). A case
whose platforms or first lock need work not on this branch says so (`pending-platforms`, the
lock's `pending`): that check is an expected failure, strict, so the day it passes the marker must
go; the case's other checks run as usual."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from kernodeck.backends import PYTORCH_INDEX_BASE
from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest import load_manifest
from kernodeck.manifest.adopt import discover, first_lock_preferences
from kernodeck.manifest.init import HostFacts, starter_document
from kernodeck.manifest.sources import apply_sources
from kernodeck.reqfile import read_pyproject
from kernodeck.support.tomltext import parse_toml
from tests.fixtures.corpus_index import serve_layout
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins, with_default_index

CORPUS = Path(__file__).parent / "data" / "init_corpus"
LINUX = HostFacts("3.11", "cpython", "linux", "x86_64", glibc="2.35")

PLACEHOLDERS = {
    "https://pypi-placeholder.invalid/simple": "layout",
    "https://ngc-placeholder.invalid/simple": "ngc",
}
LAYOUTS = sorted(p.name for p in CORPUS.iterdir() if (p / "CORPUS.toml").is_file())


@dataclass(frozen=True)
class Case:
    layout: str
    source: dict[str, Any]
    expect: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.layout}/{self.expect['dir']}".rstrip("/")


def _cases() -> Iterator[Any]:
    for layout in LAYOUTS:
        spec = parse_toml(
            (CORPUS / layout / "CORPUS.toml").read_text(encoding="utf-8"), f"{layout}/CORPUS.toml"
        )
        for expect in spec["case"]:
            case = Case(layout, spec["source"], expect)
            yield pytest.param(case, id=case.id)
            yield pytest.param(
                case, id=f"{case.id}:platforms", marks=_pending(expect.get("pending-platforms"))
            )
            lock = expect.get("lock")
            if lock is not None:
                yield pytest.param(case, id=f"{case.id}:lock", marks=_pending(lock.get("pending")))


def _pending(reason: str | None) -> list[pytest.MarkDecorator]:
    """An expectation that needs work not on this branch: an expected failure, strict."""
    return [] if reason is None else [pytest.mark.xfail(reason=reason, strict=True)]


CASES = list(_cases())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One loopback server for the module; each layout publishes on its own index."""
    factory = IndexFactory(tmp_path_factory.mktemp("corpus-index"))
    with factory.serve() as s:
        yield s


def _index_name(layout: str) -> str:
    return "corpus-" + re.sub(r"[^a-z0-9]+", "-", layout.lower())


def _copy(case: Case, tmp: Path, server: Server | None) -> Path:
    """The layout copied to `tmp`; with a server, its placeholder and PyTorch URLs point at it."""
    dest = tmp / case.layout
    shutil.copytree(CORPUS / case.layout, dest, ignore=shutil.ignore_patterns("CORPUS.toml"))
    if server is not None:
        urls = {
            **{
                ph: server.url(_index_name(case.layout) if ix == "layout" else ix)
                for ph, ix in PLACEHOLDERS.items()
            },
            PYTORCH_INDEX_BASE: server.pytorch_base,
        }
        for f in dest.rglob("*"):
            if f.is_file():
                text = f.read_text(encoding="utf-8")
                for old, new in urls.items():
                    text = text.replace(old, new)
                f.write_text(text, encoding="utf-8")
    return dest / str(case.expect["dir"])


def _init(project: Path) -> Path:
    path = project / "repro.toml"
    path.write_text(tomlkit.dumps(starter_document(project, facts=LINUX, git=None)), encoding="utf-8")
    return path


def _check_proposal(case: Case, path: Path) -> None:
    want = case.expect
    m = load_manifest(path)
    assert m.python.version == want["python"]
    assert m.packages.extras == want["extras"]
    assert m.packages.groups == want["groups"]
    assert [str(f) for f in m.packages.from_] == want["from"]
    missing = set(want.get("requirements", [])) - set(m.packages.requirements)
    assert not missing, f"not copied: {sorted(missing)}"
    text = path.read_text(encoding="utf-8")
    for said in want.get("says", []):
        assert said in text


#: Hosts of public package registries: a copied file carries placeholders instead (house rule).
_REGISTRY_HOSTS = re.compile(r"pypi\.org|pythonhosted\.org|pypi\.ngc\.nvidia\.com|pypi\.nvidia\.com")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_names_its_source_and_holds_only_the_files_it_lists(layout: str) -> None:
    folder = CORPUS / layout
    spec = parse_toml((folder / "CORPUS.toml").read_text(encoding="utf-8"), f"{layout}/CORPUS.toml")
    source = spec["source"]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"]) and re.fullmatch(
        r"[0-9a-f]{40}", source["commit"]
    )
    assert source["license"] and isinstance(source["edits"], list)
    listed = {entry.split(" -> ")[-1].split(" (")[0].strip() for entry in source["files"]}
    held = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {"CORPUS.toml"}
    assert held == listed
    for name in held:
        assert not _REGISTRY_HOSTS.search((folder / name).read_text(encoding="utf-8")), name


@pytest.mark.parametrize("case", [c for c in CASES if ":" not in c.id])
def test_init_proposes_what_the_project_says(case: Case, tmp_path: Path) -> None:
    _check_proposal(case, _init(_copy(case, tmp_path, None)))


@pytest.mark.parametrize("case", [c for c in CASES if c.id.endswith(":platforms")])
def test_init_proposes_the_platforms_the_project_supports(case: Case, tmp_path: Path) -> None:
    m = load_manifest(_init(_copy(case, tmp_path, None)))
    want = [(p["name"], p.get("backend"), p.get("extras", [])) for p in case.expect["platforms"]]
    assert [(p.name, p.backend, p.extras) for p in m.platform] == want


def _variants(project: Path, manifest_path: Path) -> dict[str, list[str]]:
    """Per backend platform, the torch-family requirements of its variant: uv's routing extra's
    own list where the project routes by extra, else every merged requirement."""
    m = load_manifest(manifest_path)
    merged, _ = apply_sources(m, manifest_path)
    by_extra = {r.backend: r.extra for r in discover(project).routes if r.extra}
    out: dict[str, list[str]] = {}
    for p in m.platform:
        if p.backend is None:
            continue
        extra = by_extra.get(p.backend)
        if extra is not None:
            data: dict[str, Any] = read_pyproject(project / "pyproject.toml", "pyproject.toml")
            out[p.backend] = list(data["project"]["optional-dependencies"][extra])
        else:
            out[p.backend] = list(merged.packages.requirements)
    return out


def _point_at(path: Path, server: Server, index: str) -> None:
    with_default_index(path, server.url(index), server.pytorch_base)  # PyPI's and PyTorch's parts


@pytest.mark.parametrize("case", [c for c in CASES if c.id.endswith(":lock")])
def test_first_lock_on_a_loopback_index(
    case: Case,
    tmp_path: Path,
    server: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    project = _copy(case, tmp_path, server)
    path = _init(project)
    index = _index_name(case.layout)
    _point_at(path, server, index)
    want = case.expect["lock"]
    if want["exit"] != 2:  # exit 2: the manifest stops the lock before any index is read
        merged, _ = apply_sources(load_manifest(path), path)
        serve_layout(
            server.factory,
            index,
            merged.packages.requirements,
            variants=_variants(project, path),
            pins=first_lock_preferences(project),
            sdist_only=want.get("sdist_only", ()),
        )
    code = main(["lock", str(path), "-q"])
    err = capsys.readouterr().err
    assert code == want["exit"], err
    if "error" in want:
        assert want["error"] in err
    for platform, expected in want.get("pins", {}).items():
        locked = pins((project / requirements_filename(platform)).read_text(encoding="utf-8"))
        assert {name: locked.get(name) for name in expected} == expected
