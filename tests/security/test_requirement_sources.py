"""Requirement sources (`[packages] from`, `-r`, `-c`, `${NAME}`) never read outside the project
unless `[packages] external = true`, never quote a file's content or an expanded value, never
block on a named pipe or read without end, and take time linear in a file's size."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernodeck.errors import ManifestError
from kernodeck.manifest.load import load_manifest
from kernodeck.manifest.sources import read_sources
from kernodeck.reqfile import MAX_FILE_BYTES, logical_lines, parse_requirements_file

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SECRET_TEXT = f"{AWS_KEY} {AWS_SECRET}\nroot:x:0:0:root:/root:/bin/bash\n"
TOKEN_VALUE = "tok-9f8e7d6c5b4a-not-a-version"


def _project(tmp_path: Path, sources: str = '["requirements.txt"]', external: bool = False) -> Path:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "repro.toml").write_text(
        'schema-version = 1\n[reference]\nname = "t"\nid = "1"\n[python]\nversion = "3.11"\n'
        f"[packages]\nfrom = {sources}\n"
        + ("external = true\n" if external else "")
        + '[[platform]]\nname = "linux"\nos = "linux"\narch = "x86_64"\n',
        encoding="utf-8",
    )
    return project


def _secret_outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET_TEXT, encoding="utf-8")
    return secret


def _read_error(project: Path) -> str:
    with pytest.raises(ManifestError) as e:
        read_sources(load_manifest(project / "repro.toml"), project / "repro.toml")
    return e.value.render()


def _no_secret(text: str) -> None:
    assert AWS_KEY not in text and AWS_SECRET not in text and "root:x:0" not in text, text


@pytest.mark.parametrize(
    "line",
    [
        "-r {secret}",  # an absolute path
        "-r ../secret.txt",  # climbing out
        "-c ../secret.txt",
        "--requirement=../secret.txt",
        "-r ${OUTSIDE_DIR}/secret.txt",  # a variable leading out
        "-r link.txt",  # a symlink leading out
    ],
)
def test_an_include_leading_outside_is_refused_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    secret = _secret_outside(tmp_path)
    project = _project(tmp_path)
    (project / "link.txt").symlink_to(secret)
    monkeypatch.setenv("OUTSIDE_DIR", str(tmp_path))
    (project / "requirements.txt").write_text(
        f"numpy\n{line.replace('{secret}', str(secret))}\n", encoding="utf-8"
    )
    msg = _read_error(project)
    assert "requirements.txt:2:" in msg and "lies outside the project" in msg
    assert "external = true" in msg
    _no_secret(msg)
    if "{secret}" not in line:  # neither the variable's value nor where the link leads is shown
        assert str(tmp_path) not in msg
    if "${" in line:
        assert "${OUTSIDE_DIR}" in msg


def test_external_true_lets_sources_and_includes_lie_outside(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "base.txt").write_text("six==1.16.0\n", encoding="utf-8")
    (shared / "top.txt").write_text("-r base.txt\nattrs\n", encoding="utf-8")
    project = _project(tmp_path, sources=f'["{shared / "top.txt"}", "requirements.txt"]', external=True)
    (project / "requirements.txt").write_text("-r ../shared/base.txt\nnumpy\n", encoding="utf-8")
    sources = read_sources(load_manifest(project / "repro.toml"), project / "repro.toml")
    assert sources.requirements == ("six==1.16.0", "attrs", "numpy")


@pytest.mark.parametrize("entry", ["/etc/passwd", "../secret.txt", "sub/../../secret.txt"])
def test_a_from_entry_outside_is_refused_when_the_manifest_loads(tmp_path: Path, entry: str) -> None:
    _secret_outside(tmp_path)
    project = _project(tmp_path, sources=f'["{entry}"]')
    with pytest.raises(ManifestError) as e:
        load_manifest(project / "repro.toml")
    (issue,) = e.value.issues
    assert issue.loc == "packages.from[0]" and issue.line == 8
    assert "outside the project" in issue.message and "external = true` under [packages]" in issue.message
    _no_secret(e.value.render())


def test_a_from_entry_that_is_a_symlink_leading_out_is_refused(tmp_path: Path) -> None:
    secret = _secret_outside(tmp_path)
    project = _project(tmp_path)
    (project / "requirements.txt").symlink_to(secret)
    msg = _read_error(project)
    assert "repro.toml:8: packages.from[0]: source 'requirements.txt' lies outside the project" in msg
    _no_secret(msg)


def test_validate_refuses_an_outside_include_with_exit_2_and_quotes_nothing(tmp_path: Path) -> None:
    secret = _secret_outside(tmp_path)
    project = _project(tmp_path)
    (project / "requirements.txt").write_text(f"-r {secret}\n", encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "kernodeck", "validate", str(project / "repro.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "requirements.txt:1:" in r.stderr and "Traceback" not in r.stderr
    _no_secret(r.stdout + r.stderr)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (SECRET_TEXT, "not a requirement, an option or a comment (the line is not shown)"),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", "not a requirement"),
        (f"root:x:0:0:{AWS_KEY}:/root:/bin/bash\n", "not a requirement"),
        (f"-----BEGIN PRIVATE KEY----- {AWS_KEY}\n", "(not shown: it does not look like an option)"),
    ],
)
def test_a_file_that_is_not_requirements_is_never_quoted(tmp_path: Path, content: str, words: str) -> None:
    project = _project(tmp_path)
    (project / ".env").write_text(content, encoding="utf-8")
    (project / "requirements.txt").write_text("numpy\n-r .env\n", encoding="utf-8")
    msg = _read_error(project)
    assert ".env:1:" in msg and words in msg
    _no_secret(msg)


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("foo==${MYTOKEN}", "foo==${MYTOKEN}"),
        ("foo (==${MYTOKEN}", "foo (==${MYTOKEN}"),
        ("-e ${MYTOKEN}", "-e ${MYTOKEN}"),  # a path to another project
        ("-r ${MYTOKEN}.txt", "-r ${MYTOKEN}.txt"),  # a file that does not exist
        ("./${MYTOKEN}/pkg", "./${MYTOKEN}/pkg"),
        ("${MYTOKEN}/pkg", "${MYTOKEN}/pkg"),
    ],
)
def test_messages_show_the_variable_never_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, shown: str
) -> None:
    monkeypatch.setenv("MYTOKEN", TOKEN_VALUE)
    project = _project(tmp_path)
    (project / "requirements.txt").write_text(f"{line}\n", encoding="utf-8")
    msg = _read_error(project)
    assert "requirements.txt:1:" in msg and shown in msg
    assert TOKEN_VALUE not in msg


def test_a_long_value_is_cut_short_in_a_message(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "requirements.txt").write_text("foo==1.0 (" + "x" * 5000 + "\n", encoding="utf-8")
    msg = _read_error(project)
    assert "(5010 characters)" in msg and "x" * 200 not in msg


@pytest.mark.parametrize("how", ["include", "from"])
def test_a_named_pipe_is_refused_without_opening_it(tmp_path: Path, how: str) -> None:
    project = _project(tmp_path, sources='["pipe.txt"]' if how == "from" else '["requirements.txt"]')
    os.mkfifo(project / "pipe.txt")
    (project / "requirements.txt").write_text("-r pipe.txt\n", encoding="utf-8")
    # in a process of its own: were the pipe opened, the read would wait for a writer forever
    r = subprocess.run(
        [sys.executable, "-m", "kernodeck", "validate", str(project / "repro.toml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    where = "repro.toml:8: packages.from[0]" if how == "from" else "requirements.txt:1: -r pipe.txt"
    assert where in r.stderr and "is a FIFO, not a regular file" in r.stderr, r.stderr


def test_a_device_is_refused_even_when_external(tmp_path: Path) -> None:
    project = _project(tmp_path, external=True)
    (project / "requirements.txt").write_text("-r /dev/zero\n", encoding="utf-8")
    msg = _read_error(project)
    assert "requirements.txt:1: -r /dev/zero: the file is a character device, not a regular file" in msg


def test_proc_environ_is_a_located_error_that_quotes_no_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MYTOKEN", TOKEN_VALUE)
    environ = Path("/proc/self/environ")
    assert environ.is_file()  # Linux: size 0 on stat, its NUL-separated variables on read
    project = _project(tmp_path, external=True)
    (project / "requirements.txt").write_text(f"-r {environ}\n", encoding="utf-8")
    msg = _read_error(project)
    assert ":1: holds a NUL byte: not a text file" in msg
    assert TOKEN_VALUE not in msg


def test_nul_and_undecodable_bytes_are_located(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "requirements.txt").write_bytes(b"numpy\nsix\x00\n")
    assert "requirements.txt:2: holds a NUL byte: not a text file" in _read_error(project)
    (project / "requirements.txt").write_bytes(b"numpy\n\n" + AWS_KEY.encode() + b"\xff\xfe\n")
    msg = _read_error(project)
    assert "requirements.txt:3: file is not valid UTF-8" in msg
    _no_secret(msg)


@pytest.mark.parametrize("how", ["include", "from"])
def test_a_file_over_the_cap_is_refused_with_the_cap(tmp_path: Path, how: str) -> None:
    project = _project(tmp_path)
    with (project / "big.txt").open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: costs no disk
    if how == "include":
        (project / "requirements.txt").write_text("-r big.txt\n", encoding="utf-8")
    else:
        _project(tmp_path, sources='["big.txt"]')
    msg = _read_error(project)
    assert "is larger than 16 MiB, the most a requirements file may hold" in msg
    assert ("requirements.txt:1: -r big.txt" if how == "include" else "packages.from[0]") in msg


def test_continued_blank_lines_are_read_in_linear_time(tmp_path: Path) -> None:
    # 200,000 continued blank lines: the comment pattern took time quadratic in the joined blanks
    # (80,000 lines: 134 s); read now in a fraction of a second
    n = 200_000
    text = " \\\n" * n + "numpy  # the comment\n"
    assert logical_lines(text) == [(1, "numpy")]
    f = tmp_path / "r.txt"
    f.write_text("-r b.txt\n" + text, encoding="utf-8")
    (tmp_path / "b.txt").write_text("six # c\n", encoding="utf-8")
    parsed = parse_requirements_file(f)
    assert [r.requirement for r in parsed.requirements] == ["six", "numpy"]


def test_comments_are_cut_as_pip_cuts_them() -> None:
    text = "a#b\nc # d\n# e \\\nf\\\n  # g\nh\t#i\n"
    assert logical_lines(text) == [(1, "a#b"), (2, "c"), (4, "f"), (6, "h")]
