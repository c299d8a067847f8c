"""The platforms conda's files name, as `kernodeck init`'s evidence:

- `conda-lock.yml` (conda-lock's unified lock): `metadata.platforms`;
- explicit lock files (`conda list --explicit`, `conda-lock --kind explicit`): a `# platform:
  linux-64` header line and an `@EXPLICIT` line, in `*.lock`, `conda-*.txt` or `spec-file.txt`;
- an environment file's `platforms:` list (what conda-lock reads).

    for found in conda_platforms(Path(".")):
        found.evidence    # "conda-lock.yml: metadata.platforms" (found.file, found.key)
        found.platforms   # [("linux", "x86_64"), ("macos", "arm64")]

YAML is read line by line, never parsed (no nesting, so no depth to limit): only the block and
flow lists conda and conda-lock write; anything else says nothing. Each file is read up to
`MAX_BYTES` (headers and metadata come first); links are not followed (they may lead outside the
project).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernodeck.formats.condaenv import NAMES as ENV_NAMES

#: conda's platform subdirs -> the manifest's (os, arch).
SUBDIRS: dict[str, tuple[str, str]] = {
    "linux-64": ("linux", "x86_64"),
    "linux-aarch64": ("linux", "aarch64"),
    "linux-ppc64le": ("linux", "ppc64le"),
    "osx-64": ("macos", "x86_64"),
    "osx-arm64": ("macos", "arm64"),
    "win-64": ("windows", "x86_64"),
}

LOCK_NAME = "conda-lock.yml"
MAX_BYTES = 256 * 1024

_EXPLICIT_GLOBS = ("*.lock", "conda-*.txt", "spec-file.txt")
_PLATFORM_LINE = re.compile(r"^#\s*platform:\s*(\S+)\s*$")
_ITEM = re.compile(r"^\s*-\s*['\"]?([A-Za-z0-9_-]+)['\"]?\s*(?:#.*)?$")


@dataclass(frozen=True)
class CondaPlatforms:
    file: str  # "conda-lock.yml"
    key: str  # where in it: "metadata.platforms", "platform linux-64", "platforms"
    platforms: list[tuple[str, str]]  # (os, arch), in the file's order, subdirs Kernodeck knows
    lock: bool = True  # a lock file (an environment file's `platforms:` is not)

    @property
    def evidence(self) -> str:
        return f"{self.file}: {self.key}"


def _regular(path: Path) -> bool:
    """A file of the project itself (a link may point outside it)."""
    return path.is_file() and not path.is_symlink()


def _head(path: Path) -> list[str]:
    try:
        with path.open("rb") as f:
            return f.read(MAX_BYTES).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _mapped(subdirs: list[str]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(SUBDIRS[s] for s in subdirs if s in SUBDIRS))


def _list_under(lines: list[str], start: int, indent: int) -> list[str]:
    """The items of the YAML list whose key is at `lines[start]` (indented `indent`): a flow list
    on that line, or the `- item` lines below it."""
    rest = lines[start].split(":", 1)[1].split("#", 1)[0].strip()
    if rest.startswith("[") and rest.endswith("]"):
        return [v.strip().strip("'\"") for v in rest[1:-1].split(",") if v.strip()]
    out = []
    for line in lines[start + 1 :]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _ITEM.match(line)
        if m is None or len(line) - len(line.lstrip()) < indent:
            break
        out.append(m.group(1))
    return out


def _key_list(lines: list[str], key: str, parent: str | None) -> list[str]:
    """The list under `key` (top level, or indented under the top-level key `parent`)."""
    inside = parent is None
    for i, line in enumerate(lines):
        if parent is not None and line.strip() and not line[:1].isspace() and not line.startswith("#"):
            inside = re.match(rf"^{re.escape(parent)}\s*:", line) is not None
            continue
        m = re.match(rf"^(\s*){re.escape(key)}\s*:", line)
        if m is not None and inside and (parent is None) == (m.group(1) == ""):
            return _list_under(lines, i, len(m.group(1)))
    return []


def _explicit(path: Path) -> list[str]:
    """The platform of an explicit lock file (`# platform:` with `@EXPLICIT`), else nothing."""
    lines = _head(path)
    if not any(line.strip() == "@EXPLICIT" for line in lines):
        return []
    return [m.group(1) for m in map(_PLATFORM_LINE.match, lines) if m is not None][:1]


def _explicit_files(root: Path) -> Iterator[Path]:
    seen: set[Path] = set()
    for pattern in _EXPLICIT_GLOBS:
        for path in sorted(root.glob(pattern)):
            if path not in seen and _regular(path):
                seen.add(path)
                yield path


def conda_platforms(root: Path) -> list[CondaPlatforms]:
    """The platforms each conda file in `root` names (see the module docstring); files that name
    none (or none Kernodeck knows) are left out."""
    out: list[CondaPlatforms] = []
    lock = root / LOCK_NAME
    if _regular(lock):
        out.append(
            CondaPlatforms(
                LOCK_NAME, "metadata.platforms", _mapped(_key_list(_head(lock), "platforms", "metadata"))
            )
        )
    for path in _explicit_files(root):
        subdirs = _explicit(path)
        out.append(CondaPlatforms(path.name, f"platform {''.join(subdirs)}", _mapped(subdirs)))
    env = next((root / n for n in ENV_NAMES if _regular(root / n)), None)
    if env is not None:
        out.append(
            CondaPlatforms(
                env.name, "platforms", _mapped(_key_list(_head(env), "platforms", None)), lock=False
            )
        )
    return [c for c in out if c.platforms]
