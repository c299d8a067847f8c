"""`[[platform]] extras`: the project's extras selected on one platform only (a torch variant's
extra, as `uv sync --extra cu124` selects it), besides `[packages] extras` (common to all).
Validated like `[packages] extras`; each platform locks its own extras' requirements; platforms
with different extras are not aligned on one version; the lock inputs record them per platform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from packaging.utils import canonicalize_name
from pydantic import ValidationError

from kernodeck.cli import main
from kernodeck.layers.unselected import unselected
from kernodeck.lock import lock_manifest
from kernodeck.lock.freshness import lock_verdict
from kernodeck.manifest import load_manifest
from kernodeck.manifest.model import pydantic_model
from kernodeck.manifest.schema import Platform
from kernodeck.probe.facts import Distribution, Facts
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins, read_lock
from tests.fixtures.verify_project import load

PYPROJECT = (
    '[project]\nname = "app"\nversion = "1"\ndependencies = ["numpy"]\n'
    "[project.optional-dependencies]\n"
    'cu124 = ["torch>=2.5.1"]\ncu130 = ["torch>=2.9.1"]\ngui = ["rich"]\n'
)
CU124 = {"name": "linux-cu124", "os": "linux", "arch": "x86_64", "backend": "cu124", "extras": ["cu124"]}
CU130 = {"name": "linux-cu130", "os": "linux", "arch": "x86_64", "backend": "cu130", "extras": ["cu130"]}


def _project(
    directory: Path,
    platforms: list[dict[str, Any]],
    *,
    url: str = "http://127.0.0.1:9/simple",
    pytorch: str | None = None,
    packages: dict[str, Any] | None = None,
    pyproject: str | None = PYPROJECT,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if pyproject is not None:
        (directory / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    pk: dict[str, Any] = {"from": ["pyproject.toml"] if pyproject is not None else []}
    pk.update(packages or {})
    pk["index"] = [{"name": "default", "url": url, "default": True}]
    if pytorch is not None:
        pk["pytorch-index"] = pytorch
    doc = {
        "schema-version": 1,
        "reference": {"name": "t", "id": "1"},
        "python": {"version": "3.11"},
        "packages": pk,
        "platform": platforms,
    }
    path = directory / "repro.toml"
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


# --- the key -------------------------------------------------------------------------------------


def test_the_key_is_declared_and_checked_with_and_without_pydantic() -> None:
    assert Platform.model_validate(CU124).extras == ["cu124"]
    assert Platform.model_validate({**CU124, "extras": []}).extras == []
    assert pydantic_model(Platform).model_validate(CU124).extras == ["cu124"]  # type: ignore[attr-defined]
    for bad in ("cu124", ["cu 124"], [1]):
        with pytest.raises(ValidationError) as e:
            Platform.model_validate({**CU124, "extras": bad})
        assert e.value.errors()[0]["loc"][0] == "extras"


def test_a_bad_name_is_located_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _project(tmp_path, [CU124, {**CU130, "extras": ["cu 130"]}])
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "platform[1].extras[0]" in err and "Traceback" not in err


def test_extras_without_a_pyproject_in_from_are_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _project(tmp_path, [CU124], pyproject=None, packages={"requirements": ["numpy"]})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "platform[0].extras" in err and "extras apply to a pyproject.toml" in err


def test_an_extra_the_project_lacks_is_the_error_packages_extras_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _project(tmp_path / "a", [CU124, {**CU130, "extras": ["cu999"]}])
    assert main(["validate", str(path)]) == 2
    own = capsys.readouterr().err
    common = _project(tmp_path / "b", [CU124], packages={"extras": ["cu999"]})
    assert main(["validate", str(common)]) == 2
    said = capsys.readouterr().err
    assert "no extra 'cu999'; the project has: cu124, cu130, gui" in own
    assert own.replace(str(tmp_path / "a"), "") == said.replace(str(tmp_path / "b"), "")
    assert not list((tmp_path / "a").glob("requirements-*"))
    assert main(["lock", str(path), "-q"]) == 2
    assert not list((tmp_path / "a").glob("requirements-*"))


# --- the lock ------------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """numpy 1.26.4 and 2.0.0 on the default index, rich there too; torch 2.5.1 and 2.6.0 for
    cu124 and 2.9.1 for cu130, each on its backend's index (numpy required by each)."""
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    factory = IndexFactory(tmp_path / "index")
    for v in ("1.26.4", "2.0.0"):
        factory.add_wheel("numpy", v)
    factory.add_wheel("rich", "13.0.0")
    for version, backend in (("2.5.1", "cu124"), ("2.6.0", "cu124"), ("2.9.1", "cu130")):
        factory.add_wheel("torch", f"{version}+{backend}", requires=["numpy"], index=backend)
    with factory.serve() as s:
        yield s


def test_each_platform_locks_its_own_extra(tmp_path: Path, server: Server) -> None:
    path = _project(tmp_path / "p", [CU124, CU130], url=server.url(), pytorch=server.pytorch_base)
    result = lock_manifest(path)
    assert result.ok, result
    cu124, cu130 = read_lock(path, "linux-cu124"), read_lock(path, "linux-cu130")
    assert pins(cu124)["torch"] == "2.6.0+cu124" and pins(cu130)["torch"] == "2.9.1+cu130"
    assert pins(cu124)["numpy"] == pins(cu130)["numpy"] == "2.0.0"
    assert "rich" not in pins(cu124)  # an extra neither platform selects
    assert "app (pyproject.toml)" in cu124.split("torch==", 1)[1].split("\n\n", 1)[0]
    # a variant's torch is its own: not said to differ, not held back, not refused by "require"
    assert not result.differences and not result.held
    strict = _project(
        tmp_path / "q",
        [CU124, CU130],
        url=server.url(),
        pytorch=server.pytorch_base,
        packages={"same-versions": "require"},
    )
    assert lock_manifest(strict).ok


