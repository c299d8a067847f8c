"""Read a `requirements-rebuild-<platform>.txt` written by `kernodeck lock` (pip-tools format).

The file has header comments (`# platform: ...`, `# lock-inputs-sha256: ...`; files written
before it carry `# manifest-sha256: ...`), option lines
(`--index-url`, `--extra-index-url`, `--only-binary`, `--find-links`, ...), and one pin per
requirement: `name==version [; marker] \\` followed by `--hash=sha256:<hex>` continuation lines
and `# via ...` comments. Reading is strict about pins (a line that is not one is an error with
its line number) and tolerant about comments.

The header's key names and its freshness digest (`header_digest`, `has_old_header`) belong to
`kernodeck.lockfile.header`.

`pins_of_text` / `read_pins` read the same files leniently, for `kernodeck lock` preferring the
versions already pinned (minimal churn): a line that is not a pin is skipped, never an error.

A file left with git's merge conflict markers (`<<<<<<<` ... `>>>>>>>`, two teammates locked at
once) is an error at the first marker when read strictly; read leniently, the pins between the
markers are left out (neither side is preferred: the lock resolves them afresh) and the rest kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.errors import KernodeckError
from kernodeck.lockfile.header import HEADER_KEY, HEADER_KV, OLD_HEADER_KEY, PLATFORM_KEY
from kernodeck.lockfile.names import requirements_path
from kernodeck.support.conflicts import blank_conflicts, conflict_regions, regions_text


class LockfileError(KernodeckError):
    """A requirements file could not be read or holds a line that is not a pin or an option."""


def conflict_note(text: str, filename: str) -> str | None:
    """What to say about a file left with merge conflict markers; None when it has none."""
    regions = conflict_regions(text.splitlines())
    if not regions:
        return None
    where = regions_text(regions)
    return (
        f"{filename} had git merge conflict markers ({where}): the pins between them were resolved "
        "afresh, the others kept"
    )


@dataclass(frozen=True)
class Pin:
    """One pinned distribution: `name==version` (version with its local label, e.g. 2.6.0+cu126)."""

    name: str
    version: str | None
    hashes: tuple[str, ...] = ()
    marker: str | None = None
    extras: tuple[str, ...] = ()
    url: str | None = None
    via: tuple[str, ...] = ()
    line: int = 0

    @property
    def key(self) -> NormalizedName:
        return canonicalize_name(self.name)

    def applies(self, environment: dict[str, str]) -> bool:
        """Whether the pin's marker holds in a marker environment (no marker: always)."""
        if not self.marker:
            return True
        env = {**environment, "extra": ""}
        return Marker(self.marker).evaluate(env)


#: The options of a requirements file that say where packages come from.
INDEX_OPTIONS = ("--index-url", "--extra-index-url", "--find-links", "--no-index", "-i ", "-f ")


@dataclass
class LockFile:
    path: Path
    pins: list[Pin] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)

    def by_name(self) -> dict[NormalizedName, Pin]:
        return {p.key: p for p in self.pins}

    def index_options(self) -> list[str]:
        """The options that say where packages come from (`--index-url URL`, `--extra-index-url`,
        `--find-links`, `--no-index`), as written (`${VAR}` placeholders kept)."""
        return [o for o in self.options if o.startswith(INDEX_OPTIONS)]

    @property
    def platform(self) -> str | None:
        v = self.header.get(PLATFORM_KEY)
        return v.split(" ", 1)[0] if v else None

    @property
    def manifest_sha256(self) -> str | None:
        """The old header (before lock inputs): the sha256 of the whole manifest file."""
        return self.header.get(OLD_HEADER_KEY)

    @property
    def lock_inputs_sha256(self) -> str | None:
        """kernodeck.lock.inputs: the digest of what can change a pin."""
        return self.header.get(HEADER_KEY)


_COMMENT = re.compile(r"(^|\s+)#.*$")
_HASH = re.compile(r"^--hash[=\s]\s*([a-z0-9]+):([0-9a-fA-F]+)$")
_OPTION_SPLIT = re.compile(r"\s+(?=--)")
# `name==version` with nothing else (what `kernodeck lock` writes): read without the PEP 508 parser
_SIMPLE_PIN = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(===?)\s*([A-Za-z0-9.!+_-]+)")


def lockfile_path(manifest_dir: Path, platform: str) -> Path:
    return requirements_path(manifest_dir, platform)


#: The last files parsed, by (path, text): a verify reads one lock in several layers (and
#: require() once more before the probe's facts), parsed once while its bytes are the same.
_PARSED: dict[tuple[str, str], LockFile] = {}
_PARSED_KEEP = 4


