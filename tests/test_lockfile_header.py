"""The lock-file header has one owner (`kernodeck.lockfile.header`): what the writers put in it, the
reader finds again, for both formats, and the old header (`manifest-sha256`) is still recognised."""

from __future__ import annotations

from datetime import datetime, timezone

from kernodeck.lock import inputs as lockinputs
from kernodeck.lockfile.header import (
    EXCLUDE_NEWER_KEY,
    HEADER_KEY,
    INPUT_KEY,
    OLD_HEADER_KEY,
    PLATFORM_KEY,
    has_old_header,
    header_digest,
)
from kernodeck.lockfile.read import parse_lockfile
from kernodeck.lockfile.write import PlatformLock, render_pylock, render_requirements

H = ["a" * 64, "b" * 64, "c" * 64]

LOCK = PlatformLock(
    platform="linux-x86_64",
    summary="cpython 3.11, manylinux_2_28 x86_64, backend cpu",
    manifest_name="repro.toml",
    lock_inputs_sha256=H[0],
    exclude_newer=datetime(2026, 11, 30, tzinfo=timezone.utc),
    indexes=(),
    packages=(),
    inputs=(("requirements.in", H[1]),),
)


def test_the_key_names() -> None:
    assert (PLATFORM_KEY, HEADER_KEY, OLD_HEADER_KEY, EXCLUDE_NEWER_KEY, INPUT_KEY) == (
        "platform",
        "lock-inputs-sha256",
        "manifest-sha256",
        "exclude-newer",
        "input-sha256",
    )
    # lockinputs re-exports the header's names rather than spelling them again
    assert lockinputs.HEADER_KEY is HEADER_KEY and lockinputs.OLD_HEADER_KEY is OLD_HEADER_KEY


def test_what_the_requirements_writer_puts_in_the_header_the_reader_finds() -> None:
    text = render_requirements(LOCK)
    assert f"# {INPUT_KEY}: requirements.in {H[1]}\n" in text
    lock = parse_lockfile(text)
    assert lock.platform == "linux-x86_64"
    assert lock.lock_inputs_sha256 == H[0] and lock.manifest_sha256 is None
    assert lock.header[EXCLUDE_NEWER_KEY] == "2026-11-30T00:00:00Z"
    assert header_digest(text) == H[0] and not has_old_header(text)


def test_the_pylock_header_carries_the_same_digest() -> None:
    text = render_pylock(LOCK)
    assert f"# {HEADER_KEY}: {H[0]}   {EXCLUDE_NEWER_KEY}: 2026-11-30T00:00:00Z\n" in text
    assert header_digest(text) == H[0] and not has_old_header(text)


def test_the_old_header_is_still_read() -> None:
    old = render_requirements(LOCK).replace(f"# {HEADER_KEY}: ", f"# {OLD_HEADER_KEY}: ")
    lock = parse_lockfile(old)
    assert lock.manifest_sha256 == H[0] and lock.lock_inputs_sha256 is None
    assert header_digest(old) == H[0] and has_old_header(old)


def test_header_digest_of_both_formats_and_the_old_header() -> None:
    new_txt = f"# platform: linux (x)\n# lock-inputs-sha256: {H[1]}   exclude-newer: -\ndep==1.0\n"
    new_toml = f'# lock-inputs-sha256: {H[2]}   exclude-newer: -\nlock-version = "1.0"\n'
    old_txt = f"# platform: linux (x)\n# manifest-sha256: {H[0]}   exclude-newer: -\ndep==1.0\n"
    assert header_digest(new_txt) == H[1] and not has_old_header(new_txt)
    assert header_digest(new_toml) == H[2] and not has_old_header(new_toml)
    assert header_digest(old_txt) == H[0] and has_old_header(old_txt)
    assert header_digest("dep==1.0\n") is None and not has_old_header("dep==1.0\n")


def test_file_inputs_and_what_changed() -> None:
    from kernodeck.lockfile.header import changed_file_inputs, file_inputs, input_line

    a, b, c = "a" * 64, "b" * 64, "c" * 64
    text = "\n".join(
        [
            "# platform: linux (cpython 3.11)",
            f"# {input_line('pyproject.toml', a)}",
            f"# {input_line('requirements/train base.txt', b)}",
            f"pkg==1.0  # {input_line('not-a-header', c)[:-1]}",
        ]
    )
    recorded = file_inputs(text)
    assert recorded == {"pyproject.toml": a, "requirements/train base.txt": b}
    assert changed_file_inputs(recorded, dict(recorded)) == []
    assert changed_file_inputs(recorded, {"pyproject.toml": c, "extra.txt": a}) == [
        "extra.txt is read now ([packages] from) and was not when the file was written",
        "pyproject.toml changed since the file was written",
        "requirements/train base.txt is no longer read (or is gone) since the file was written",
    ]