def test_common_extras_apply_to_every_platform_beside_its_own(tmp_path: Path, server: Server) -> None:
    path = _project(
        tmp_path, [CU124, CU130], url=server.url(), pytorch=server.pytorch_base, packages={"extras": ["gui"]}
    )
    assert lock_manifest(path).ok
    for name, torch in (("linux-cu124", "2.6.0+cu124"), ("linux-cu130", "2.9.1+cu130")):
        locked = pins(read_lock(path, name))
        assert locked["rich"] == "13.0.0" and locked["torch"] == torch


def test_selected_for_every_platform_the_extras_cannot_all_be_met(tmp_path: Path, server: Server) -> None:
    """What per-platform extras replace: in `[packages] extras` cu124's platform must meet cu130's
    torch>=2.9.1 too, which its index does not have."""
    plats = [{k: v for k, v in p.items() if k != "extras"} for p in (CU124, CU130)]
    path = _project(
        tmp_path,
        plats,
        url=server.url(),
        pytorch=server.pytorch_base,
        packages={"extras": ["cu124", "cu130"]},
    )
    result = lock_manifest(path)
    assert [f.platform for f in result.failed] == ["linux-cu124"]


def _set_extras(path: Path, platform: int, extras: list[str]) -> None:
    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    doc["platform"][platform]["extras"] = extras
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")


@pytest.mark.parametrize(
    ("same", "stale"), [("prefer", {"linux-cu124", "linux-cu130"}), ("no", {"linux-cu130"})]
)
def test_changing_one_platforms_extras_makes_the_locks_stale(
    tmp_path: Path, server: Server, same: str, stale: set[str]
) -> None:
    """Jointly resolved platforms (same-versions "prefer" or "require") record every platform, so
    all go stale: which platforms are aligned together depends on each one's extras. Resolved
    on its own ("no"), only the platform whose extras changed."""
    path = _project(
        tmp_path,
        [CU124, CU130],
        url=server.url(),
        pytorch=server.pytorch_base,
        packages={"same-versions": same},
    )
    assert lock_manifest(path).ok
    fresh = {n: lock_verdict(path, n) for n in ("linux-cu124", "linux-cu130")}
    assert all(v.ok for v in fresh.values()), fresh
    _set_extras(path, 1, ["cu130", "gui"])
    verdicts = {n: lock_verdict(path, n) for n in ("linux-cu124", "linux-cu130")}
    assert {n for n, v in verdicts.items() if not v.ok} == stale
    assert load_manifest(path).platform[1].extras == ["cu130", "gui"]
    assert main(["lock", str(path), "--check", "-q"]) == 1


PYLOCK = (
    'lock-version = "1.0"\ncreated-by = "test"\n'
    '[[packages]]\nname = "torch"\nversion = "2.5.1"\n'
    '[[packages]]\nname = "numpy"\nversion = "1.26.4"\n'
)


def test_the_first_lock_report_explains_a_change_by_the_platforms_own_extra(
    tmp_path: Path, server: Server
) -> None:
    """pylock.toml's torch 2.5.1 is preferred on both; cu130's own extra says why it moved."""
    path = _project(tmp_path, [CU124, CU130], url=server.url(), pytorch=server.pytorch_base)
    (tmp_path / "pylock.toml").write_text(PYLOCK, encoding="utf-8")
    result = lock_manifest(path)
    assert result.ok
    why = {r.platform: {c.name: c.why for c in r.changes} for r in result.adopted}
    assert why["linux-cu130"]["torch"] == "torch>=2.9.1 excludes it"
    assert "2.9.1" not in why["linux-cu124"].get("torch", "")  # cu130's range is not cu124's reason


def test_verify_does_not_offer_the_platforms_own_extra_as_unselected(tmp_path: Path) -> None:
    """The `unlocked` hint names the extras [packages] does not select: a platform's own extras
    are selected there, so only the others are offered."""
    path = _project(tmp_path, [CU124, CU130])
    facts = Facts.model_validate(load("cpu_linux"))
    dists = [Distribution(name="torch", version="2.6.0+cu124"), Distribution(name="rich", version="13.0.0")]
    facts = facts.model_copy(update={"distributions": dists})
    unlocked = {canonicalize_name("torch"), canonicalize_name("rich")}
    manifest = load_manifest(path)
    offered = {p.name for p in unselected(manifest, tmp_path, facts, unlocked, manifest.platform[0].extras)}
    assert offered == {"cu130", "gui"}
    assert {p.name for p in unselected(manifest, tmp_path, facts, unlocked)} == {"cu124", "cu130", "gui"}


def test_a_hand_edited_pin_is_checked_against_the_platforms_own_extra(tmp_path: Path, server: Server) -> None:
    path = _project(tmp_path, [CU124, CU130], url=server.url(), pytorch=server.pytorch_base)
    assert lock_manifest(path).ok
    lock_file = path.parent / "requirements-rebuild-linux-cu124.txt"
    lock_file.write_text(read_lock(path, "linux-cu124").replace("torch==2.6.0+cu124", "torch==2.4.0+cu124"))
    result = lock_manifest(path, check=True)
    reasons = {p.platform: p.reasons for p in result.platforms}
    assert "torch==2.4.0+cu124 does not satisfy the requirement 'torch>=2.5.1'" in reasons["linux-cu124"]
    assert reasons["linux-cu130"] == ()
