"""A direct reference in `[packages] requirements` (`name @ git+...`, a local file, any URL: a lock
resolves names on indexes only) stops `validate` and `lock` at repro.toml:LINE with what to do,
exit 2, before anything is resolved (issue #43, point 4); a requirement by name passes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernodeck.cli import main
from kernodeck.reqfile import cannot_carry

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _manifest(folder: Path, requirement: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "repro.toml"
    path.write_text(
        f'schema-version = 1\n[reference]\nname = "t"\nid = "1"\n[python]\nversion = "{PY}"\n'
        "[packages]\nrequirements = [\n"
        '  "numpy>=1.26",\n'
        f'  "{requirement}",\n'
        "]\n"
        # nothing listens here: a lock that resolved anything would fail another way (exit 1)
        '[[packages.index]]\nname = "default"\nurl = "http://127.0.0.1:9/simple"\ndefault = true\n'
        '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("requirement", "kind"),
    [
        ("tool @ git+https://example.invalid/org/tool.git@v1", "VCS"),
        ("tool @ file:///srv/wheels/tool-1.0-py3-none-any.whl", "local path"),
        # no URL reference is locked today (the resolver refuses them): a wheel's URL stops too
        ("tool @ https://example.invalid/tool-1.0-py3-none-any.whl", "direct URL"),
    ],
)
def test_validate_and_lock_stop_at_the_line_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], requirement: str, kind: str
) -> None:
    path = _manifest(tmp_path / "p", requirement)
    said = f"repro.toml:10: packages.requirements[1]: tool @ ...: a {kind} requirement cannot be locked from an index"
    hint = cannot_carry("remove it from [packages] requirements")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert said in err and hint in err
    assert "Traceback" not in err
    assert main(["lock", str(path), "-q"]) == 2
    err = capsys.readouterr().err
    assert said in err and hint in err
    assert sorted(p.name for p in path.parent.iterdir()) == ["repro.toml"]  # nothing written


def test_the_remedies_are_those_of_a_requirement_files_line_with_how_to_leave_it_out() -> None:
    here = cannot_carry("remove it from [packages] requirements")
    there = cannot_carry()
    assert here.startswith("publish it to an index the manifest names, pin a released version, or remove it")
    assert there.startswith(
        "publish it to an index the manifest names, pin a released version, or list the line"
    )
    assert "[packages] skip" in there and "[packages] skip" not in here  # skip reads `from` files only


def test_requirements_by_name_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _manifest(tmp_path / "p", "tool[extra]>=1; sys_platform == 'linux'")
    assert main(["validate", str(path)]) == 0
    assert "valid" in capsys.readouterr().out
