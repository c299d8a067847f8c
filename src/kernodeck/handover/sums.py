"""`BUNDLE.sha256`: the one owner of a bundle's checksum file — writing, reading and checking it.

The format is `sha256sum`'s (`<hex>  <relative path>` per line, sorted), so a receiver without
Kernodeck can run `sha256sum -c BUNDLE.sha256`. `kernodeck bundle` writes it (`render`), rebuild
checks a bundle against it before anything else (`check`), and verify's code layer reads it
(`parse`) to tie the bundled code files to what the bundle recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from kernodeck.fingerprint import sha256_file

#: The checksum file's name, at the top of every bundle.
NAME = "BUNDLE.sha256"


def render(files: Mapping[str, bytes]) -> str:
    """The checksum file for `files` ({relative POSIX path: content}), sorted by path."""
    return "".join(f"{hashlib.sha256(files[rel]).hexdigest()}  {rel}\n" for rel in sorted(files))


def parse(text: str) -> dict[str, str]:
    """{relative path: sha256} from the file's text (blank lines and `#` comments ignored; the
    binary-mode `*` before a name is accepted)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        out[name.lstrip("*")] = digest.strip()
    return out


def read(folder: Path) -> dict[str, str]:
    """The parsed checksum file of the bundle `folder` (OSError/UnicodeDecodeError if unreadable)."""
    return parse((folder / NAME).read_text(encoding="utf-8"))


def check(folder: Path) -> tuple[int, list[str]]:
    """(number of files listed, problems) for the bundle `folder`: every listed file must be
    there, be a regular file inside the folder and have the listed sha256."""
    sums = read(folder)
    root = folder.resolve()
    bad: list[str] = []
    for name, digest in sorted(sums.items()):
        p = folder / name
        if p.is_symlink() or not p.is_file():
            bad.append(f"{name} is missing")
            continue
        if root not in p.resolve().parents:
            bad.append(f"{name} is outside the bundle")
            continue
        if sha256_file(p) != digest:
            bad.append(f"{name} changed")
    return len(sums), bad


def is_bundle(folder: Path) -> bool:
    """Whether `folder` holds a checksum file (the mark of a folder written by `kernodeck bundle`)."""
    return (folder / NAME).is_file()
