"""REBUILD.md is a template whose commands are the ones rebuild's stages run: the same builders
(`rebuild.stage_commands`), printed for the reader's folder and names."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kernodeck.handover import rebuild
from kernodeck.handover.bundle import MD_DEST, MD_PYTHON, rebuild_markdown, rebuild_stage_commands
from kernodeck.handover.rebuild import (
    contract_argv,
    install_argv,
    inventory_argv,
    pip_version_argv,
    plan_rebuild,
    run_rebuild,
    stage_commands,
    venv_argv,
)
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.schema import Manifest
from kernodeck.report import Report
from tests.fixtures.fresh_lock import stamp_lock

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "manifests").iterdir())
INTRO = "does what these commands do"


def _md(m: Manifest, **kw: Any) -> str:
    args: dict[str, Any] = {
        "platforms": [p.name for p in m.platform],
        "refs": [],
        "creds": [],
        "report": None,
        "with_code": True,
    }
    return rebuild_markdown(m, **{**args, **kw})


def _stage_block(md: str) -> list[list[str]]:
    """The commands of REBUILD.md's stage block, as argv lists (the environment assignment before
    the install and the inventory's redirection taken off)."""
    after = md[md.index(INTRO) :]
    start = after.index("```sh\n") + len("```sh\n")
    block = after[start : after.index("\n```", start)]
    out = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[0] == "PIP_CONFIG_FILE=/dev/null":
            words = words[1:]
        if ">" in words:
            words = words[: words.index(">")]
        out.append(words)
    return out


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_rebuild_md_prints_exactly_the_commands_the_builders_make(example: Path) -> None:
    m = load_manifest(example / "repro.toml")
    md = _md(m)
    reqs = "requirements-rebuild-<platform>.txt"
    py = m.python.version
    assert _stage_block(md) == [
        venv_argv("python" + ".".join(py.split(".")[:2]), MD_DEST),
        pip_version_argv(MD_PYTHON),
        install_argv("pip", MD_PYTHON, reqs, allow_sdist=m.packages.allow_sdist),
        contract_argv(MD_PYTHON),
        inventory_argv(MD_PYTHON),
    ]
    assert _stage_block(md) == [argv for _, argv in rebuild_stage_commands(m)]
    assert "${" not in md and "$name" not in md  # every placeholder of the template is filled
    assert f"pip --isolated freeze --all > {rebuild.INVENTORY_FILE}" in md


def test_every_optional_section_fills_its_place_in_the_template() -> None:
    m = load_manifest(EXAMPLES[0] / "repro.toml")
    refs = [
        {"kind": "code", "dirty": True, "changed": ["a.py"]},
        {"kind": "data", "name": "s", "path": "d/s.jsonl", "included": False, "sha256": "ab" * 32},
    ]
    md = _md(m, refs=refs, creds=["CORP_TOKEN"], report=Report(), with_code=False)
    text = md.split("## 1. Rebuild the environment")[0]
    for piece in ("  - `CORP_TOKEN`", "-> `d/s.jsonl`", "`--allow-dirty`", "The code is not in this folder"):
        assert piece in text, piece
    assert "observed/verify-report.json verify-report.json" in md
    assert md.endswith("Change one layer at a time.\n")
    plain = _md(m)
    assert "- No credentials are needed.\n\n## 1. Rebuild the environment" in plain


