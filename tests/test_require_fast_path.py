"""require()'s fast paths keep every verdict: `import torch` while the environment probe runs
(only where torch would be imported in this process anyway, never in the wrong environment), a
lock file parsed once while its bytes are the same, and the warm RECORD cache. A changed
distribution version, a changed file listed in RECORD and a changed lock still fail a warm
require() on a real venv. (The times are benchmarks/require.py's; nothing here is timed.)"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from kernodeck.api import _import_torch_ahead, require
from kernodeck.errors import CheckFailed
from kernodeck.layers.packages import installed_names, mostly_installed
from kernodeck.lockfile.read import read_lockfile
from kernodeck.manifest.load import load_manifest
from kernodeck.probe.runner import RealProbe
from tests.fixtures import installed_env
from tests.fixtures.installed_env import Env

ROOT = Path(__file__).resolve().parents[1]
ARCH = platform.machine()


def _platforms(*names: str) -> str:
    """A `[[platform]]` each, of this machine's arch unless the name says `other-arch`."""
    other = "aarch64" if ARCH != "aarch64" else "x86_64"
    return "".join(
        f'[[platform]]\nname = "{n}"\nos = "linux"\narch = "{other if "other-arch" in n else ARCH}"\n'
        'backend = "cpu"\n'
        for n in names
    )


def _project(folder: Path, pins: dict[str, str], *platforms: str) -> Path:
    """repro.toml with `platforms` (default one, "here") and each one's lock pinning `pins`."""
    platforms = platforms or ("here",)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "repro.toml"
    manifest.write_text(
        'schema-version = 1\n[reference]\nname = "fast"\nid = "1"\n[python]\n'
        f'version = "{sys.version_info.major}.{sys.version_info.minor}"\n'
        '[packages]\nrequirements = ["torch"]\n' + _platforms(*platforms)
    )
    for name in platforms:
        _lock(folder, name, pins)
    return manifest


def _lock(folder: Path, platform: str, pins: dict[str, str]) -> None:
    lines = "".join(f"{n}=={v} \\\n    --hash=sha256:{'0' * 64}\n" for n, v in pins.items())
    (folder / f"requirements-rebuild-{platform}.txt").write_text(f"# platform: {platform}\n\n{lines}")


