"""rebuild: each stage a step, in order, with real venvs, real pip and uv, and a local test index."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.errors import UsageError
from kernodeck.handover.installer_errors import backend_error, first_error
from kernodeck.handover.rebuild import (
    parse_freeze,
    plan_rebuild,
    rebuild,
    version_matches,
)
from kernodeck.report import Report, Status, Step
from tests.fixtures.fresh_lock import stamp_lock
from tests.fixtures.index_factory import IndexFactory, Server

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
STAGES = ["lock", "interpreter", "venv", "pip-version", "install", "contract", "inventory"]

PIP_HASH_ERROR = """\
Looking in indexes: http://127.0.0.1:1/default/simple
Collecting alpha==1.0 (from -r requirements-rebuild-linux.txt (line 4))
  Downloading http://127.0.0.1:1/default/files/alpha-1.0-py3-none-any.whl (1.2 kB)
ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.
    alpha==1.0 from http://127.0.0.1:1/default/files/alpha-1.0-py3-none-any.whl (from -r requirements-rebuild-linux.txt (line 4)):
        Expected sha256 aaaa
             Got        bbbb

"""

UV_HASH_ERROR = """\
  × Failed to download `alpha==1.0`
  ├─▶ Failed to read from the distribution cache
  ╰─▶ Hash mismatch for `alpha==1.0`

      Expected:
        sha256:aaaa

      Computed:
        sha256:bbbb
"""


def test_first_error_keeps_the_package_and_the_hashes() -> None:
    pip = first_error(PIP_HASH_ERROR)
    assert pip.startswith("THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE")
    assert "alpha==1.0" in pip and "Expected sha256 aaaa" in pip and "Got bbbb" in pip
    uv = first_error(UV_HASH_ERROR)
    assert "Hash mismatch for `alpha==1.0`" in uv and "sha256:bbbb" in uv
    assert first_error("all fine\nlast words\n") == "last words"


# Recorded: `pip install -e` and `uv pip install -e` of YOLOv5's checkout (setuptools, flat layout).
PIP_BUILD_ERROR = """\
Obtaining file:///src/yolov5
  Installing build dependencies: started
  Getting requirements to build editable: finished with status 'error'
  error: subprocess-exited-with-error

  × Getting requirements to build editable did not run successfully.
  │ exit code: 1
  ╰─> [54 lines of output]
      /tmp/pip-build-env-x/overlay/lib/python3.11/site-packages/setuptools/config/_apply_pyprojecttoml.py:82: SetuptoolsDeprecationWarning: `project.license` as a TOML table is deprecated
      !!
              Please use a simple string containing a SPDX expression for `project.license`.
      !!
      error: Multiple top-level packages discovered in a flat-layout: ['data', 'models', 'segment', 'classify'].

      To avoid accidental inclusion of unwanted files or directories,
      setuptools will not proceed with this build.
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error
"""

UV_BUILD_ERROR = """\
   Building yolov5 @ file:///src/yolov5
error: Failed to build `yolov5 @ file:///src/yolov5`
  ├─▶ The build backend returned an error
  ╰─▶ Call to `setuptools.build_meta.get_requires_for_build_editable` failed (exit status: 1)

      [stderr]
        dist._finalize_license_expression()
      error: Multiple top-level packages discovered in a flat-layout: ['data', 'models', 'segment', 'classify'].
      To avoid accidental inclusion of unwanted files or directories,

      hint: Build failures usually indicate a problem with the package or the build environment
"""


def test_backend_error_is_what_the_build_backend_said() -> None:
    want = "error: Multiple top-level packages discovered in a flat-layout: ['data', 'models', 'segment', 'classify']."
    assert backend_error(PIP_BUILD_ERROR) == want
    assert backend_error(UV_BUILD_ERROR) == want
    assert backend_error("  File \"x.py\", line 1\nModuleNotFoundError: No module named 'numpy'\n") == (
        "ModuleNotFoundError: No module named 'numpy'"
    )
    assert backend_error(PIP_HASH_ERROR) is None
    assert first_error(PIP_BUILD_ERROR).startswith("subprocess-exited-with-error")  # what it said before


def test_helpers() -> None:
    assert version_matches("3.11", "3.11.7") and version_matches("3.11.7", "3.11.7")
    assert not version_matches("3.11", "3.12.1") and not version_matches("3.11.6", "3.11.7")
    assert parse_freeze("# c\nB==2\na==1\nlocal @ file:///x/y/local-1.0.whl\n") == {
        "a": "1",
        "B": "2",
        "local": "@ local-1.0.whl",
    }


# --- a small project on a local index ---------------------------------------------------------------


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[IndexFactory, Server]]:
    f = IndexFactory(tmp_path / "index")
    f.add_wheel("alpha", "1.0", requires=["beta>=2"])
    f.add_wheel("beta", "2.0")
    with f.serve() as srv:
        yield f, srv


def _project(
    tmp_path: Path,
    server: Server,
    factory: IndexFactory,
    *,
    python: str = PY,
    pins: tuple[str, ...] = ("alpha", "beta"),
) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir(exist_ok=True)
    (proj / "repro.toml").write_text(
        f"""schema-version = 1
