"""Manifest values that would crash or mislead later are refused when the manifest loads: an
infinite or nan number, platform names that collide on a case-insensitive file system, an id of
10 MB or on several lines, environment tables holding NUL or line breaks; a long value is never
printed whole; capture says what a path that exists but is no file truly is."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.capture import capture
from kernodeck.errors import ManifestError
from kernodeck.manifest.load import loads_manifest
from kernodeck.manifest.schema import CROSS_FIELD_RULES, MAX_TIMEOUT_S, cross_field_problems

HEAD = 'schema-version = 1\n[reference]\nname = "t"\nid = "1"\n[python]\nversion = "3.11"\n'
PLATFORM = '[[platform]]\nname = "linux"\nos = "linux"\narch = "x86_64"\n'
CHECK = '[[check]]\nname = "c"\nrun = ["true"]\n'


def _issues(text: str) -> list[tuple[str, str, int | None]]:
    with pytest.raises(ManifestError) as e:
        loads_manifest(text)
    return [(i.loc, i.message, i.line) for i in e.value.issues]


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        (CHECK + "timeout = inf\n", "check[0].timeout"),
        (CHECK + "timeout = +inf\n", "check[0].timeout"),
        (CHECK + "timeout = nan\n", "check[0].timeout"),
        (CHECK + "timeout = -5\n", "check[0].timeout"),
        (CHECK + f"timeout = {MAX_TIMEOUT_S + 1}\n", "check[0].timeout"),
        ('[resume]\nrun = ["true"]\ntimeout = inf\n[resume.checkpoint]\npath = "c.pt"\n', "resume.timeout"),
        (CHECK + '[[check.output]]\npath = "o.json"\nmin = nan\n', "check[0].output[0].min"),
        (
            CHECK + '[[check.output]]\npath = "o.json"\nreference = "r.json"\natol = nan\n',
            "check[0].output[0].atol",
        ),
    ],
)
def test_numbers_that_crash_or_compare_with_nothing_are_refused(extra: str, loc: str) -> None:
    issues = _issues(HEAD + PLATFORM + extra)
    hit = [i for i in issues if i[0] == loc]
    assert hit and hit[0][2] is not None, issues


def test_a_finite_timeout_within_the_bound_loads() -> None:
    m = loads_manifest(HEAD + PLATFORM + CHECK + f"timeout = {MAX_TIMEOUT_S}\n")
    assert m.check[0].timeout == MAX_TIMEOUT_S


def test_check_with_an_infinite_timeout_is_exit_2_not_an_overflow(tmp_path: Path) -> None:
    (tmp_path / "repro.toml").write_text(HEAD + PLATFORM + CHECK + "timeout = inf\n", encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "kernodeck", "check", str(tmp_path / "repro.toml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "check[0].timeout" in r.stderr and "OverflowError" not in r.stderr and "Traceback" not in r.stderr


def test_platform_names_differing_only_in_case_are_refused() -> None:
    second = PLATFORM.replace('name = "linux"', 'name = "Linux"')
    issues = _issues(HEAD + PLATFORM + second)
    assert [(loc, line) for loc, _, line in issues] == [("platform[1].name", 12)]
    assert "differs from 'linux' (platform[0]) only in case" in issues[0][1]


def test_a_long_id_is_refused_and_never_printed_whole() -> None:
    # 1 MB stands for the attack's 10 MB (tomllib alone takes seconds to read 10 MB of string)
    long_id = "x" * 1_000_000
    issues = _issues(HEAD.replace('id = "1"', f'id = "{long_id}"') + PLATFORM)
    (loc, message, line) = issues[0]
    assert loc == "reference.id" and line == 4
    assert "1000000 characters" in message and len(message) < 400


@pytest.mark.parametrize("value", ['"2026-12-01.1\\n[injected]"', '"a\\u0000b"'])
def test_an_id_on_several_lines_or_with_nul_is_refused(value: str) -> None:
    issues = _issues(HEAD.replace('id = "1"', f"id = {value}") + PLATFORM)
    assert issues[0][0] == "reference.id" and "control characters" in issues[0][1]


def test_any_long_value_in_a_message_is_cut() -> None:
    bad = "3." + "y" * 1_000_000  # an invalid python version: the message quotes it
    issues = _issues(HEAD.replace('version = "3.11"', f'version = "{bad}"') + PLATFORM)
    assert issues[0][0] == "python.version" and "(1000002 characters)" in issues[0][1]
    assert len(issues[0][1]) < 400
    key = "k" * 100_000  # an unknown key: the location names it
    issues = _issues(HEAD + PLATFORM + f"{key} = 1\n")
    assert all(len(loc) < 200 and len(message) < 400 for loc, message, _ in issues), issues


@pytest.mark.parametrize(
    ("table", "entry", "loc"),
    [
        (
            "[determinism.env]",
            'CUBLAS_WORKSPACE_CONFIG = ":4096:8\\nLD_PRELOAD=/tmp/x.so"',
            "determinism.env",
        ),
        ("[determinism.env]", '"A\\nB" = "1"', "determinism.env"),
        ("[determinism.env]", '"A=B" = "1"', "determinism.env"),
        ("[determinism.env]", 'A = "x\\u0000y"', "determinism.env"),
        (CHECK + "[check.env]", 'A = "x\\ry"', "check[0].env"),
    ],
)
def test_environment_tables_refuse_nul_and_line_breaks(table: str, entry: str, loc: str) -> None:
    issues = _issues(HEAD + PLATFORM + f"{table}\n{entry}\n")
    assert [i[0] for i in issues] == [loc], issues


def test_a_tab_in_an_environment_value_is_kept() -> None:
    m = loads_manifest(HEAD + PLATFORM + '[determinism.env]\nA = "x\\ty"\n')
    assert m.determinism is not None and m.determinism.env == {"A": "x\ty"}


def test_cross_field_rules_are_small_functions_each_seen() -> None:
    # every rule of the table runs: a manifest breaking one rule of each kind reports each
    text = (
        HEAD
        + PLATFORM
        + PLATFORM.replace('name = "linux"', 'name = "LINUX"')
        + '[[weights]]\nname = "w"\nhub = "o/n"\n'
        + CHECK
        + '[[check.output]]\npath = "o.json"\nmin = 2.0\nmax = 1.0\n'
    )
    with pytest.raises(ManifestError) as e:
        loads_manifest(text)
    locs = {i.loc for i in e.value.issues}
    assert {"platform[1].name", "weights[0].revision", "weights[0].files", "check[0].output[0].min"} <= locs
    assert len(CROSS_FIELD_RULES) >= 10
    assert cross_field_problems(loads_manifest(HEAD + PLATFORM)) == []


@pytest.mark.parametrize("kind", ["socket", "fifo", "missing"])
def test_capture_names_what_a_path_is(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data.bin"
    if kind == "socket":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(data))
    elif kind == "fifo":
        os.mkfifo(data)
    (tmp_path / "repro.toml").write_text(
        HEAD + PLATFORM + f'[[data]]\nname = "d"\npath = "data.bin"\nsha256 = "{"0" * 64}"\n',
        encoding="utf-8",
    )
    try:
        result = capture(tmp_path / "repro.toml", system_probe=None, python=sys.executable, dry_run=True)
    finally:
        if kind == "socket":
            server.close()
    note = next(n for n in result.notes if n.startswith("data d:"))
    expected = {
        "socket": "data.bin is a socket, not a regular file",
        "fifo": "data.bin is a FIFO, not a regular file",
        "missing": "data.bin not found",
    }[kind]
    assert expected in note, note
    assert kind == "missing" or "not found" not in note


def test_a_name_too_long_for_a_file_name_is_refused() -> None:
    issues = _issues(HEAD + PLATFORM.replace('name = "linux"', f'name = "{"l" * 300}"'))
    assert issues[0][0] == "platform[0].name" and "at most 100 characters, got 300" in issues[0][1]
