"""Which interpreter verify, check, doctor and require() look at (kernodeck.interpreters).

Real venvs made with `python -m venv`, real wheels installed with pip; Kernodeck runs from the
interpreter running the tests (another environment), as it does when installed with pipx or
`uv tool`. The project venv is "activated" by setting VIRTUAL_ENV (or CONDA_PREFIX), as activation
scripts do.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import kernodeck
from kernodeck.errors import UsageError
from kernodeck.interpreters import (
    REASONS,
    Interpreter,
    Source,
    choose,
    env_python,
    given,
    resolve,
    tool_environment,
)
from kernodeck.layers.packages import is_wrong_environment
from tests.fixtures.index_factory import build_wheel_bytes

SRC = str(Path(kernodeck.__file__).resolve().parents[1])
PACKAGES = ("alpha", "beta", "gamma", "delta")
TIMEOUT = 240
VENV_REASON = REASONS[Source.VIRTUAL_ENV]
CONDA_REASON = REASONS[Source.CONDA_PREFIX]


@dataclass(frozen=True)
class World:
    project: Path  # repro.toml, its lock, one [[check]] that imports alpha
    good: Path  # a venv with the locked packages installed
    empty: Path  # a venv with none of them
    conda: Path  # a second environment folder holding the locked packages (CONDA_PREFIX)

    def python(self, env: Path) -> str:
        return str(env_python(env))


def _pip(python: str, *args: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            *args,
            "--isolated",
            "--disable-pip-version-check",
            "-q",
        ],
        check=True,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
        timeout=TIMEOUT,
    )


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=TIMEOUT)
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("interp")
    wheels = root / "wheels"
    wheels.mkdir()
    hashes: dict[str, str] = {}
    for name in PACKAGES:
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n"
        filename, data = build_wheel_bytes(name, "1.0", metadata=meta)
        (wheels / filename).write_bytes(data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    good, empty, conda = _venv(root / "good"), _venv(root / "empty"), _venv(root / "conda")
    for env in (good, conda):
        _pip(str(env_python(env)), "install", "--no-index", "--find-links", str(wheels), *PACKAGES)
    project = root / "project"
    project.mkdir()
    plat = f"linux-{os.uname().machine}"
    (project / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "interp"\nid = "1"\n[python]\n'
        f'version = "{sys.version_info.major}.{sys.version_info.minor}"\n'
        f"[packages]\nrequirements = {json.dumps(list(PACKAGES))}\n"
        f'[[platform]]\nname = "{plat}"\nos = "linux"\narch = "{os.uname().machine}"\n'
        '[[check]]\nname = "imports"\nrun = ["python", "-c", "import alpha, delta"]\ntimeout = 60\n'
    )
    lines = [f"# platform: {plat}", "--only-binary :all:", ""]
    for name in PACKAGES:
        lines += [f"{name}==1.0 \\", f"    --hash=sha256:{hashes[name]}", "    # via -r repro.toml"]
    (project / f"requirements-rebuild-{plat}.txt").write_text("\n".join(lines) + "\n")
    return World(project=project, good=good, empty=empty, conda=conda)


def _env(world: World, **activated: str) -> dict[str, str]:
    """This process's environment with Kernodeck's sources first and only the given activations."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["PYTHONPATH"] = SRC
    env["NO_COLOR"] = "1"
    env["KERNODECK_CACHE_DIR"] = str(world.project.parent / "cache")
    env.update(activated)
    return env