def read_lockfile(path: str | Path) -> LockFile:
    """The lock file at `path`, read strictly (LockfileError). Read every time; parsed again only
    when its text differs from one of the last parsed (each caller gets its own LockFile)."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except FileNotFoundError:
        raise LockfileError(f"no requirements file at {p}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LockfileError(f"cannot read requirements file {p}: {e}") from None
    key = (str(p), text)
    lock = _PARSED.get(key)
    if lock is None:
        lock = parse_lockfile(text, p)
        while len(_PARSED) >= _PARSED_KEEP:
            del _PARSED[next(iter(_PARSED))]
        _PARSED[key] = lock
    return LockFile(lock.path, list(lock.pins), list(lock.options), dict(lock.header))


def parse_lockfile(text: str, path: str | Path = "requirements.txt", *, lenient: bool = False) -> LockFile:
    """Parse the text of a requirements file; raises LockfileError on a line that is no pin
    (`lenient`: skips it)."""
    lock = LockFile(Path(path))
    logical: list[tuple[int, str]] = []  # (first line number, joined line)
    last_pin_index: int | None = None
    via_block = False
    buf = ""
    start = 0
    vias: dict[int, list[str]] = {}
    lines = text.splitlines()
    regions = conflict_regions(lines)
    if regions:
        first = regions[0][0]
        if not lenient:
            raise LockfileError(
                f"{path}:{first}: git merge conflict marker {lines[first - 1].strip()!r}: the file was "
                "merged with conflicts",
                hint="run `kernodeck lock` to lock again: it keeps the agreed pins and resolves the "
                "conflicting ones afresh (do not pick one side by hand: the hashes must match the lock)",
            )
        lines = blank_conflicts(lines, regions)
    for number, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if not buf and stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if last_pin_index is None:
                for k, v in HEADER_KV.findall(body):
                    lock.header.setdefault(k, v)
            if body.startswith("via"):
                rest = body[3:].strip()
                via_block = not rest
                if rest and last_pin_index is not None:
                    vias.setdefault(last_pin_index, []).append(rest)
            elif via_block and last_pin_index is not None and raw.lstrip().startswith("#   ") and body:
                vias.setdefault(last_pin_index, []).append(body)
            else:
                via_block = False
            continue
        via_block = False
        line = raw if raw.rstrip().endswith("\\") else _COMMENT.sub("", raw)
        if not buf:
            start = number
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        joined = buf.strip()
        buf = ""
        if not joined:
            continue
        logical.append((start, joined))
        if not joined.startswith("-"):
            last_pin_index = len(logical) - 1
    if buf.strip():
        logical.append((start, buf.strip()))

    for index, (number, joined) in enumerate(logical):
        if joined.startswith("-"):
            lock.options.append(joined)
            continue
        try:
            lock.pins.append(_parse_pin(joined, number, lock.path, tuple(vias.get(index, ()))))
        except LockfileError:
            if not lenient:
                raise
    return lock


def pins_of_text(text: str) -> dict[str, Version]:
    """The `name==version` pins of a requirements file's text, by canonical name; lines that are
    not pins, URL pins and invalid versions are skipped."""
    out: dict[str, Version] = {}
    for pin in parse_lockfile(text, lenient=True).pins:
        if pin.version is None:
            continue
        try:
            out[pin.key] = Version(pin.version)
        except InvalidVersion:
            continue
    return out


def read_pins(path: Path) -> dict[str, Version]:
    """`pins_of_text` of a file; an unreadable or missing file has none (for minimal churn)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    return pins_of_text(text)


def _valid_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False  # the PEP 508 parser decides (and names the problem)
    return True


def _parse_pin(joined: str, number: int, path: Path, via: tuple[str, ...]) -> Pin:
    parts = _OPTION_SPLIT.split(joined)
    spec, options = parts[0].strip(), parts[1:]
    hashes: list[str] = []
    for opt in options:
        m = _HASH.match(opt.strip())
        if m:
            if m.group(1) != "sha256":
                raise LockfileError(
                    f"{path}:{number}: only sha256 hashes are supported, got {m.group(1)!r}",
                )
            hashes.append(m.group(2).lower())
        elif not opt.strip().startswith("--"):
            raise LockfileError(f"{path}:{number}: cannot read {opt.strip()!r}")
    simple = _SIMPLE_PIN.fullmatch(spec)
    if simple is not None and _valid_version(simple.group(3)):
        return Pin(name=simple.group(1), version=simple.group(3), hashes=tuple(hashes), via=via, line=number)
    try:
        req = Requirement(spec)
    except InvalidRequirement as e:
        raise LockfileError(
            f"{path}:{number}: {spec!r} is not a pinned requirement: {str(e).splitlines()[0]}",
            hint="regenerate the file with `kernodeck lock`",
        ) from None
    version: str | None = None
    if req.url is None:
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator not in ("==", "==="):
            raise LockfileError(
                f"{path}:{number}: {spec!r} is not pinned with '=='",
                hint="a requirements-rebuild file pins every distribution to one version; regenerate it",
            )
        version = specs[0].version
    return Pin(
        name=req.name,
        version=version,
        hashes=tuple(hashes),
        marker=str(req.marker) if req.marker else None,
        extras=tuple(sorted(req.extras)),
        url=req.url,
        via=via,
        line=number,
    )
