"""`BUNDLE.sha256`: the one owner of a bundle's checksum file — writing, reading and checking it.

The format is `sha256sum`'s (`<hex>  <relative path>` per line, sorted), so a receiver without
Kernodeck can run `sha256sum -c BUNDLE.sha256`. `kernodeck bundle` writes it (`render`), rebuild
checks a bundle against it before anything else (`audit`: the file lists every file of the folder
and each matches), and verify's code layer reads it (`parse`) to tie the bundled code files to
what the bundle recorded.

A folder is *bundle-shaped* (`is_bundle_shaped`) when it holds the sums file, REBUILD.md or
references.json: such a folder is checked as a bundle, and a missing or empty sums file is a
problem, never a reason to treat it as a plain project.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kernodeck.fingerprint import sha256_file

#: The checksum file's name, at the top of every bundle.
NAME = "BUNDLE.sha256"
#: The signature of the checksum file (`kernodeck.handover.signing`).
SIGNATURE = NAME + ".sig"
#: Files every bundle has beside the sums file: either one makes a folder bundle-shaped.
REBUILD_MD = "REBUILD.md"
REFERENCES = "references.json"

#: What a rebuild, a verify or a check writes into a bundle folder, and the folder where REBUILD.md
#: installs Kernodeck: not part of the bundle, so not listed (never read as an input). At the top,
#: reports a receiver writes there (`--json`, `--junit`, `--markdown`, `--html FILE`) are exempt
#: by their suffix.
_WRITTEN_HERE = frozenset({"installed-after.txt", "build-constraints.txt", SIGNATURE})
_REPORT_SUFFIXES = (".json", ".xml", ".html", ".md")
_WRITTEN_DIRS = frozenset({"out", ".kernodeck"})
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


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


def is_bundle(folder: Path) -> bool:
    """Whether `folder` holds a checksum file (the mark of a folder written by `kernodeck bundle`)."""
    return (folder / NAME).is_file()


def is_bundle_shaped(folder: Path) -> bool:
    """Whether `folder` looks like a bundle (the sums file, REBUILD.md or references.json in it):
    it is then checked as one, whatever is missing."""
    return any((folder / name).exists() for name in (NAME, REBUILD_MD, REFERENCES))


@dataclass
class Audit:
    """What `audit` found: the files listed, and every problem (empty: the bundle is intact)."""

    listed: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _strict_parse(text: str) -> tuple[dict[str, str], list[str]]:
    """({path: sha256}, problems) of a sums file read strictly: every line `<sha256>  <path>`."""
    out: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            problems.append(f"{NAME}:{number}: not a `<sha256>  <path>` line")
            continue
        name = m.group(2)
        if name in out and out[name] != m.group(1):
            problems.append(f"{NAME}:{number}: {name} is listed twice with different sha256")
        out[name] = m.group(1)
    return out, problems


def _skipped_dir(rel: PurePosixPath, path: Path, listed_dirs: set[str]) -> bool:
    """A folder a rebuild, verify or check writes (a venv, bytecode caches, check outputs), and
    that holds no listed file."""
    if rel.as_posix() in listed_dirs:
        return False
    top = len(rel.parts) == 1
    return (top and rel.name in _WRITTEN_DIRS) or rel.name == "__pycache__" or (path / "pyvenv.cfg").is_file()


def present_files(folder: Path, listed: Mapping[str, str] | None = None) -> list[str]:
    """Every file of the bundle `folder` that the sums file must list (relative POSIX paths),
    sorted: all but the sums file, what rebuild/verify/checks write there, and venvs (a folder
    holding a `listed` file is always walked)."""
    listed_dirs = {str(parent) for name in (listed or {}) for parent in PurePosixPath(name).parents}
    out: list[str] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        base = PurePosixPath(here.relative_to(folder).as_posix())
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(base / d, here / d, listed_dirs))
        for name in files:
            rel = (base / name).as_posix().removeprefix("./")
            top = base == PurePosixPath(".")
            if rel == NAME or (top and (name in _WRITTEN_HERE or name.endswith(_REPORT_SUFFIXES))):
                continue
            out.append(rel)
    return sorted(out)


def _listed_problems(folder: Path, sums: Mapping[str, str]) -> list[str]:
    root = folder.resolve()
    bad: list[str] = []
    for name, digest in sorted(sums.items()):
        p = folder / name
        if p.is_symlink() or not p.is_file():
            bad.append(f"{name} is listed in {NAME} but missing")
        elif root not in p.resolve().parents:
            bad.append(f"{name} is outside the bundle")
        elif sha256_file(p) != digest:
            bad.append(f"{name} differs from its sha256 in {NAME}")
    return bad


def _code_left_out(folder: Path) -> bool:
    """Whether the bundle says it carries no code (`--no-code`: its files are then copied into a
    checkout of the pinned revision, as REBUILD.md says). Read only after references.json was
    found listed and intact."""
    import json

    try:
        refs = json.loads((folder / REFERENCES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    code = (
        next((r for r in refs if isinstance(r, dict) and r.get("kind") == "code"), None)
        if isinstance(refs, list)
        else None
    )
    return code is not None and code.get("included") is False


def _checkout_files(folder: Path) -> set[str]:
    """The files of the git checkout a `--no-code` bundle was copied into whose content is what
    HEAD records (relative to `folder`): git ties them to the revision verify's code layer checks.
    Read with `git ls-tree` (objects only: no hook, filter or fsmonitor of the checkout runs) and
    compared by git's own blob hash; empty outside a checkout."""
    from kernodeck.gitstate import run_git

    tree = run_git(folder, "ls-tree", "-r", "-z", "HEAD")
    if tree is None or tree.returncode != 0:
        return set()
    out: set[str] = set()
    for entry in tree.stdout.split("\0"):
        meta, _, rel = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and _blob_id(folder / rel, len(parts[2])) == parts[2]:
            out.add(rel)
    return out


