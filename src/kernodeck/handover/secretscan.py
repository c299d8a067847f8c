"""The scan `bundle` runs over every file it is about to write: findings with file, line and rule,
and the two reviewable ways to accept one that is not a secret.

- an inline marker on the finding's (first) line: `kernodeck: allow-secret` in any comment syntax
  (as gitleaks' `gitleaks:allow` and detect-secrets' `pragma: allowlist secret`);
- the allowlist file `.kernodeck-secrets-allow` beside the manifest: one `PATH SHA` per line
  (`#` starts a comment), where SHA is the first 16 hex digits of the sha256 of the finding's
  lines, stripped; a finding's message prints its own entry. An edited line has another hash, so
  it is checked again.

What is a finding is `scrub.Scrubber.hits` (the same rules the scrubber applies); this module only
places them and applies what the author accepted. The rules and their measured precision and
recall are in docs/secret-scanning.md.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernodeck.errors import UsageError
from kernodeck.handover.scrub import Scrubber

#: The inline marker that accepts a finding on its line.
ALLOW_MARKER = "kernodeck: allow-secret"
#: The allowlist file, beside the manifest.
ALLOWLIST_FILE = ".kernodeck-secrets-allow"

_ENTRY = re.compile(r"^(?P<path>\S+)[ \t]+(?P<sha>[0-9a-f]{16})$")


@dataclass(frozen=True)
class Finding:
    """Something in a file that must not leave the machine, located."""

    path: str
    line: int
    rule: str
    kind: str
    line_sha: str  # the first 16 hex digits of the sha256 of the finding's lines, stripped

    def entry(self) -> str:
        """The allowlist line that accepts this finding (and only while its lines are unchanged)."""
        return f"{self.path} {self.line_sha}"


@dataclass(frozen=True)
class Allowlist:
    """The accepted findings of `.kernodeck-secrets-allow`: (path, line hash) pairs."""

    entries: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def read(cls, folder: Path) -> Allowlist:
        """The allowlist beside the manifest (empty when there is none); a malformed line is a
        located usage error."""
        path = folder / ALLOWLIST_FILE
        if not path.is_file():
            return cls()
        entries: set[tuple[str, str]] = set()
        for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            m = _ENTRY.match(line)
            if m is None:
                raise UsageError(
                    f"{ALLOWLIST_FILE}:{number}: expected `PATH SHA` (SHA: 16 hex digits), got {line[:60]!r}",
                    hint="copy the `to accept:` text of the finding the bundle printed",
                )
            entries.add((m["path"], m["sha"]))
        return cls(frozenset(entries))

    def accepts(self, finding: Finding) -> bool:
        return (finding.path, finding.line_sha) in self.entries


def line_sha(lines: list[str]) -> str:
    """The allowlist's key of a finding's lines."""
    joined = "\n".join(line.strip() for line in lines)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]


def scan_text(scrub: Scrubber, path: str, text: str, *, generated: bool) -> list[Finding]:
    """Every finding in one file's text, sorted by line (one per rule and line)."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    lines = text.split("\n")
    found: dict[tuple[int, str], Finding] = {}
    for hit in scrub.hits(text, generated=generated):
        first = _line_of(starts, hit.start)
        last = _line_of(starts, max(hit.start, hit.end - 1))
        key = (first, hit.rule)
        if key not in found:
            found[key] = Finding(path, first + 1, hit.rule, hit.kind, line_sha(lines[first : last + 1]))
    return sorted(found.values(), key=lambda f: (f.line, f.rule))


def _line_of(starts: list[int], offset: int) -> int:
    return bisect.bisect_right(starts, offset) - 1


@dataclass(frozen=True)
class ScanResult:
    refused: list[Finding]
    accepted: list[Finding]  # by an inline marker or the allowlist: reported, not refused


def scan_files(
    scrub: Scrubber, files: Mapping[str, bytes], verbatim: Mapping[str, str], allow: Allowlist
) -> ScanResult:
    """Scan every file about to leave the machine. `verbatim` names the files copied as they are
    (code, data): only they may name a path below a temporary folder."""
    refused: list[Finding] = []
    accepted: list[Finding] = []
    for rel, data in sorted(files.items()):
        text = data.decode("utf-8", "replace")
        lines = text.split("\n")
        for finding in scan_text(scrub, rel, text, generated=rel not in verbatim):
            marked = ALLOW_MARKER in lines[finding.line - 1]
            (accepted if marked or allow.accepts(finding) else refused).append(finding)
    return ScanResult(refused, accepted)


def problems(result: ScanResult, verbatim: Mapping[str, str]) -> list[str]:
    """The refused findings as the bundle's error lists them: `file:line: kind [rule] (why the
    file is there; to accept: ...)`."""
    return [
        f"{f.path}:{f.line}: {f.kind} [{f.rule}] ({verbatim.get(f.path, 'generated file')}; to accept: {f.entry()})"
        for f in result.refused
    ]


def accepted_note(result: ScanResult) -> list[str]:
    """The warning a bundle gives for accepted findings (empty when there are none)."""
    if not result.accepted:
        return []
    where = ", ".join(f"{f.path}:{f.line} [{f.rule}]" for f in result.accepted)
    return [
        f"secret-scanner findings accepted (by {ALLOW_MARKER} or {ALLOWLIST_FILE}), written as they are: {where}"
    ]
