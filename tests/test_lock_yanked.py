"""An exact pin that selects a yanked release is locked (PEP 592) with a warning: in the lock
summary, in `--json`, and as a comment on the pin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from kernodeck.lockfile.read import read_lockfile
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import LINUX, pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


def test_exact_pin_of_a_yanked_release_warns(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    f = index_factory
    f.add_wheel("y", "1.0")
    f.add_wheel("y", "2.0", yanked="broken\nbuild")
    f.add_wheel("z", "1.0")
    path = write_manifest(
        tmp_path / "p", requirements=["y==2.0", "z"], default_url=served_index.url(), platforms=[LINUX]
    )
    out = tmp_path / "lock.json"
    assert main(["lock", str(path), "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert "  warning: y==2.0 is a yanked release (broken build)" in err
    text = (path.parent / requirements_filename("linux")).read_text()
    assert "    # via -r repro.toml\n    # warning: yanked release: broken build\nz==1.0" in text
    assert text.count("# warning:") == 1
    assert pins(text) == {"y": "2.0", "z": "1.0"}
    assert [p.name for p in read_lockfile(path.parent / requirements_filename("linux")).pins] == ["y", "z"]
    assert json.loads(out.read_text())["platforms"][0]["warnings"] == [
        "y==2.0 is a yanked release (broken build)"
    ]
    # a replayed lock warns the same
    assert main(["lock", str(path)]) == 0
    assert "warning: y==2.0 is a yanked release" in capsys.readouterr().err

    path.write_text(path.read_text().replace('"y==2.0"', '"y"'))
    assert main(["lock", str(path), "--upgrade"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "# warning" not in (path.parent / requirements_filename("linux")).read_text()
