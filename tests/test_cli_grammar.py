"""One CLI grammar: the manifest (or a bundle folder) is the first positional argument of every
command that takes one, `--json FILE|-` everywhere, and the old `--manifest PATH` spelling still
works for one release with a deprecation note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.report import Report, Step
from tests.fixtures.bundle_project import bundle_project


def _invoke(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.stdout, res.stderr


def test_bundle_takes_the_manifest_first_and_the_out_folder_last(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    code, out, err = _invoke(["bundle", str(proj / "repro.toml"), str(tmp_path / "b1"), "--allow-dirty"])
    assert code == 0, out + err
    assert (tmp_path / "b1" / "BUNDLE.sha256").is_file() and "deprecated" not in err


def test_bundle_with_only_out_bundles_the_manifest_of_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = bundle_project(tmp_path)
    monkeypatch.chdir(proj)
    code, out, err = _invoke(["bundle", str(tmp_path / "b2")])
    assert code == 0, out + err
    assert (tmp_path / "b2" / "repro.toml").is_file()


def test_the_old_manifest_option_still_works_with_a_note(tmp_path: Path) -> None:
    proj = bundle_project(tmp_path)
    code, out, err = _invoke(["bundle", str(tmp_path / "b3"), "--manifest", str(proj)])
    assert code == 0, out + err
    assert "--manifest PATH is deprecated" in err and (tmp_path / "b3" / "repro.toml").is_file()
    code, _, err = _invoke(["bundle", str(proj), str(tmp_path / "b4"), "--manifest", str(tmp_path)])
    assert code == 2 and "given twice" in err


def test_check_takes_the_manifest_first_then_check_names(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "repro.toml"
    code, _, err = _invoke(["check", str(missing), "some-check"])
    assert code == 2 and str(missing) in err
    code, _, err = _invoke(["check", "some-check", "--manifest", str(missing)])
    assert code == 2 and str(missing) in err and "--manifest PATH is deprecated" in err


def test_capture_takes_the_manifest_as_its_argument(tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere" / "repro.toml"
    code, _, err = _invoke(["capture", str(missing), "--no-system"])
    assert code == 2 and str(missing) in err


def test_diff_json_is_a_file_or_stdout(tmp_path: Path) -> None:
    a, b = Report(reference_id="r"), Report(reference_id="r")
    a.add(Step.passed("packages", "numpy", observed="2.0.0"))
    b.add(Step.failed("packages", "numpy", "numpy 2.1.0 is installed, 2.0.0 is locked", observed="2.1.0"))
    a.write_json(tmp_path / "a.json")
    b.write_json(tmp_path / "b.json")
    target = tmp_path / "d.json"
    code, out, _ = _invoke(
        ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json", str(target)]
    )
    assert code == 1 and json.loads(target.read_text())["first_layer"] == "packages"
    assert "packages" in out  # the human report still goes to the screen
    code, out, _ = _invoke(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"])
    assert code == 1 and json.loads(out)["layers"] == ["packages"]


def test_a_subfolder_finds_the_manifest_above_up_to_the_repository_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As git and uv find their project: run from `src/`, every command takes the repro.toml of the
    project above, and `lock` writes beside it; never one above the repository's root."""
    from tests.fixtures.lock_project import LINUX, write_manifest

    outer = tmp_path / "outer"
    write_manifest(outer, requirements=[], default_url="http://127.0.0.1:9/simple", platforms=[LINUX])
    repo = outer / "repo"
    (repo / ".git").mkdir(parents=True)
    write_manifest(repo, requirements=[], default_url="http://127.0.0.1:9/simple", platforms=[LINUX])
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.setenv("KERNODECK_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = _invoke(["validate"])
    assert code == 0, err
    assert out.startswith("../../repro.toml: valid")
    code, _, err = _invoke(["lock", "-q"])
    assert code == 0, err
    assert (repo / "requirements-rebuild-linux.txt").is_file()
    assert (
        not list(deep.glob("requirements-rebuild-*"))
        and not (outer / "requirements-rebuild-linux.txt").exists()
    )
    code, _, err = _invoke(["lock", "--check", "-q"])
    assert code == 0, err
    # outside any repository's manifest: the one above the repository root is not taken
    (repo / "repro.toml").unlink()
    code, _, err = _invoke(["validate"])
    assert code == 2 and "no manifest at repro.toml" in err