def _site(folder: Path, dists: dict[str, str]) -> Path:
    """A folder of real metadata folders, as pip names them (`Name_With_Underscores-1.0.dist-info`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, version in dists.items():
        meta = folder / f"{name.replace('-', '_')}-{version}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    return folder


PINS = {"torch": "2.0", "numpy": "1.0", "Jinja2": "3.0", "filelock": "3.0", "sympy": "1.0"}


def test_installed_names_are_read_from_the_metadata_folder_names(tmp_path: Path) -> None:
    site = _site(tmp_path / "site", {"Jinja2": "3.0", "typing-extensions": "4.0"})
    (site / "old_style-0.1-py3.11.egg-info").mkdir()
    (site / "flat.egg-info").write_text("Name: flat\n")
    (site / "notadist").mkdir()
    names = installed_names([str(site), str(tmp_path / "missing"), str(site / "x.zip")])
    assert names == {"jinja2", "typing-extensions", "old-style", "flat"}


def test_mostly_installed_follows_the_wrong_environment_rule(tmp_path: Path) -> None:
    manifest = _project(tmp_path / "p", PINS)
    here = load_manifest(manifest).platform[0]
    every = {"torch", "numpy", "jinja2", "filelock", "sympy"}
    markers = {"sys_platform": "linux", "python_version": "3.11"}
    assert mostly_installed(manifest, here, set(every), markers)
    assert mostly_installed(manifest, here, every - {"numpy", "sympy"}, markers)  # 2 of 5 missing
    assert not mostly_installed(manifest, here, {"torch", "numpy"}, markers)  # 3 of 5 missing
    (tmp_path / "p" / "requirements-rebuild-here.txt").write_text("not a pin\n")
    assert not mostly_installed(manifest, here, set(every), markers)  # unreadable: no early import
    (tmp_path / "p" / "requirements-rebuild-here.txt").unlink()
    assert not mostly_installed(manifest, here, set(every), markers)


@pytest.fixture
def this_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> RealProbe:
    """A RealProbe of the running interpreter whose early `import torch` is only recorded; sys.path
    is a folder of real metadata folders for the five pins, torch is not imported yet."""
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    site = _site(tmp_path / "site", {n: v for n, v in PINS.items()})
    monkeypatch.setattr(sys, "path", [str(site)])
    probe = RealProbe()
    assert probe.torch_in_process
    calls: list[str] = []
    monkeypatch.setattr(probe, "import_torch_ahead", lambda: calls.append("ahead"))
    probe.calls = calls  # type: ignore[attr-defined]
    return probe


def _ahead(probe: RealProbe, manifest: Path, platform: str | None = None, **kw: tuple[str, ...]) -> list[str]:
    _import_torch_ahead(
        probe, load_manifest(manifest), manifest, platform, kw.get("only", ()), kw.get("skip", ())
    )
    return probe.calls  # type: ignore[attr-defined,no-any-return]


def test_torch_is_imported_ahead_where_it_would_be_imported_in_process_anyway(
    this_interpreter: RealProbe, tmp_path: Path
) -> None:
    assert _ahead(this_interpreter, _project(tmp_path / "one", PINS)) == ["ahead"]


def test_torch_is_not_imported_ahead_in_the_wrong_environment(
    this_interpreter: RealProbe, tmp_path: Path
) -> None:
    missing = {
        **PINS,
        "absent-a": "1",
        "absent-b": "1",
        "absent-c": "1",
        "absent-d": "1",
        "absent-e": "1",
        "absent-f": "1",
    }
    assert _ahead(this_interpreter, _project(tmp_path / "wrong", missing)) == []


def test_torch_is_not_imported_ahead_without_the_torch_layers(
    this_interpreter: RealProbe, tmp_path: Path
) -> None:
    one = _project(tmp_path / "one", PINS)
    assert _ahead(this_interpreter, one, only=("packages", "system")) == []
    assert _ahead(this_interpreter, one, skip=("backend", "device")) == []


def test_torch_is_imported_ahead_once(
    this_interpreter: RealProbe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = _project(tmp_path / "one", PINS)
    assert _ahead(this_interpreter, one) == ["ahead"]
    monkeypatch.setitem(sys.modules, "torch", object())  # (or the script imported it first)
    assert _ahead(this_interpreter, one) == ["ahead"]


WRONG = {"absent-a": "1", "absent-b": "1", "absent-c": "1", "absent-d": "1", "absent-e": "1", "absent-f": "1"}


def test_with_several_platforms_each_one_the_facts_may_choose_must_be_installed(
    this_interpreter: RealProbe, tmp_path: Path
) -> None:
    two = _project(tmp_path / "two", PINS, "cpu-a", "cpu-b", "other-arch")
    _lock(tmp_path / "two", "other-arch", WRONG)  # never chosen on this machine
    assert _ahead(this_interpreter, two) == ["ahead"]
    _lock(tmp_path / "two", "cpu-b", {**PINS, **WRONG})  # the facts may choose cpu-b: wrong there
    this_interpreter.calls.clear()  # type: ignore[attr-defined]
    assert _ahead(this_interpreter, two) == []
    assert _ahead(this_interpreter, two, platform="cpu-a") == ["ahead"]  # named: only cpu-a counts
    only_other = _project(tmp_path / "other", PINS, "other-arch", "other-arch-2")
    this_interpreter.calls.clear()  # type: ignore[attr-defined]
    assert _ahead(this_interpreter, only_other) == []  # none of this arch: the facts will say why


def test_an_isolated_torch_is_never_imported_here(this_interpreter: RealProbe, tmp_path: Path) -> None:
    isolated = RealProbe(isolate_torch=True)
    isolated.calls = this_interpreter.calls  # type: ignore[attr-defined]
    real = isolated.import_torch_ahead
    isolated.import_torch_ahead()  # the method itself refuses: torch runs in its own process
    assert isolated._ahead is None and real is not None
    assert _ahead(isolated, _project(tmp_path / "one", PINS)) == []


def test_a_lock_is_parsed_again_when_its_bytes_change(tmp_path: Path) -> None:
    lock = tmp_path / "requirements-rebuild-here.txt"
    lock.write_text("# platform: here\n\nnumpy==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    first = read_lockfile(lock)
    first.pins.clear()
    first.header.clear()
    again = read_lockfile(lock)  # each caller has its own LockFile: the memo is not changed
    assert [(p.name, p.version) for p in again.pins] == [("numpy", "1.0")]
    assert again.platform == "here"
    stat = lock.stat()
    lock.write_text(lock.read_text().replace("1.0", "2.0"))  # same size
    os.utime(lock, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    assert [(p.name, p.version) for p in read_lockfile(lock).pins] == [("numpy", "2.0")]


# --- a real venv: a warm require() still fails on every change -----------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return installed_env.build(tmp_path_factory.mktemp("fast-env"))


@pytest.fixture
def env(built: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    mine = installed_env.copy(built, tmp_path)
    _warm(mine)
    return mine


def _warm(env: Env) -> None:
    """Two passing runs: the RECORD cache and the lock memo are warm."""
    for _ in range(2):
        report = require(env.manifest, python=str(env.python), only=["packages"])
        assert report.ok, report.summary()


def _failures(env: Env) -> list[str]:
    with pytest.raises(CheckFailed) as info:
        require(env.manifest, python=str(env.python), only=["packages"])
    report = info.value.report
    assert report is not None
    return [f"{s.name}: {s.error}" for s in report.steps if s.status.value == "failed"]


def test_a_warm_require_fails_when_a_distribution_version_changes(env: Env) -> None:
    meta = next(env.site.glob(f"{installed_env.NAME}-*.dist-info")) / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 1.0", "Version: 1.1"))
    failed = _failures(env)
    assert any("1.1" in f and installed_env.NAME in f for f in failed), failed


def test_a_warm_require_fails_when_a_file_listed_in_record_changes(env: Env) -> None:
    core = env.site / installed_env.NAME / "core.py"
    stat = core.stat()
    core.write_bytes(core.read_bytes().replace(b"42", b"43"))  # same size
    os.utime(core, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime
    failed = _failures(env)
    assert any("core.py" in f and "content differs" in f for f in failed), failed


def test_a_warm_require_fails_when_the_lock_changes(env: Env) -> None:
    lock = env.project / f"requirements-rebuild-{installed_env.platform_name()}.txt"
    stat = lock.stat()
    lock.write_text(lock.read_text().replace("==1.0", "==1.2"))  # same size
    os.utime(lock, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    failed = _failures(env)
    assert any("1.2" in f for f in failed), failed


# --- the real torch: imported while the probe runs, its import time reported -------------------


def _torch_pins() -> dict[str, str]:
    """torch and what it needs, at the versions installed here."""
    pins = {"torch": metadata.version("torch")}
    for name in ("filelock", "typing-extensions", "sympy", "networkx", "jinja2", "fsspec"):
        pins[name] = metadata.version(name)
    return pins


SCRIPT = """
import json, sys
from kernodeck.probe import runner
order = []
real_ahead, real_collect = runner.RealProbe.import_torch_ahead, runner.RealProbe.collect
def ahead(self):
    real_ahead(self)
    order.append(["ahead", self._ahead.seconds])
