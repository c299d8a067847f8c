"""The options every command shares have one meaning: `--json FILE` writes FILE (atomically) and the
human report stays on stdout; `--json -` or a bare `--json` prints the JSON on stdout and the human
report on stderr; `-q` has one help text (commands.options.QUIET_HELP) everywhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kernodeck.cli import cli
from kernodeck.commands.options import QUIET_HELP
from kernodeck.report import Report, Step
from tests.fixtures.lock_project import write_manifest


def _invoke(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.stdout, res.stderr


def _interpreter_manifest(tmp_path: Path) -> Path:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return write_manifest(
        tmp_path / "proj", requirements=["app"], default_url="http://127.0.0.1:9/simple", python=python
    )


@pytest.mark.parametrize("spelling", [["--json"], ["--json", "-"]])
def test_verify_json_on_stdout_and_the_report_on_stderr(tmp_path: Path, spelling: list[str]) -> None:
    manifest = _interpreter_manifest(tmp_path)
    args = [
        "verify",
        str(manifest),
        "--python",
        sys.executable,
        "--platform",
        "linux",
        "--only",
        "interpreter",
    ]
    code, out, err = _invoke([*args, *spelling])
    assert code == 0, out + err
    assert {s["layer"] for s in json.loads(out)["steps"]} == {"interpreter"}
    assert "interpreter" in err


def test_verify_json_file_keeps_the_report_on_stdout(tmp_path: Path) -> None:
    manifest = _interpreter_manifest(tmp_path)
    target = tmp_path / "r.json"
    code, out, err = _invoke(
        [
            *("verify", str(manifest), "--python", sys.executable, "--platform", "linux"),
            *("--only", "interpreter", "--json", str(target)),
        ]
    )
    assert code == 0, out + err
    assert {s["layer"] for s in json.loads(target.read_text())["steps"]} == {"interpreter"}
    assert "interpreter" in out and not out.lstrip().startswith("{")


def test_diff_with_json_on_stdout_still_shows_the_differences_on_stderr(tmp_path: Path) -> None:
    a, b = Report(reference_id="r"), Report(reference_id="r")
    a.add(Step.passed("packages", "numpy", observed="2.0.0"))
    b.add(Step.failed("packages", "numpy", "numpy 2.1.0 is installed, 2.0.0 is locked", observed="2.1.0"))
    a.write_json(tmp_path / "a.json")
    b.write_json(tmp_path / "b.json")
    code, out, err = _invoke(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"])
    assert code == 1 and json.loads(out)["layers"] == ["packages"]
    assert "numpy" in err


def _quiet_helps() -> dict[str, str | None]:
    helps = {}
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        for param in command.params:
            if isinstance(param, click.Option) and "-q" in param.opts:
                helps[name] = param.help
    return helps


def test_quiet_has_one_meaning_everywhere() -> None:
    helps = _quiet_helps()
    assert {"validate", "lock", "verify", "check"} <= set(helps)
    assert set(helps.values()) == {QUIET_HELP}


def test_every_json_option_takes_a_bare_json() -> None:
    ctx = click.Context(cli)
    with_json = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        for param in command.params:
            if isinstance(param, click.Option) and "--json" in param.opts:
                with_json.append(name)
                assert param.flag_value == "-", name
    assert {"lock", "verify", "doctor", "check", "diff", "rebuild"} <= set(with_json)
