"""The bundle's secret scanner and scrubber on a corpus of real-looking secrets and non-secrets, and
symlinks that leave the project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernodeck.handover.bundle import BundleError, write_bundle
from kernodeck.handover.scrub import Scrubber
from kernodeck.support.tomltext import tomllib
from tests.fixtures.fresh_lock import empty_lock

CORPUS = tomllib.loads((Path(__file__).parents[1] / "data" / "secret_corpus.toml").read_text())
POSITIVE = CORPUS["positive"]
NEGATIVE = CORPUS["negative"]


def test_the_corpus_is_large_enough() -> None:
    assert len(POSITIVE) >= 40 and len(NEGATIVE) >= 40


@pytest.mark.parametrize("sample", POSITIVE, ids=[str(i) for i in range(len(POSITIVE))])
def test_every_positive_sample_is_found_and_scrubbed(sample: dict[str, str]) -> None:
    s = Scrubber()
    assert s.leaks(sample["text"]), sample["text"]
    clean = s.text(sample["text"])
    assert sample["secret"] not in clean, clean
    assert s.leaks(clean) == [], (clean, s.leaks(clean))  # what the scrubber leaves, the scanner accepts


@pytest.mark.parametrize("sample", NEGATIVE, ids=[str(i) for i in range(len(NEGATIVE))])
def test_no_negative_sample_is_reported_or_changed(sample: dict[str, str]) -> None:
    s = Scrubber()
    assert s.leaks(sample["text"]) == [], sample["text"]
    assert s.text(sample["text"]) == sample["text"]


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "app.py").write_text("print('hi')\n")
    (proj / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "s"\nid = "1"\n[python]\nversion = "3.11"\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
    )
    empty_lock(proj / "repro.toml", "linux-x86_64")  # a bundle needs a usable lock per platform
    return proj


def test_a_symlink_out_of_the_project_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
    os.symlink(key, proj / "deploy_key")
    with pytest.raises(BundleError, match="outside the project") as err:
        write_bundle(tmp_path / "out", manifest=proj, environ={}, home=tmp_path)
    assert err.value.context == [f"deploy_key -> {key}"]
    assert not (tmp_path / "out").exists()


def test_a_symlink_inside_the_project_is_copied(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    os.symlink("app.py", proj / "main.py")
    write_bundle(tmp_path / "out", manifest=proj, environ={}, home=tmp_path)
    assert (tmp_path / "out" / "main.py").read_text() == "print('hi')\n"
    assert not (tmp_path / "out" / "main.py").is_symlink()


def test_a_private_key_file_in_the_code_stops_the_bundle(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    (proj / "key.pem").write_text(
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ\n-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(BundleError) as err:
        write_bundle(tmp_path / "out", manifest=proj, environ={}, home=tmp_path)
    assert "key.pem" in "\n".join(err.value.context) and "a private key" in "\n".join(err.value.context)
    assert not (tmp_path / "out").exists()


def test_temporary_folders_venvs_and_mirrors_of_the_author_are_scrubbed(tmp_path: Path) -> None:
    """Generated files name no path below a temporary folder, no venv or cache of the author, and
    no mirror URL the author's installer settings point at."""
    proj = _project(tmp_path)
    lock = proj / "requirements-rebuild-linux-x86_64.txt"
    lock.write_text(
        lock.read_text()
        + "# via -r /tmp/build-x1/requirements.in\ntiny==1.0 --hash=sha256:"
        + "0" * 64
        + "\n"
    )
    (proj / "installed-after.txt").write_text(
        "local @ file:///tmp/wheels-abc/local-1.0-py3-none-any.whl\nx @ file:///srv/venvs/author/x.whl\n"
    )
    env = {"PIP_INDEX_URL": "http://127.0.0.1:9/mirror/simple", "VIRTUAL_ENV": "/srv/venvs/author"}
    write_bundle(tmp_path / "out", manifest=proj, environ=env, home=tmp_path)
    out = tmp_path / "out"
    generated = [
        "requirements-rebuild-linux-x86_64.txt",
        "observed/installed-after.txt",
        "REBUILD.md",
        "references.json",
        "repro.toml",
    ]
    for name in generated:
        text = (out / name).read_text()
        for leak in ("/tmp/", "127.0.0.1:9", "/srv/venvs/author", str(tmp_path)):
            assert leak not in text, (name, leak)
    assert "# via -r <tmp>/requirements.in" in (out / "requirements-rebuild-linux-x86_64.txt").read_text()
    assert "<tmp>/local-1.0-py3-none-any.whl" in (out / "observed/installed-after.txt").read_text()
    assert "<venv>/x.whl" in (out / "observed/installed-after.txt").read_text()


def test_code_that_names_a_mirror_stops_the_bundle(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    (proj / "fetch.py").write_text('URL = "http://127.0.0.1:9/mirror/simple/torch/"\n')
    with pytest.raises(BundleError) as err:
        write_bundle(
            tmp_path / "out",
            manifest=proj,
            environ={"PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/mirror/simple"},
            home=tmp_path,
        )
    assert err.value.context[0].startswith(
        "fetch.py:1: a mirror URL of this machine [mirror-url] (code; to accept: fetch.py "
    )
    assert not (tmp_path / "out").exists()
