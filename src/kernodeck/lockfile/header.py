"""The header of a lock file: the one owner of its key names, how the writer spells its lines and
how the reader finds them again.

Both formats carry the same comment lines at the top (a requirements file with `# `, a pylock
file as TOML comments):

    platform: linux-x86_64 (cpython 3.11, manylinux_2_28 x86_64, backend cpu)     (requirements only)
    lock-inputs-sha256: <64 hex>   exclude-newer: 2026-11-30T00:00:00Z
    input-sha256: requirements.in <64 hex>                                          (one per file input)

Files written before lock inputs existed carry `manifest-sha256:` where `lock-inputs-sha256:` is
now (`OLD_HEADER_KEY`); readers still recognise it so `kernodeck lock --check` can say why such a
file is stale.
"""

from __future__ import annotations

import re

PLATFORM_KEY = "platform"
HEADER_KEY = "lock-inputs-sha256"  # kernodeck.lockinputs.lock_inputs_sha256 of the platform
OLD_HEADER_KEY = "manifest-sha256"  # the sha256 of the whole manifest, before lock inputs
EXCLUDE_NEWER_KEY = "exclude-newer"
INPUT_KEY = "input-sha256"  # one per file a requirement was read from: "<name> <sha256>"

# Two or more spaces separate the keys that share a line.
_SEPARATOR = "   "


def platform_line(platform: str, summary: str) -> str:
    """`platform: <name> (<summary>)`, without the comment marker."""
    return f"{PLATFORM_KEY}: {platform} ({summary})"


def digest_line(lock_inputs_sha256: str, exclude_newer: str) -> str:
    """`lock-inputs-sha256: <hex>   exclude-newer: <time>`, without the comment marker
    (`exclude_newer` already formatted, see lockfile.write.format_time)."""
    return f"{HEADER_KEY}: {lock_inputs_sha256}{_SEPARATOR}{EXCLUDE_NEWER_KEY}: {exclude_newer}"


def input_line(name: str, sha256: str) -> str:
    """`input-sha256: <name> <hex>`, without the comment marker."""
    return f"{INPUT_KEY}: {name} {sha256}"


# A `key: value` pair of a header comment body; a value ends at the next `  key:` or the line's end.
HEADER_KV = re.compile(
    r"(?:^|\s)("
    + "|".join(re.escape(k) for k in (PLATFORM_KEY, OLD_HEADER_KEY, HEADER_KEY, EXCLUDE_NEWER_KEY))
    + r"):\s*(\S(?:.*?\S)?)(?=\s{2,}[a-z][a-z0-9-]*:\s|\s*$)"
)


def header_values(text: str) -> dict[str, str]:
    """The `key: value` pairs of a lock file's leading comment lines (platform, lock-inputs-sha256,
    exclude-newer), the first of each key; either format."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        for k, v in HEADER_KV.findall(stripped.lstrip("#").strip()):
            out.setdefault(k, v)
    return out


# The freshness digest anywhere in a file's text (new or old key).
HEADER_DIGEST = re.compile(rf"(?:{re.escape(HEADER_KEY)}|{re.escape(OLD_HEADER_KEY)}):\s*([0-9a-f]{{64}})")


def header_digest(text: str) -> str | None:
    """The lock-inputs digest a lock file's header records (the old manifest-sha256 of files
    written before it); None when there is none. Either format: the digest is in a comment."""
    m = HEADER_DIGEST.search(text)
    return m.group(1) if m else None


def has_old_header(text: str) -> bool:
    """Whether a lock file was written with the old header (manifest-sha256, no lock inputs)."""
    return HEADER_KEY not in text and OLD_HEADER_KEY in text


# `# input-sha256: <name> <hex>` lines (the name may hold spaces; the digest ends the line).
_INPUT_LINE = re.compile(
    rf"^[ \t]*#[ \t]*{re.escape(INPUT_KEY)}:[ \t]*(\S.*?)[ \t]+([0-9a-f]{{64}})[ \t]*$", re.M
)


def file_inputs(text: str) -> dict[str, str]:
    """The files a lock file's header says its requirements were read from, name -> sha256."""
    return {m.group(1): m.group(2) for m in _INPUT_LINE.finditer(text)}


def changed_file_inputs(recorded: dict[str, str], current: dict[str, str | None]) -> list[str]:
    """In words, which recorded file inputs differ from `current` (name -> sha256, None: gone),
    and which files are read now that were not; empty when they agree."""
    out: list[str] = []
    for name in sorted(recorded.keys() | current.keys()):
        was, now = recorded.get(name), current.get(name)
        if was == now:
            continue
        if was is None:
            out.append(f"{name} is read now ([packages] from) and was not when the file was written")
        elif now is None:
            out.append(f"{name} is no longer read (or is gone) since the file was written")
        else:
            out.append(f"{name} changed since the file was written")
    return out