def _blob_id(path: Path, hex_len: int) -> str | None:
    """git's object id of a file's content (sha1, or sha256 in a sha256 repository)."""
    try:
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None
    if data is None:
        return None
    h = hashlib.sha256() if hex_len == 64 else hashlib.sha1()  # git object ids, not a security hash
    h.update(b"blob %d\0" % len(data) + data)
    return h.hexdigest()


def audit(folder: Path) -> Audit:
    """Check the bundle-shaped `folder` before anything runs: its sums file exists, is readable
    and lists files; every listed file is there, inside the folder, with its sha256; and every
    file present (`present_files`) is listed. Problems name the file."""
    try:
        text = (folder / NAME).read_text(encoding="utf-8")
    except FileNotFoundError:
        marks = " and ".join(n for n in (REBUILD_MD, REFERENCES) if (folder / n).exists())
        return Audit(
            0,
            [
                f"{NAME} is missing, but {marks or 'a bundle file'} is here (the mark of a folder written by"
                " `kernodeck bundle`): nothing ties this folder's files to what was bundled"
            ],
        )
    except (OSError, UnicodeDecodeError) as e:
        return Audit(0, [f"{NAME} cannot be read: {e}"])
    sums, problems = _strict_parse(text)
    if not sums:
        return Audit(0, [*problems, f"{NAME} lists no files"])
    problems += _listed_problems(folder, sums)
    present = [*present_files(folder, sums), *(n for n in (REBUILD_MD, REFERENCES) if (folder / n).is_file())]
    known = set(sums)
    if not problems and REFERENCES in sums and _code_left_out(folder):
        known |= _checkout_files(folder)
        present = [rel for rel in present if not rel.startswith(".git/")]
    problems += [f"{rel} is not listed in {NAME}" for rel in sorted(set(present)) if rel not in known]
    return Audit(len(sums), problems)
