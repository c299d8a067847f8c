"""An index the manifest or a requirement file declares that cannot be reached fails the lock
naming it (exit 1), unless it is marked `optional = true`; every "not found" names each index
asked and whether it answered. The dead index is a loopback port nothing listens on."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.lockfile.names import requirements_filename
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def dead() -> str:
    """The URL of an index on a loopback port that refuses connections."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/simple"


def _from_requirements(directory: Path, url: str, dead: str, requirement: str, **kw: object) -> Path:
    path = write_manifest(directory, requirements=[], default_url=url, **kw)  # type: ignore[arg-type]
    (directory / "requirements.txt").write_text(
        f"--extra-index-url {dead}\n{requirement}\n", encoding="utf-8"
    )
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("[packages]\n", '[packages]\nfrom = ["requirements.txt"]\n', 1), encoding="utf-8"
    )
    return path


def test_a_requirement_files_dead_index_fails_the_lock_naming_it(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    dead: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # app is on the default index: the dead extra index used to be ignored without a word
    index_factory.add_wheel("app", "1.0")
    path = _from_requirements(tmp_path / "p", served_index.url(), dead, "app")
    assert main(["lock", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"error: cannot read the page of 'app' from {dead}/app/" in err
    assert f"asked default ({served_index.url()}): answered, has app" in err
    assert f"asked requirements-1 ({dead}): no answer (ConnectError" in err
    assert "mark it `optional = true`" in err  # how to let the lock go on without it
    assert not (path.parent / requirements_filename("linux")).exists()


def test_a_package_only_the_dead_index_has_names_every_index_asked(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    dead: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    index_factory.add_wheel("app", "1.0")
    path = _from_requirements(tmp_path / "p", served_index.url(), dead, "corp-only")
    assert main(["lock", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"asked default ({served_index.url()}): answered, no project 'corp-only'" in err
    assert f"asked requirements-1 ({dead}): no answer" in err


def test_an_optional_dead_index_is_left_out_and_said(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    dead: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    index_factory.add_wheel("app", "1.0")
    indexes = [
        {"name": "default", "url": served_index.url(), "default": True},
        {"name": "corp", "url": dead, "optional": True},
    ]
    path = write_manifest(tmp_path / "p", requirements=["app"], indexes=indexes)
    assert main(["lock", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"note: index 'corp' ({dead}) could not be reached (ConnectError" in err
    assert "it is optional = true, so this lock was made without it" in err
    assert pins((path.parent / requirements_filename("linux")).read_text()) == {"app": "1.0"}
    # not recorded for replay: the next lock asks again, and says it again
    assert main(["lock", str(path)]) == 0
    assert "could not be reached" in capsys.readouterr().err
    # a package no index answered for: each index asked, and which one did not answer
    path = write_manifest(tmp_path / "q", requirements=["corp-only"], indexes=indexes)
    assert main(["lock", str(path)]) == 1
    err = capsys.readouterr().err
    assert "corp-only is not on any index asked for it" in err
    assert f"asked default ({served_index.url()}): answered, no project 'corp-only'" in err
    assert f"asked corp ({dead}): no answer (ConnectError" in err and "optional, left out" in err


def test_a_requirement_files_index_is_made_optional_in_the_manifest(
    index_factory: IndexFactory,
    served_index: Server,
    tmp_path: Path,
    dead: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    index_factory.add_wheel("app", "1.0")
    indexes = [
        {"name": "default", "url": served_index.url(), "default": True},
        {"name": "extra", "url": dead, "optional": True},  # the same url as the file's
    ]
    path = _from_requirements(tmp_path / "p", served_index.url(), dead, "app", indexes=indexes)
    assert main(["lock", str(path)]) == 0
    assert f"note: index 'extra' ({dead}) could not be reached" in capsys.readouterr().err
