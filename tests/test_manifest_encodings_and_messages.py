"""The manifest loader and init on inputs editors really produce: BOM, non-UTF-8, CRLF, wrong table brackets, very long lines."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.manifest.edit import load_document

BASE = 'schema-version = 1\n[reference]\nname = "x"\nid = "1"\n[python]\nversion = "3.11"\n'
PLATFORM = '[[platform]]\nname = "p"\nos = "linux"\narch = "x86_64"\n'


def _validate(path: Path) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["validate", str(path)])
    assert "Traceback" not in res.output and not isinstance(res.exception, (KeyError, TypeError))
    return res.exit_code, res.output


def test_a_byte_order_mark_is_accepted_and_lines_stay_right(tmp_path: Path) -> None:
    p = tmp_path / "repro.toml"
    p.write_bytes(("\ufeff" + BASE + PLATFORM).encode())
    assert _validate(p)[0] == 0
    p.write_bytes(("\ufeff" + BASE + '[packages]\nrequirements = ["bad spec!!"]\n' + PLATFORM).encode())
    code, out = _validate(p)
    assert code == 2 and f"{p}:8: packages.requirements[0]" in out
    assert load_document(p)["reference"]["name"] == "x"  # capture can edit it too


def test_a_file_that_is_not_utf8_is_a_located_error_for_edits_too(tmp_path: Path) -> None:
    p = tmp_path / "repro.toml"
    p.write_bytes(BASE.encode() + b"# caf\xe9\n" + PLATFORM.encode())
    res = CliRunner().invoke(cli, ["capture", "--manifest", str(p), "--no-system"])
    assert res.exit_code == 2 and f"{p}:7: file is not valid UTF-8" in res.output, res.output


def test_crlf_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "repro.toml"
    text = BASE + '\n\n[packages]\nrequirements = ["ok", "bad spec!!"]\nbogus = 1\n' + PLATFORM
    p.write_bytes(text.replace("\n", "\r\n").encode())
    code, out = _validate(p)
    assert code == 2 and f"{p}:10: packages.requirements[1]" in out and f"{p}:11: packages.bogus" in out


def test_a_single_bracket_table_for_an_array_of_tables_gets_a_hint(tmp_path: Path) -> None:
    p = tmp_path / "repro.toml"
    p.write_text(BASE + '[platform]\nname = "a"\nos = "linux"\narch = "x86_64"\n')
    code, out = _validate(p)
    assert code == 2 and f"{p}:7: platform:" in out
    assert "write [[platform]] (double brackets: a list of tables), not [platform]" in out


def test_very_long_lines_are_cut_in_messages(tmp_path: Path) -> None:
    long = "a" * 20000
    p = tmp_path / "repro.toml"
    p.write_text(BASE + f'[packages]\nrequirements = ["{long} >=1!!"]\n' + PLATFORM)
    code, out = _validate(p)
    assert code == 2 and f"{p}:8: packages.requirements[0]: invalid requirement" in out
    assert "(20006 characters)" in out and max(len(line) for line in out.splitlines()) < 400
    p.write_text(BASE + f'x = "{long}\n')
    code, out = _validate(p)
    assert code == 2 and f"{p}:7:20006: TOML syntax error" in out
    assert max(len(line) for line in out.splitlines()) < 200
    excerpt, caret = [ln for ln in out.splitlines() if "|" in ln][:2]
    assert excerpt.endswith("a") and caret.index("^") == len(excerpt)  # the caret just after the line


def test_init_leaves_out_a_pyproject_it_cannot_honour_and_says_why(tmp_path: Path) -> None:
    """init refers to the project's sources instead of copying them; a source with a requirement
    Kernodeck cannot lock is not referred to, and the starter says where and why."""
    folder = tmp_path / "my proj é"
    folder.mkdir()
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "1"\n'
        'dependencies = ["numpy>=1.26", "not a valid req!!", 42, "mylib @ https://example.com/mylib-1.0.whl"]\n'
    )
    res = CliRunner().invoke(cli, ["init", str(folder)])
    assert res.exit_code == 0, res.output
    text = (folder / "repro.toml").read_text()
    assert "from = " not in text
    assert "# not used: pyproject.toml: project.dependencies: invalid requirement 'not a valid req!!'" in text
    assert _validate(folder / "repro.toml")[0] == 0
