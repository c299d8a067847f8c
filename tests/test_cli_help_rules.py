"""What `--help` and docs/manifest.md promise agrees with what the code does: the interpreter a
command looks at without `--python`, and the placeholders of a check's command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernodeck.checks.runner import PLACEHOLDERS, expand_argv
from kernodeck.cli import cli
from kernodeck.commands.options import PYTHON_DEFAULT
from kernodeck.interpreters import Source, choose

DOCS = Path(__file__).resolve().parents[1] / "docs" / "manifest.md"


def _help(*args: str) -> str:
    res = CliRunner().invoke(cli, [*args, "--help"], terminal_width=400)
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


@pytest.mark.parametrize("command", [("verify",), ("check",), ("capture",)])
def test_every_command_that_chooses_an_interpreter_states_the_one_rule(command: tuple[str, ...]) -> None:
    assert " ".join(PYTHON_DEFAULT.split()) in _help(*command)


def test_doctor_and_diff_refer_to_verify_and_say_how_they_differ() -> None:
    assert "as for verify" in _help("doctor") and "described" in _help("doctor")
    assert "as for verify" in _help("diff")


def test_no_help_still_says_the_old_this_one_default() -> None:
    for command in ("verify", "check", "capture", "doctor", "diff"):
        assert not re.search(r"else this one\)", _help(command)), command


def test_the_rule_in_the_help_is_the_rule_choose_applies(tmp_path: Path) -> None:
    """The project's .venv comes after the activated environments and before the running one."""
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    exe = venv / "python"
    exe.symlink_to(Path("/bin/sh"))
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert choose(project=tmp_path, environ={}).source is Source.PROJECT_VENV
    other = tmp_path / "activated" / "bin"
    other.mkdir(parents=True)
    (other / "python").symlink_to(Path("/bin/sh"))
    picked = choose(project=tmp_path, environ={"VIRTUAL_ENV": str(tmp_path / "activated")})
    assert picked.source is Source.VIRTUAL_ENV
    order = [PYTHON_DEFAULT.index(w) for w in ("activated venv", "conda", ".venv", "running Kernodeck")]
    assert order == sorted(order)


def test_every_placeholder_a_check_command_takes_is_documented_with_an_example() -> None:
    text = DOCS.read_text(encoding="utf-8")
    check = text[text.index("## `[[check]]`") :]
    check = check[: check.index("\n## ", 1)]
    for name in PLACEHOLDERS:
        assert f"`{name}`" in check, name
    assert 'run = ["python"' in check and '"{out}"' in check
    resume = text[text.index("## `[resume]`") :]
    assert "`{out}`" in resume[: resume.index("\n## ", 1)]


def test_the_placeholders_are_the_ones_expanded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = expand_argv(
        ["python", "x.py", "--out", "{out}/e.npy", "--py", "{python}"], "/usr/bin/python3", out
    )
    assert args == ["/usr/bin/python3", "x.py", "--out", f"{out}/e.npy", "--py", "/usr/bin/python3"]
    assert not any("{" in a for a in args)


def test_gpu_expectations_are_documented_with_device_examples_not_a_driver_version() -> None:
    text = DOCS.read_text(encoding="utf-8")
    gpu = text[text.index("## `[system.gpu]`") :]
    gpu = gpu[: gpu.index("\n## ", 1)]
    assert "560.28" not in gpu
    assert '">=8.0"' in gpu and '">=20"' in gpu and '">=1"' in gpu