def collect(self, request):
    order.append(["collect", "torch" in sys.modules])
    return real_collect(self, request)
runner.RealProbe.import_torch_ahead, runner.RealProbe.collect = ahead, collect
import kernodeck
report = kernodeck.require(sys.argv[1], only=["backend"])
print(json.dumps({
    "order": order,
    "steps": {s.name: [s.status.value, s.seconds] for s in report.steps},
}))
"""


@pytest.mark.slow
def test_require_before_torch_imports_it_while_the_probe_runs(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # the dev environment has the CPU build
    manifest = _project(tmp_path / "p", _torch_pins())
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHONPATH=str(ROOT / "src"), KERNODECK_CACHE_DIR=str(tmp_path / "cache"), NO_COLOR="1")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(manifest)], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    (ahead, seconds), (collect, torch_there) = got["order"]
    assert (ahead, collect, torch_there) == ("ahead", "collect", True)  # imported before the facts
    status, reported = got["steps"]["torch-import"]
    assert status == "passed"
    assert reported == round(seconds, 6)  # the import stage's time is the early import's


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ModuleNotFoundError("No module named 'torch'"), "not-installed"),
        (OSError("libtorch_cpu.so: cannot open shared object file"), "import-failed"),
        (SystemExit(3), "import-failed"),
    ],
)
def test_an_import_that_failed_ahead_is_the_import_stages_failure(error: BaseException, status: str) -> None:
    from kernodeck.probe.runner import ProbeRequest, torch_in_process
    from kernodeck.probe.torch_probe import Imported, first_error

    facts = torch_in_process(ProbeRequest(compute=False), None, Imported(None, error, 0.5))
    assert (facts.status, facts.error) == (status, first_error(error))
    assert facts.mode == "in-process"


def test_an_import_ahead_keeps_its_failure_as_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernodeck.probe import torch_probe

    def broken() -> None:
        raise ImportError("partially initialized module 'torch'")

    monkeypatch.setattr(torch_probe, "import_torch", broken)
    got = torch_probe.import_ahead()
    assert got.module is None and isinstance(got.error, ImportError)
    with pytest.raises(ImportError, match="partially initialized"):
        got.importer()

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(torch_probe, "import_torch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        torch_probe.import_ahead()


# --- the probe reads METADATA's headers only ------------------------------------------------------


@pytest.mark.parametrize("size", [100, 16_382, 16_383, 16_384, 16_385, 40_000])
def test_only_the_headers_of_metadata_are_read(tmp_path: Path, size: int) -> None:
    from kernodeck.probe import script

    text = "Name: x\nClassifier: " + "é" * (size // 2) + "\n\nName: in-the-body\nVersion: 9\n"
    file = tmp_path / "METADATA"
    file.write_text(text, "utf-8")
    assert script._read_headers(str(file), 1 << 22) == text[: text.index("\n\n") + 2]
    assert script._headers(script._read_headers(str(file), 1 << 22) or "") == {"name": ["x"]}
    no_body = text.replace("\n\n", "\n")
    file.write_text(no_body, "utf-8")
    assert script._read_headers(str(file), 1 << 22) == no_body  # no empty line: all of it
    assert script._read_headers(str(file), 5) == no_body[:5]


def test_the_kept_metadata_fields_and_their_folded_lines() -> None:
    from kernodeck.probe import script

    text = (
        "Metadata-Version: 2.1\nname : a\nVERSION:\t1 \nLicense: MIT\n  folded into License\n"
        "Requires-Dist: b>=1;\n  extra == 'x'\nno colon here\n\tstill Requires-Dist\n"
        "Provides-Extra: x\nRequires-Python: >=3.10\nProject-URL: a, b\n\nName: body\n"
    )
    assert script._headers(text) == {
        "name": ["a"],
        "version": ["1"],
        "requires-dist": ["b>=1; extra == 'x' still Requires-Dist"],
        "provides-extra": ["x"],
        "requires-python": [">=3.10"],
    }
    crlf = "Name: a\r\nVersion: 1\r\n\r\nName: body\r\n"
    assert script._headers(crlf) == {"name": ["a"], "version": ["1"]}