def _kernodeck(world: World, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernodeck", *args],
        cwd=world.project,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def _first_line(text: str) -> str:
    """The report's first line, with the continuation lines the renderer wrapped it into."""
    lines = text.splitlines()
    if not lines:
        return ""
    first = [lines[0]]
    for line in lines[1:]:
        if not line.startswith("  "):
            break
        first.append(line.strip())
    return " ".join(first)


# --- the choice itself ---------------------------------------------------------------------------


def test_order_is_option_then_venv_then_conda_then_running(world: World) -> None:
    good, conda = world.python(world.good), world.python(world.conda)
    both = {"VIRTUAL_ENV": str(world.good), "CONDA_PREFIX": str(world.conda)}
    assert choose(conda, environ=both) == Interpreter(conda, Source.OPTION, "--python")
    assert choose(None, environ=both) == Interpreter(good, Source.VIRTUAL_ENV, VENV_REASON)
    assert choose(None, environ={"CONDA_PREFIX": str(world.conda)}) == Interpreter(
        conda, Source.CONDA_PREFIX, CONDA_REASON
    )
    running = choose(None, environ={})
    assert running.path == sys.executable and running.source is Source.RUNNING
    assert running.reason == "the interpreter running Kernodeck"
    # an environment folder means its interpreter
    assert choose(world.good, environ={}).path == good


def test_an_activated_environment_without_an_interpreter_is_passed_over(tmp_path: Path, world: World) -> None:
    gone = tmp_path / "deleted-venv"
    chosen = choose(None, environ={"VIRTUAL_ENV": str(gone), "CONDA_PREFIX": str(world.conda)})
    assert chosen.path == world.python(world.conda) and chosen.source is Source.CONDA_PREFIX
    assert f"VIRTUAL_ENV={gone} has no interpreter" in chosen.reason
    assert choose(None, environ={"VIRTUAL_ENV": str(gone)}).source is Source.RUNNING


def test_a_bad_python_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no interpreter at that path") as missing:
        choose(tmp_path / "missing" / "python", environ={})
    assert missing.value.exit_code == 2
    with pytest.raises(UsageError, match="on PATH"):
        choose("python-that-does-not-exist-9", environ={})
    not_exec = tmp_path / "python"
    not_exec.write_text("#!/bin/sh\n")
    not_exec.chmod(0o644)
    with pytest.raises(UsageError, match="not an executable interpreter"):
        choose(str(not_exec), environ={})
    with pytest.raises(UsageError, match="is empty"):
        resolve("")


def test_a_given_interpreter_keeps_its_reason(world: World) -> None:
    rebuilt = given(world.python(world.good), "the rebuilt environment")
    assert rebuilt.source is Source.GIVEN and rebuilt.describe().endswith("(the rebuilt environment)")
    assert choose(rebuilt, environ={"VIRTUAL_ENV": str(world.empty)}) is rebuilt


# --- every command looks at the activated venv and names it ----------------------------------------


def test_verify_checks_the_activated_venv_and_names_it(world: World) -> None:
    p = _kernodeck(
        world, "verify", "--no-compute", "--json", "report.json", env=_env(world, VIRTUAL_ENV=str(world.good))
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == f"python: {world.python(world.good)} ({VENV_REASON})"
    data = json.loads((world.project / "report.json").read_text())
    assert data["interpreter"] == {
        "path": world.python(world.good),
        "source": "virtual-env",
        "reason": VENV_REASON,
    }
    assert {d["name"] for d in data["inventory"]["distributions"]} >= set(PACKAGES)
    assert next(s for s in data["steps"] if s["name"] == "imports: run")["status"] == "passed"


def test_doctor_describes_the_activated_venv(world: World) -> None:
    env = _env(world, VIRTUAL_ENV=str(world.good))
    p = _kernodeck(world, "doctor", "--no-compute", env=env)
    assert p.returncode == 0, p.stderr
    assert _first_line(p.stdout) == f"python: {world.python(world.good)} ({VENV_REASON})"
    data = json.loads(_kernodeck(world, "doctor", "--no-compute", "--json", "-", env=env).stdout)
    assert data["interpreter"]["path"] == world.python(world.good)
    names = next(s for s in data["steps"] if s["name"] == "distributions")["details"]["names"]
    assert set(PACKAGES) <= set(names)


def test_check_runs_the_checks_with_the_activated_venv(world: World) -> None:
    p = _kernodeck(world, "check", env=_env(world, VIRTUAL_ENV=str(world.good)))
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == f"python: {world.python(world.good)} ({VENV_REASON})"
    p = _kernodeck(world, "check", env=_env(world, VIRTUAL_ENV=str(world.empty)))
    assert p.returncode == 1
    assert _first_line(p.stdout) == f"python: {world.python(world.empty)} ({VENV_REASON})"
    assert "ModuleNotFoundError: No module named 'alpha'" in " ".join(p.stdout.split())


REQUIRE = """
import sys
import kernodeck
from kernodeck.errors import CheckFailed
try:
    report = kernodeck.require("repro.toml", compute=False)
except CheckFailed as e:
    print("FAILED")
    print(e.render())
else:
    print("OK", report.interpreter.path, report.interpreter.source)
"""


def test_require_checks_the_activated_venv(world: World) -> None:
    def run(**activated: str) -> str:
        p = subprocess.run(
            [sys.executable, "-c", REQUIRE],
            cwd=world.project,
            env=_env(world, **activated),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout

    assert run(VIRTUAL_ENV=str(world.good)).split() == ["OK", world.python(world.good), "virtual-env"]
    out = run(VIRTUAL_ENV=str(world.empty))
    assert out.startswith("FAILED")
    assert f"checked {world.python(world.empty)} ({VENV_REASON})" in out
    assert "this is probably not the project's environment" in out


def test_python_option_wins_over_the_activated_environments(world: World) -> None:
    env = _env(world, VIRTUAL_ENV=str(world.empty), CONDA_PREFIX=str(world.empty))
    p = _kernodeck(world, "verify", "--no-compute", "--python", world.python(world.good), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == f"python: {world.python(world.good)} (--python)"
    p = _kernodeck(world, "check", "--python", world.python(world.good), env=env)
    assert p.returncode == 0 and _first_line(p.stdout).endswith("(--python)")
    p = _kernodeck(world, "doctor", "--no-compute", "--python", world.python(world.good), env=env)
    assert _first_line(p.stdout) == f"python: {world.python(world.good)} (--python)"


def test_conda_prefix_is_used_without_a_venv(world: World) -> None:
    env = _env(world, CONDA_PREFIX=str(world.conda))
    p = _kernodeck(world, "verify", "--no-compute", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == f"python: {world.python(world.conda)} ({CONDA_REASON})"
    p = _kernodeck(world, "check", env=env)
    assert p.returncode == 0 and _first_line(p.stdout).endswith(f"({CONDA_REASON})")


def test_a_bad_python_option_exits_2_without_a_traceback(world: World, tmp_path: Path) -> None:
    for cmd in (["verify"], ["check"], ["doctor"]):
        p = _kernodeck(world, *cmd, "--python", str(tmp_path / "nope" / "python"), env=_env(world))
        assert p.returncode == 2, (cmd, p.stdout, p.stderr)
        assert "no interpreter at that path" in p.stderr and "Traceback" not in p.stderr


def test_capture_observes_the_activated_venv(world: World) -> None:
    p = _kernodeck(world, "capture", "--dry-run", env=_env(world, VIRTUAL_ENV=str(world.good)))
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == f"python: {world.python(world.good)} ({VENV_REASON})"


def test_rebuilds_verify_step_checks_the_rebuilt_venv_whatever_is_activated(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kernodeck.handover.rebuild import REBUILT_REASON, _verify_rebuilt

    monkeypatch.setenv("VIRTUAL_ENV", str(world.empty))
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    report = _verify_rebuilt(world.project / "repro.toml", python=world.python(world.good), compute=False)
    assert report.ok, report.summary()
    assert report.interpreter is not None
    assert (report.interpreter.path, report.interpreter.source, report.interpreter.reason) == (
        world.python(world.good),
        "given",
        REBUILT_REASON,
    )


# --- the wrong environment -----------------------------------------------------------------------


@pytest.mark.parametrize("activated", ["empty venv", "none (Kernodeck's own interpreter)"])
def test_wrong_environment_is_said_once_with_one_folded_step(world: World, activated: str) -> None:
    env = _env(world, VIRTUAL_ENV=str(world.empty)) if activated == "empty venv" else _env(world)
    python = world.python(world.empty) if activated == "empty venv" else sys.executable
    reason = VENV_REASON if activated == "empty venv" else REASONS[Source.RUNNING]
    p = _kernodeck(world, "verify", "--no-compute", env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) < 40, p.stdout
    assert _first_line(p.stdout) == f"python: {python} ({reason})"
    notice = (
        f"this is probably not the project's environment ({python}, {reason}); "
        "activate the project's venv or pass --python PATH"
    )
    flat = " ".join(p.stdout.split())
    # the notice sits under the interpreter it is about; then the platform verify chose, then the title
    head = f"python: {python} ({reason}) ! {notice} "
    assert flat.startswith(head), flat[:400]
    rest = flat[len(head) :]
    assert rest.startswith("platform: linux-x86_64 (") and ") kernodeck verify" in rest[:200], rest[:200]
    assert p.stdout.count("probably not the project's environment") == 1

    data = json.loads(_kernodeck(world, "verify", "--no-compute", "--json", "-", env=env).stdout)
    assert data["notices"] == [notice]
    folded = [s for s in data["steps"] if s["details"].get("cause") == "wrong-environment"]
    assert len(folded) == 1 and folded[0]["layer"] == "packages" and folded[0]["status"] == "failed"
    assert [m["name"] for m in folded[0]["details"]["missing"]] == list(PACKAGES)
    assert folded[0]["error"] == f"4 of 4 locked packages are not installed: {', '.join(PACKAGES)}"
    assert not [s for s in data["steps"] if s["name"].startswith("pin:")]
    # the empty venv has no pip (made --without-pip, as uv makes venvs): the hint installs with uv
    install = f"uv pip install --python {python}" if activated == "empty venv" else f"{python} -m pip install"
    assert folded[0]["details"]["install"].startswith(f"{install} --no-deps --require-hashes"), folded[0]
    # the layers after packages are not run, each said in one line
    later = [
        s for s in data["steps"] if s["layer"] in ("contract", "system", "backend", "device", "application")
    ]
    assert later and all(s["status"] == "skipped" for s in later)
    assert all(s["details"]["cause"] == "not-the-project-environment" for s in later)
    assert "resume" not in {s["layer"] for s in data["steps"]}  # nothing declared, nothing skipped
    assert data["inventory"]["torch"]["status"] == "not-run"  # no `import torch` in the wrong place
    assert "application: - skipped: not run: the packages layer found another environment" in flat


def test_wrong_environment_threshold() -> None:
    assert not is_wrong_environment(2, 2)  # too few to say
    assert is_wrong_environment(3, 5)
    assert not is_wrong_environment(3, 6)  # half is not most
    assert is_wrong_environment(50, 60)
    assert not is_wrong_environment(0, 0)


def test_a_few_missing_packages_stay_one_step_each(world: World) -> None:
    env = _env(world, VIRTUAL_ENV=str(world.good))
    _pip(world.python(world.good), "uninstall", "-y", "beta")
    try:
        data = json.loads(_kernodeck(world, "verify", "--no-compute", "--json", "-", env=env).stdout)
    finally:
        wheels = world.project.parent / "wheels"
        _pip(world.python(world.good), "install", "--no-index", "--find-links", str(wheels), "beta==1.0")
    assert data["notices"] == []
    pin = next(s for s in data["steps"] if s["name"] == "pin:beta")
    assert pin["details"]["cause"] == "missing"
    assert not [s for s in data["steps"] if s["details"].get("cause") == "wrong-environment"]


# --- the project's .venv, not activated (a Kernodeck installed apart: pipx, uv tool) -------------


@pytest.fixture(scope="module")
def venv_project(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project with the locked packages in its own `.venv`, which nobody activated."""
    project = tmp_path_factory.mktemp("venv-project") / "project"
    project.mkdir()
    for f in world.project.iterdir():
        if f.is_file() and (f.name == "repro.toml" or f.name.startswith("requirements-rebuild-")):
            (project / f.name).write_bytes(f.read_bytes())
    venv = _venv(project / ".venv")
    wheels = world.project.parent / "wheels"
    _pip(str(env_python(venv)), "install", "--no-index", "--find-links", str(wheels), *PACKAGES)
    (project / "src" / "deep").mkdir(parents=True)
    return project


def test_the_project_venv_comes_after_the_activated_ones(world: World, venv_project: Path) -> None:
    dot = str(env_python(venv_project / ".venv"))
    found = choose(None, environ={}, project=venv_project)
    assert (found.path, found.source) == (dot, Source.PROJECT_VENV)
    assert found.reason == f"{REASONS[Source.PROJECT_VENV]}: {venv_project / '.venv'}"
    # the nearest parent that has one, as uv looks for it
    assert choose(None, environ={}, project=venv_project / "src" / "deep").path == dot
    # an activated environment and --python still win; without a project folder nothing is looked for
    assert (
        choose(None, environ={"VIRTUAL_ENV": str(world.empty)}, project=venv_project).source
        is Source.VIRTUAL_ENV
    )
    assert choose(None, environ={"CONDA_PREFIX": str(world.conda)}, project=venv_project).source is (
        Source.CONDA_PREFIX
    )
    assert choose(world.python(world.good), environ={}, project=venv_project).source is Source.OPTION
    assert choose(None, environ={}).source is Source.RUNNING
    # an activated venv that is gone is passed over, and said
    gone = choose(None, environ={"VIRTUAL_ENV": str(venv_project / "gone")}, project=venv_project)
    assert gone.source is Source.PROJECT_VENV and "gone has no interpreter" in gone.reason


def test_a_dot_venv_folder_that_is_not_a_venv_is_not_taken(tmp_path: Path) -> None:
    fake = tmp_path / ".venv" / "bin"
    fake.mkdir(parents=True)
    (fake / "python").symlink_to(sys.executable)  # an interpreter, but no pyvenv.cfg beside it
    assert choose(None, environ={}, project=tmp_path).source is Source.RUNNING


def test_commands_run_apart_from_the_venv_check_the_project_venv(world: World, venv_project: Path) -> None:
    dot = str(env_python(venv_project / ".venv"))
    first = f"python: {dot} ({REASONS[Source.PROJECT_VENV]}: {venv_project / '.venv'})"

    def run(*args: str, cwd: Path = venv_project) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kernodeck", *args],
            cwd=cwd,
            env=_env(world),  # nothing activated; Kernodeck runs in an interpreter of its own
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    p = run("verify", "--no-compute", "--json", "report.json")
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == first
    data = json.loads((venv_project / "report.json").read_text())
    assert data["interpreter"]["source"] == "project-venv" and data["notices"] == []
    assert next(s for s in data["steps"] if s["name"] == "imports: run")["status"] == "passed"
    # a manifest named from elsewhere: its folder's .venv, not the current folder's
    p = run("verify", "--no-compute", str(venv_project / "repro.toml"), cwd=world.project.parent)
    assert p.returncode == 0 and _first_line(p.stdout) == first, p.stdout + p.stderr
    p = run("check")
    assert p.returncode == 0 and _first_line(p.stdout) == first, p.stdout + p.stderr
    p = run("doctor", "--no-compute")
    assert p.returncode == 0 and _first_line(p.stdout) == first, p.stdout + p.stderr
    p = run("capture", "--dry-run")
    assert p.returncode == 0 and _first_line(p.stdout) == first, p.stdout + p.stderr


def test_require_checks_the_interpreter_the_script_runs_in_not_the_project_venv(
    world: World, venv_project: Path
) -> None:
    p = subprocess.run(
        [sys.executable, "-c", REQUIRE],
        cwd=venv_project,
        env=_env(world),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert p.returncode == 0, p.stderr
    assert f"checked {sys.executable} ({REASONS[Source.RUNNING]})" in p.stdout
    assert "this is probably not the project's environment" in p.stdout


# --- a Kernodeck installed as a tool (uv tool install, pipx) ----------------------------------------


@pytest.mark.parametrize(
    ("marker", "installer"), [("uv-receipt.toml", "uv tool"), ("pipx_metadata.json", "pipx")]
)
def test_a_tool_environment_is_never_taken_for_the_project(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    world: World,
    venv_project: Path,
    marker: str,
    installer: str,
) -> None:
    tool = tmp_path / "tool"
    tool.mkdir()
    assert tool_environment(tool) is None
    (tool / marker).write_text("")
    assert tool_environment(tool) == installer
    monkeypatch.setattr(sys, "prefix", str(tool))  # Kernodeck runs from the tool's environment
    project = tmp_path / "project"
    project.mkdir()
    with pytest.raises(UsageError) as e:
        choose(None, environ={}, project=project)
    assert e.value.message == (
        "no project environment to look at: no activated venv (VIRTUAL_ENV) or conda environment "
        f"(CONDA_PREFIX), and no .venv in {project} or a folder above it; Kernodeck runs from its own "
        f"{installer} environment ({tool}), which is not the project's"
    )
    assert "--python PATH" in (e.value.hint or "")
    # a venv by another name in the project folder (rebuild's .venv-rebuild) is named in the hint
    other = _venv(project / ".venv-rebuild")
    monkeypatch.chdir(project)
    with pytest.raises(UsageError) as e:
        choose(None, environ={}, project=project)
    assert (e.value.hint or "").startswith(
        f"pass --python {Path('.venv-rebuild') / 'bin' / 'python'}, the venv in {project}; or activate"
    )
    assert env_python(other).exists()
    gone = tmp_path / "gone"
    with pytest.raises(UsageError) as e:
        choose(None, environ={"VIRTUAL_ENV": str(gone)}, project=project)
    assert f"(VIRTUAL_ENV={gone} has no interpreter)" in e.value.message
    # what the user named or has still wins; without a project folder (require()) nothing changes
    assert choose(None, environ={}, project=venv_project).source is Source.PROJECT_VENV
    assert (
        choose(None, environ={"VIRTUAL_ENV": str(world.good)}, project=project).source is Source.VIRTUAL_ENV
    )
    assert choose(world.python(world.good), environ={}, project=project).source is Source.OPTION
    assert choose(None, environ={}).source is Source.RUNNING
    described = choose(None, environ={}, project=project, own_tool=True)  # doctor
    assert described.source is Source.RUNNING and f"its own {installer} environment" in described.reason


def test_a_uvx_environment_is_a_tool_environment_too(tmp_path: Path) -> None:
    """`uvx kernodeck` runs from an environment in uv's cache, with no receipt: uv made it there."""
    env = tmp_path / "uv-cache" / "archive-v0" / "gQn0NiGvNovG6vBY"
    env.mkdir(parents=True)
    (env / "pyvenv.cfg").write_text(
        "home = /usr/bin\nimplementation = CPython\nuv = 0.13.9\nrelocatable = true\n"
    )
    assert tool_environment(env) == "uvx"
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.7\n")  # not made by uv
    assert tool_environment(env) is None
    project = tmp_path / "archive-v0-project" / ".venv"  # a project venv made by uv: not a tool's
    project.mkdir(parents=True)
    (project / "pyvenv.cfg").write_text("uv = 0.13.9\n")
    assert tool_environment(project) is None


def test_verify_from_a_uv_tool_install_outside_any_venv_stops_and_says_why(
    world: World, tmp_path: Path
) -> None:
    """A real environment of its own for Kernodeck, marked the way `uv tool install` marks it."""
    import sysconfig

    tool = _venv(tmp_path / "tools" / "kernodeck")
    (tool / "uv-receipt.toml").write_text('[tool]\nrequirements = [{ name = "kernodeck" }]\n')
    purelib = Path(
        subprocess.run(
            [str(env_python(tool)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (purelib / "kernodeck-deps.pth").write_text(f"{SRC}\n{sysconfig.get_paths()['purelib']}\n")
    env = _env(world)  # nothing activated, and world.project has no .venv
    env.pop("PYTHONPATH")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(env_python(tool)), "-m", "kernodeck", *args],
            cwd=world.project,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    for command in (["verify", "--no-compute", "--json", "tool-report.json"], ["check"]):
        p = run(*command)
        assert p.returncode == 2, p.stdout + p.stderr
        assert "Traceback" not in p.stderr
        assert f"Kernodeck runs from its own uv tool environment ({tool})" in p.stderr
        assert "pass --python PATH" in p.stderr
    assert not (world.project / "tool-report.json").exists()
    # doctor describes a machine as much as an environment: it goes on, saying what it looks at
    p = run("doctor", "--no-compute")
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == (
        f"python: {env_python(tool)} (the interpreter running Kernodeck: its own uv tool environment, "
        "not a project's; --python PATH names one)"
    )
    p = run("verify", "--no-compute", "--python", world.python(world.good))
    assert p.returncode == 0, p.stdout + p.stderr
    assert _first_line(p.stdout) == f"python: {world.python(world.good)} (--python)"
