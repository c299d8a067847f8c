"""Files a person writes, left by a merge with git conflict markers: repro.toml, the pyproject.toml
and requirements files its `[packages] from` reads (and a file those include). Every command
that reads them stops at the first marker with the conflict's lines and what to do, exit 2, no
traceback, nothing written: only a person can say which side is meant."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.errors import ManifestError
from kernodeck.support.conflicts import conflict_issue
from kernodeck.support.tomltext import parse_toml

HEAD = 'schema-version = 1\n[reference]\nname = "x"\nid = "1"\n[python]\nversion = "3.11"\n'
PLATFORM = '[[platform]]\nname = "linux-x86_64"\nos = "linux"\narch = "x86_64"\n'
MERGED_ID = '<<<<<<< HEAD\nid = "1"\n=======\nid = "2"\n>>>>>>> feature\n'


def _run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(cli, args)
    assert "Traceback" not in res.output and not isinstance(res.exception, (KeyError, TypeError, ValueError))
    return res.exit_code, res.output


def _project(tmp_path: Path, case: str) -> tuple[Path, str, int, str]:
    """(manifest, the file with the conflict, its first marker's line, its lines text)."""
    m = tmp_path / "repro.toml"
    if case == "repro.toml":
        m.write_text(HEAD.replace('id = "1"\n', MERGED_ID) + PLATFORM)
        return m, "repro.toml", 4, "lines 4-8"
    if case == "pyproject.toml":
        (tmp_path / "pyproject.toml").write_text(
            '[project]\nname = "app"\nversion = "1"\n<<<<<<< HEAD\ndependencies = ["rich"]\n'
            '=======\ndependencies = ["rich<14"]\n>>>>>>> theirs\n'
        )
        m.write_text(HEAD + '[packages]\nfrom = ["pyproject.toml"]\n' + PLATFORM)
        return m, "pyproject.toml", 4, "lines 4-8"
    if case == "requirements.txt":
        (tmp_path / "requirements.txt").write_text(
            "requests==2.32.3\n<<<<<<< HEAD\nrich\n=======\nrich==13.9.4\n>>>>>>> other\n"
        )
        m.write_text(HEAD + '[packages]\nfrom = ["requirements.txt"]\n' + PLATFORM)
        return m, "requirements.txt", 2, "lines 2-6"
    # an included file: the error names it, not the file that includes it
    (tmp_path / "requirements.txt").write_text("requests==2.32.3\n-c constraints.txt\n")
    (tmp_path / "constraints.txt").write_text("# pins\n<<<<<<< HEAD\nurllib3<2.3\n=======\n")
    m.write_text(HEAD + '[packages]\nfrom = ["requirements.txt"]\n' + PLATFORM)
    return m, "constraints.txt", 2, "lines 2-4"  # not closed: to the end of the file


@pytest.mark.parametrize("case", ["repro.toml", "pyproject.toml", "requirements.txt", "included"])
@pytest.mark.parametrize("command", ["validate", "lock"])
def test_a_merged_file_stops_every_command_at_its_first_marker(
    tmp_path: Path, case: str, command: str
) -> None:
    manifest, name, line, lines = _project(tmp_path, case)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out = _run([command, str(manifest)])
    assert code == 2, out
    first = out.splitlines()[0]
    assert first.endswith(
        f"{name}:{line}: git merge conflict markers ({lines}): the file was merged with conflicts"
    )
    assert f"{line:>4} | <<<<<<<" in out  # the marker line itself
    assert "delete the <<<<<<<, ======= and >>>>>>> lines" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_markers_inside_a_multiline_string_are_text_not_a_conflict(tmp_path: Path) -> None:
    m = tmp_path / "repro.toml"
    m.write_text(
        HEAD.replace(
            'id = "1"\n', 'id = "1"\ndescription = """\n<<<<<<< quoted in a note\n>>>>>>> too\n"""\n'
        )
        + PLATFORM
    )
    assert _run(["validate", str(m)])[0] == 0


def test_a_pyproject_syntax_error_is_located_with_its_line_and_a_caret(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\ndependencies = ["rich",\n')
    m = tmp_path / "repro.toml"
    m.write_text(HEAD + '[packages]\nfrom = ["pyproject.toml"]\n' + PLATFORM)
    code, out = _run(["validate", str(m)])
    assert code == 2 and "pyproject.toml:3:" in out and "TOML syntax error" in out and "^" in out, out


def test_the_issue_and_the_parser_agree() -> None:
    text = "a = 1\n<<<<<<< HEAD\nb = 2\n=======\nb = 3\n>>>>>>> x\n"
    issue = conflict_issue(text, "f.toml")
    assert issue is not None and (issue.line, issue.file) == (2, "f.toml")
    with pytest.raises(ManifestError) as e:
        parse_toml(text, "f.toml")
    assert e.value.issues == [issue]
    assert conflict_issue("a = 1\n# <<<<<<< not at the start\n", "f.toml") is None