[reference]
name = "tiny"
id = "2026-01-01.1"
[python]
version = "{python}"
[[packages.index]]
name = "local"
url = "{server.url()}"
default = true
[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"
[[platform]]
name = "win"
os = "windows"
arch = "x86_64"
"""
    )
    files = {
        "alpha": factory.files_dir() / "alpha-1.0-py3-none-any.whl",
        "beta": factory.files_dir() / "beta-2.0-py3-none-any.whl",
    }
    versions = {"alpha": "1.0", "beta": "2.0"}
    lines = [f"--index-url {server.url()}", "--only-binary :all:", ""]
    for name in pins:
        lines += [f"{name}=={versions[name]} \\", f"    --hash=sha256:{_sha(files[name])}"]
    (proj / "requirements-rebuild-linux-x86_64.txt").write_text("\n".join(lines) + "\n")
    stamp_lock(proj / "repro.toml", "linux-x86_64")
    return proj


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), **extra}


def _status(report: Report) -> dict[str, str]:
    return {s.name: s.status.value for s in report.steps if s.layer == "rebuild"}


class _FakeVerify:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(
        self,
        path: Path,
        *,
        python: str | None = None,
        platform: str | None = None,
        compute: bool = True,
        skip: tuple[str, ...] = (),
    ) -> Report:
        self.calls.append(
            {"path": path, "python": python, "platform": platform, "compute": compute, "skip": skip}
        )
        r = Report(platform=platform)
        r.add(Step.passed("interpreter", "python", observed=PY), Step.passed("application", "sample"))
        r.inventory = {"packages": {"alpha": "1.0"}}
        return r


def test_rebuild_runs_every_stage_then_verify(tmp_path: Path, served: tuple[IndexFactory, Server]) -> None:
    factory, server = served
    proj = _project(tmp_path, server, factory)
    fake = _FakeVerify()
    dest = tmp_path / "venv"
    env = _env(tmp_path, PIP_INDEX_URL="http://127.0.0.1:9/nothing", SOME_API_TOKEN="s3cr3t-value")
    report = rebuild(proj / "repro.toml", dest=dest, verify=fake, environ=env, compute=False)
    assert [s.name for s in report.steps if s.layer == "rebuild"] == STAGES
    assert all(v == "passed" for v in _status(report).values()), report.summary()
    assert [s.layer for s in report.steps[-2:]] == ["interpreter", "application"]
    assert report.ok and report.kind == "rebuild" and report.platform == "linux-x86_64"
    (call,) = fake.calls
    assert call["python"] == str(dest / "bin" / "python") and call["compute"] is False
    inventory = (proj / "installed-after.txt").read_text()
    assert inventory.startswith("# Observed inventory") and "NOT a lock" in inventory
    assert "alpha==1.0" in inventory and "beta==2.0" in inventory
    install = next(s for s in report.steps if s.name == "install")
    assert "--require-hashes" in install.details["command"] and "--isolated" in install.details["command"]
    assert "--only-binary" in install.details["command"]
    assert set(install.details["environment"]) >= {"PATH", "HOME", "PIP_CONFIG_FILE"}
    assert (
        "SOME_API_TOKEN" not in install.details["environment"]
        and "PIP_INDEX_URL" not in install.details["environment"]
    )
    assert report.inventory == {"packages": {"alpha": "1.0"}}
    # the venv ignores itself: a `git add -A` in the project never commits it
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    untracked = subprocess.run(
        ["git", "-C", str(tmp_path), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "repro.toml" in untracked and "venv/" not in untracked, untracked

    # an existing --dest is refused unless --force, which recreates it
    with pytest.raises(UsageError, match="not empty"):
        plan_rebuild(proj, dest=dest)
    marker = dest / "marker"
    marker.write_text("x")
    report = rebuild(proj, dest=dest, force=True, verify=fake, environ=env)
    assert report.ok and not marker.exists()


def test_uv_installer_with_the_same_strictness(tmp_path: Path, served: tuple[IndexFactory, Server]) -> None:
    factory, server = served
    proj = _project(tmp_path, server, factory)
    env = _env(tmp_path)
    report = rebuild(proj, dest=tmp_path / "v1", installer="uv", verify=_FakeVerify(), environ=env)
    assert all(v == "passed" for v in _status(report).values()), report.summary()
    install = next(s for s in report.steps if s.name == "install")
    assert install.details["command"][:3] == ["uv", "pip", "install"]
    assert {"--require-hashes", "--no-deps", "--only-binary"} <= set(install.details["command"])
    factory.tamper("beta-2.0-py3-none-any.whl")
    fresh = _env(tmp_path / "fresh")  # a machine without uv's cache of the good file
    bad = rebuild(proj, dest=tmp_path / "v2", installer="uv", verify=_FakeVerify(), environ=fresh)
    step = next(s for s in bad.steps if s.name == "install")
    # uv streams and unpacks while hashing: a flipped byte shows as a hash mismatch or a broken archive
    assert step.status is Status.FAILED and "beta==2.0" in (step.error or "")
    assert _status(bad)["contract"] == "skipped"


def test_pip_refuses_a_tampered_artifact_and_stops(
    tmp_path: Path, served: tuple[IndexFactory, Server]
) -> None:
    factory, server = served
    proj = _project(tmp_path, server, factory)
    factory.tamper("beta-2.0-py3-none-any.whl")
    fake = _FakeVerify()
    report = rebuild(proj, dest=tmp_path / "v", verify=fake, environ=_env(tmp_path))
    assert _status(report) == {
        "lock": "passed",
        "interpreter": "passed",
        "venv": "passed",
        "pip-version": "passed",
        "install": "failed",
        "contract": "skipped",
        "inventory": "skipped",
        "verify": "skipped",
    }
    install = next(s for s in report.steps if s.name == "install")
    assert "DO NOT MATCH THE HASHES" in (install.error or "") and "beta==2.0" in (install.error or "")
    assert install.hint and "locked" in install.hint
    assert not fake.calls and not report.ok


def test_a_missing_dependency_fails_the_contract_but_inventory_still_runs(
    tmp_path: Path, served: tuple[IndexFactory, Server]
) -> None:
    factory, server = served
    proj = _project(tmp_path, server, factory, pins=("alpha",))
    report = rebuild(proj, dest=tmp_path / "v", verify=_FakeVerify(), environ=_env(tmp_path))
    status = _status(report)
    assert (
        status["install"] == "passed" and status["contract"] == "failed" and status["inventory"] == "passed"
    )
    contract = next(s for s in report.steps if s.name == "contract")
    assert "beta" in (contract.error or "")


def test_wrong_python_is_refused_before_anything_is_created(
    tmp_path: Path, served: tuple[IndexFactory, Server]
) -> None:
    factory, server = served
    proj = _project(tmp_path, server, factory, python="3.9")
    dest = tmp_path / "v"
    report = rebuild(proj, dest=dest, python=sys.executable, verify=_FakeVerify(), environ=_env(tmp_path))
    status = _status(report)
    assert status["interpreter"] == "failed" and all(status[s] == "skipped" for s in STAGES[2:])
    step = report.steps[1]
    assert "does not satisfy" in (step.error or "") and "3.9" in (step.error or "")
    assert not dest.exists()
    report = rebuild(
        proj, dest=dest, python=str(tmp_path / "no-python"), verify=_FakeVerify(), environ=_env(tmp_path)
    )
    assert _status(report)["interpreter"] == "failed" and not dest.exists()


def test_usage_errors(tmp_path: Path, served: tuple[IndexFactory, Server]) -> None:
    factory, server = served
    proj = _project(tmp_path, server, factory)
    with pytest.raises(UsageError, match="no platform"):
        plan_rebuild(proj, platform="nope")
    with pytest.raises(UsageError, match=r"requirements-rebuild-win\.txt"):
        plan_rebuild(proj, platform="win")
    with pytest.raises(UsageError, match="no manifest"):
        plan_rebuild(tmp_path / "missing")
    with pytest.raises(UsageError, match="refusing to delete"):
        plan_rebuild(proj, dest=proj, force=True)
    res = CliRunner().invoke(cli, ["rebuild", str(proj), "--dest", str(proj)])
    assert res.exit_code == 2 and "not empty" in res.output


def test_installer_uv_without_uv_is_a_usage_error_before_anything_is_created(
    tmp_path: Path, served: tuple[IndexFactory, Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernodeck installed where no uv sits beside its Python (a pipx or plain venv install) and
    none on PATH: said at once, exit 2, not as a failed install step after the venv was made."""
    factory, server = served
    proj = _project(tmp_path, server, factory)
    real_uv = Path(sys.executable).parent / "uv"  # the test environment's own
    assert real_uv.is_file()
    apart = tmp_path / "apart" / "bin"
    apart.mkdir(parents=True)
    (apart / "python").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(apart / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    dest = tmp_path / "v"
    with pytest.raises(UsageError) as e:
        plan_rebuild(proj, dest=dest, installer="uv")
    assert e.value.message == f"--installer uv: no uv next to {apart / 'python'} or on PATH"
    assert "--installer pip" in (e.value.hint or "")
    res = CliRunner().invoke(cli, ["rebuild", str(proj), "--dest", str(dest), "--installer", "uv"])
    assert res.exit_code == 2 and "no uv next to" in res.output and "Traceback" not in res.output
    assert not dest.exists()
    # uv on PATH is enough
    on_path = tmp_path / "tools"
    on_path.mkdir()
    (on_path / "uv").symlink_to(real_uv)
    monkeypatch.setenv("PATH", str(on_path))
    assert plan_rebuild(proj, dest=dest, installer="uv").installer == "uv"


def test_a_lock_merged_with_conflicts_is_refused_before_anything_is_created(
    tmp_path: Path, served: tuple[IndexFactory, Server]
) -> None:
    factory, server = served
    proj = _project(tmp_path, server, factory)
    lock = next(proj.glob("requirements-rebuild-*.txt"))
    lines = lock.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "==" in line)
    lines[first:first] = ["<<<<<<< HEAD\n", "=======\n", ">>>>>>> theirs\n"]
    lock.write_text("".join(lines))
    dest = tmp_path / "v"
    res = CliRunner().invoke(cli, ["rebuild", str(proj), "--dest", str(dest)])
    assert res.exit_code == 2, res.output
    assert (
        f"{lock.name}:{first + 1}: git merge conflict marker" in res.output and "kernodeck lock" in res.output
    )
    assert "Traceback" not in res.output and not dest.exists()


def test_a_bundle_outside_git_carries_its_code_revision(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from kernodeck.api import verify
    from kernodeck.capture import capture
    from kernodeck.handover.bundle import write_bundle

    proj = tmp_path / "author"
    proj.mkdir()
    (proj / "app.py").write_text("print('hi')\n")
    (proj / "conf.yaml").write_text("a: 1\n")
    conf_sha = _sha(proj / "conf.yaml")
    (proj / "repro.toml").write_text(
        f"""schema-version = 1
[reference]
name = "c"
id = "2026-01-01.1"
[code]
revision = "{"0" * 40}"
config = [{{ path = "conf.yaml", sha256 = "{conf_sha}" }}]
[python]
version = "{PY}"
[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"
"""
    )
    (proj / "requirements-rebuild-linux-x86_64.txt").write_text("# empty lock\n")
    stamp_lock(proj / "repro.toml", "linux-x86_64")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c"]):
        subprocess.run([*git, *args], cwd=proj, check=True, capture_output=True)
    capture(proj, system_probe=None)
    for args in (["add", "-A"], ["commit", "-q", "-m", "captured"]):
        subprocess.run([*git, *args], cwd=proj, check=True, capture_output=True)
    capture(proj, system_probe=None)  # record the commit that holds the capture; the tree is dirty again
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=proj, capture_output=True, text=True
    ).stdout.strip()
    write_bundle(tmp_path / "b", manifest=proj, environ={}, home=tmp_path)
    clean = tmp_path / "clean"
    shutil.copytree(tmp_path / "b", clean)
    steps = verify(clean / "repro.toml", only=["code"]).steps
    got = {s.name: (s.status.value, s.observed) for s in steps}
    assert got["revision"] == ("passed", head)
    # repro.toml changed after the commit, but Kernodeck's own files are not code: the tree is clean
    assert got["clean-tree"][0] == "passed"
    assert got["files"][0] == "passed"
    assert got["config:conf.yaml"] == ("passed", conf_sha)
    # a code file changed in the author's checkout after the capture is a dirty tree there
    (proj / "app.py").write_text("print('changed')\n")
    statuses = {s.name: s.status.value for s in verify(proj / "repro.toml", only=["code"]).steps}
    assert statuses["clean-tree"] == "failed"