class _Recorder:
    """Stands in for rebuild's process runner: records every command and answers as pip would."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def __call__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path | None = None,
        timeout: float = 0,
        on_line: Any = None,
    ) -> Any:
        self.argvs.append(list(argv))
        if argv[1:3] == ["-I", "-m"] and argv[3] == "venv":
            python = rebuild.venv_python(Path(argv[4]))
            python.parent.mkdir(parents=True)
            python.write_text("")
        return rebuild._Run(0, "pip 24.0 from /somewhere (python 3.11)\n", "", 0.0)


def test_the_stages_run_exactly_the_commands_rebuild_md_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    m_text = (EXAMPLES[0] / "repro.toml").read_text()
    (proj / "repro.toml").write_text(m_text)
    m = load_manifest(proj / "repro.toml")
    plat = m.platform[0].name
    (proj / f"requirements-rebuild-{plat}.txt").write_text("# empty lock\n")
    stamp_lock(proj / "repro.toml", plat)
    plan = plan_rebuild(proj, dest=tmp_path / "v", python=sys.executable, platform=plat)
    recorder = _Recorder()
    monkeypatch.setattr(rebuild, "_run", recorder)
    monkeypatch.setattr(rebuild, "select_interpreter", _any_interpreter)
    result = run_rebuild(plan, environ={"PATH": ""}, verify=lambda *a, **k: Report())
    report = result.report
    assert [s.status.value for s in report.steps if s.layer == "rebuild"][2:] == ["passed"] * 5
    # the network arguments this machine needs (its CA bundle, proxies) join the install command
    extra = rebuild.clean_environment({"PATH": ""}, plan.credential_names, "pip").args("pip")
    ran = stage_commands(
        sys.executable,
        str(plan.dest),
        str(rebuild.venv_python(plan.dest)),
        str(plan.requirements),
        installer="pip",
        allow_sdist=m.packages.allow_sdist,
        extra=extra,
    )
    assert recorder.argvs == [argv for _, argv in ran]
    install = recorder.argvs[2]
    at = install.index("-r")
    assert install[at - len(extra) : at] == list(extra)
    recorder.argvs[2] = install[: at - len(extra)] + install[at:]
    # the same commands, for the reader's folder and names, are REBUILD.md's
    readers = {sys.executable: f"python{m.python.version}", str(plan.dest): MD_DEST}
    readers[str(rebuild.venv_python(plan.dest))] = MD_PYTHON
    readers[str(plan.requirements)] = "requirements-rebuild-<platform>.txt"
    shown = [[readers.get(a, a) for a in argv] for argv in recorder.argvs]
    assert shown == _stage_block(_md(m))


def _any_interpreter(
    manifest: Manifest, plat: Any, request: str | None, environ: Mapping[str, str]
) -> tuple[Any, rebuild.Interpreter]:
    """The interpreter stage, passed with the running Python (the test is about the commands)."""
    from kernodeck.report import Step

    info = rebuild.Interpreter(sys.executable, manifest.python.version, "cpython", plat.os, plat.arch)
    return Step.passed("rebuild", "interpreter"), info


def _run_by_hand(md: str, folder: Path, bindir: Path, home: Path) -> tuple[str, Any]:
    """(script, finished process) of REBUILD.md's stage block run in bash from `folder`, with only
    `bindir` (where `python3.X` is) and the system's folders on PATH."""
    import os
    import subprocess

    after = md[md.index(INTRO) :]
    start = after.index("```sh\n") + len("```sh\n")
    script = after[start : after.index("\n```", start)].replace("<platform>", "here")
    done = subprocess.run(
        ["bash", "-euc", script],
        cwd=folder,
        env={"PATH": f"{bindir}{os.pathsep}/usr/bin:/bin", "HOME": str(home), "PIP_NO_INPUT": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return script, done


def test_rebuild_md_stage_commands_build_the_environment_when_run_by_hand(tmp_path: Path) -> None:
    """A reader who runs REBUILD.md's stage block in a shell, from the folder, gets the locked
    environment: the printed commands are not only the right ones, they work."""
    import hashlib

    from tests.fixtures.index_factory import IndexFactory

    factory = IndexFactory(tmp_path / "index")
    factory.add_wheel("alpha", "1.0", requires=["beta>=2"])
    factory.add_wheel("beta", "2.0")
    folder = tmp_path / "bundle"
    folder.mkdir()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    (folder / "repro.toml").write_text(
        f'schema-version = 1\n[reference]\nname = "t"\nid = "2026-01-01.1"\n[python]\nversion = "{py}"\n'
        '[[platform]]\nname = "here"\nos = "linux"\narch = "x86_64"\n'
    )
    m = load_manifest(folder / "repro.toml")
    bindir = tmp_path / "bin"  # `python3.X` on PATH, as REBUILD.md asks
    bindir.mkdir()
    (bindir / f"python{py}").symlink_to(sys.executable)
    with factory.serve() as server:
        lines = [f"--index-url {server.url()}", ""]
        for name, version in (("alpha", "1.0"), ("beta", "2.0")):
            digest = hashlib.sha256((factory.files_dir() / f"{name}-{version}-py3-none-any.whl").read_bytes())
            lines += [f"{name}=={version} \\", f"    --hash=sha256:{digest.hexdigest()}"]
        (folder / "requirements-rebuild-here.txt").write_text("\n".join(lines) + "\n")
        _, done = _run_by_hand(_md(m), folder, bindir, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    inventory = (folder / rebuild.INVENTORY_FILE).read_text()
    assert "alpha==1.0" in inventory and "beta==2.0" in inventory
    assert (folder / MD_PYTHON).exists()


def test_rebuild_md_passes_the_build_constraints_to_a_readers_pip(tmp_path: Path) -> None:
    """With [packages] build-constraints, REBUILD.md writes them to a file that the pip of the
    fresh venv reads (PIP_CONSTRAINT) when it builds an allowed sdist: run by hand, the old sdist
    builds with the old build requirement it needs."""

    import tomlkit

    from kernodeck.lock.orchestrate import lock_manifest
    from tests.fixtures.index_factory import IndexFactory
    from tests.fixtures.lock_project import write_manifest
    from tests.fixtures.old_sdist import publish_old_sdist

    factory = IndexFactory(tmp_path / "index")
    publish_old_sdist(factory)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / f"python{py}").symlink_to(sys.executable)
    with factory.serve() as server:
        path = write_manifest(
            tmp_path / "bundle",
            requirements=["oldsrc"],
            default_url=server.url(),
            allow_sdist=["oldsrc"],
            python=py,
            platforms=[{"name": "here", "os": "linux", "arch": "x86_64"}],
        )
        doc = tomlkit.parse(path.read_text(encoding="utf-8"))
        doc["packages"]["build-constraints"] = ["kd-build-helper<2"]
        path.write_text(tomlkit.dumps(doc), encoding="utf-8")
        lock_manifest(path, cache_dir=tmp_path / "cache")
        script, done = _run_by_hand(_md(load_manifest(path)), path.parent, bindir, tmp_path)
    assert "PIP_CONSTRAINT=build-constraints.txt" in script
    assert done.returncode == 0, done.stdout + done.stderr
    assert (path.parent / "build-constraints.txt").read_text() == "kd-build-helper<2\n"
    assert "oldsrc==0.4" in (path.parent / rebuild.INVENTORY_FILE).read_text()
