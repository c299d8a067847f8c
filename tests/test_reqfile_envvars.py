"""`${VAR}` in requirement lines is expanded as pip does (only `${NAME}` of uppercase letters,
digits and underscore, from the environment when the file is read: at lock time); index urls keep
their `${VAR}` credential placeholders and are never written expanded; a variable that is not set
is an error at file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.errors import ManifestError
from kernodeck.lockfile.names import requirements_filename
from kernodeck.manifest import load_manifest
from kernodeck.reqfile import parse_requirements_file
from tests.fixtures.index_factory import IndexFactory, Server
from tests.fixtures.lock_project import pins

pytest_plugins = ["tests.fixtures.index_fixtures"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_requirements_and_included_paths_are_expanded_index_urls_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUMPY_VERSION", "1.26.4")
    monkeypatch.setenv("REQ_DIR", "reqs")
    monkeypatch.setenv("IDX_TOKEN", "s3cr3t")
    monkeypatch.delenv("IDX_USER", raising=False)
    monkeypatch.setenv("lower", "9")
    _write(tmp_path / "reqs" / "base.txt", "tqdm>=${lower}\n")
    f = _write(
        tmp_path / "r.txt",
        "numpy==${NUMPY_VERSION}\n-r ${REQ_DIR}/base.txt\n"
        "--extra-index-url https://${IDX_USER}:${IDX_TOKEN}@example.org/simple\n",
    )
    with pytest.raises(ManifestError) as e:
        parse_requirements_file(f, project_root=tmp_path, display_root=tmp_path)
    # `${lower}` is not a variable pip expands: it stays, and the requirement is invalid at its line
    assert "reqs/base.txt:1" in e.value.render() and "${lower}" in e.value.render()
    _write(tmp_path / "reqs" / "base.txt", "tqdm\n")
    parsed = parse_requirements_file(f, project_root=tmp_path, display_root=tmp_path)
    assert [r.requirement for r in parsed.requirements] == ["numpy==1.26.4", "tqdm"]
    # the index url keeps its placeholders (IDX_USER is not even set: it is expanded at fetch time)
    assert [i.url for i in parsed.indexes] == ["https://${IDX_USER}:${IDX_TOKEN}@example.org/simple"]


def test_a_variable_that_is_not_set_is_an_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KERNODECK_TEST_UNSET", raising=False)
    _write(tmp_path / "inner.txt", "numpy\n\nscipy>=${KERNODECK_TEST_UNSET}\n")
    f = _write(tmp_path / "r.txt", "-r inner.txt\n")
    with pytest.raises(ManifestError) as e:
        parse_requirements_file(f, project_root=tmp_path, display_root=tmp_path)
    msg = e.value.render()
    assert "inner.txt:3" in msg and "${KERNODECK_TEST_UNSET} is not set" in msg


def test_lock_reads_the_variable_at_lock_time_and_never_writes_a_credential(
    tmp_path: Path,
    index_factory: IndexFactory,
    served_index: Server,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    for v in ("1.0", "2.0"):
        index_factory.add_wheel("app", v)
    proj = tmp_path / "proj"
    url = served_index.url().replace("://", "://${IDX_USER}:${IDX_TOKEN}@", 1)
    _write(proj / "requirements.txt", f"--index-url {url}\napp==${{APP_VERSION}}\n")
    _write(
        proj / "repro.toml",
        'schema-version = 1\n[reference]\nname = "p"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[packages]\nfrom = ["requirements.txt"]\n'
        '[[platform]]\nname = "linux"\nos = "linux"\narch = "x86_64"\n',
    )
    monkeypatch.setenv("IDX_USER", "bob")
    monkeypatch.setenv("IDX_TOKEN", "t0ps3cr3t")
    monkeypatch.delenv("APP_VERSION", raising=False)
    assert main(["lock", str(proj / "repro.toml"), "-q"]) == 2
    assert "requirements.txt:2" in capsys.readouterr().err
    monkeypatch.setenv("APP_VERSION", "1.0")
    assert main(["lock", str(proj / "repro.toml"), "-q"]) == 0
    lock = (proj / requirements_filename(load_manifest(proj / "repro.toml").platform[0].name)).read_text()
    assert pins(lock) == {"app": "1.0"}
    assert "t0ps3cr3t" not in lock and "bob" not in lock
    # the expanded requirement is a lock input: another value makes the lock stale
    assert main(["lock", str(proj / "repro.toml"), "--check", "-q"]) == 0
    monkeypatch.setenv("APP_VERSION", "2.0")
    assert main(["lock", str(proj / "repro.toml"), "--check", "-q"]) == 1


def test_init_refers_to_a_file_whose_variable_is_set_only_at_lock_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kernodeck init` runs before the variable exists: the file is still referred to, its line
    is named, and the strict reader (lock, validate) keeps failing at that line while it is unset."""
    monkeypatch.delenv("TQDM_VERSION", raising=False)
    proj = tmp_path / "proj"
    _write(proj / "requirements" / "base.txt", "click\n")
    train = _write(proj / "requirements" / "train.txt", "-r base.txt\nrequests\ntqdm==${TQDM_VERSION}\n")
    noted = parse_requirements_file(train, project_root=proj, display_root=proj, unset="note")
    assert [str(r.requirement) for r in noted.requirements] == ["click", "requests"]
    assert [(n, o.file, o.line) for n, o in noted.unset] == [("TQDM_VERSION", "requirements/train.txt", 3)]
    assert main(["init", str(proj)]) == 0
    text = (proj / "repro.toml").read_text()
    assert 'from = ["requirements/train.txt"]' in text
    assert "requirements/train.txt:3 needs ${TQDM_VERSION} set where you run `kernodeck lock`" in text
    with pytest.raises(ManifestError) as err:
        parse_requirements_file(train, project_root=proj, display_root=proj)
    assert "${TQDM_VERSION} is not set" in err.value.issues[0].render()
