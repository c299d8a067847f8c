"""Whether a lock file may be used: the one rule `rebuild`, `bundle` and `verify` share.

A lock file is used only when

- the lock inputs its header records (`lock-inputs-sha256`) equal the manifest's now
  (`kernodeck.lock.inputs.lock_inputs_sha256`, with the `[packages] from` files read now), and
- every index, extra index and find-links location it names (and every URL a pin is fetched
  from) is one the manifest declares for its platform, the default index when the manifest leaves
  it unnamed, or the PyTorch index of the platform's backend (`kernodeck.backends`).

    verdict = lock_verdict(Path("repro.toml"), "linux-x86_64")
    if not verdict.ok:
        print(verdict.describe())      # the file, what differs, `kernodeck lock --platform ...`

The answer is a value (`LockVerdict`); the callers decide what a problem means: rebuild and
bundle stop (unless `--allow-stale`), verify reports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kernodeck.errors import EXIT_FAILED, KernodeckError
from kernodeck.lockfile.header import has_old_header, header_digest
from kernodeck.lockfile.names import requirements_path

if TYPE_CHECKING:
    from kernodeck.manifest.schema import Manifest

#: What a problem of the header is called in the verdict (`LockVerdict.kind`).
STALE = "stale"
FOREIGN = "foreign-index"
MISSING = "missing"


@dataclass(frozen=True)
class LockVerdict:
    """The verdict on one lock file: it may be used when `ok`."""

    path: Path
    platform: str
    #: Why its recorded lock inputs differ from the manifest's now (or the file is missing).
    stale: tuple[str, ...] = ()
    #: The package locations it names that the manifest does not declare.
    foreign: tuple[str, ...] = ()
    missing: bool = False

    @property
    def problems(self) -> tuple[str, ...]:
        return self.stale + self.foreign

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def kind(self) -> str:
        """MISSING, STALE or FOREIGN (the first that applies); "" when the file may be used."""
        return MISSING if self.missing else STALE if self.stale else FOREIGN if self.foreign else ""

    @property
    def only_stale(self) -> bool:
        """Whether `--allow-stale` may accept it: stale lock inputs, nothing else."""
        return bool(self.stale) and not self.foreign and not self.missing

    @property
    def fix(self) -> str:
        """The command that writes a lock file this rule accepts."""
        return f"kernodeck lock --platform {self.platform}"

    def describe(self) -> str:
        """One line: the file and what differs (nothing to say when it may be used)."""
        return f"{self.path.name}: {'; '.join(self.problems)}" if self.problems else ""


def _norm(url: str) -> str:
    from kernodeck.support.urls import strip_userinfo

    return strip_userinfo(url.strip()).rstrip("/")


def declared_locations(manifest: Manifest, platform: str) -> set[str]:
    """Every package location a lock file of `platform` may name (credentials and a trailing `/`
    left out): the manifest's indexes (an index without a url: the default index), the default
    index when the manifest names none, the PyTorch index of the platform's backend, and the URLs
    of its direct references (`name @ URL`)."""
    from kernodeck.backends import PYTORCH_INDEX_BASE, parse_backend
    from kernodeck.lock.inputs import default_index_for

    default = default_index_for(manifest)
    out = {_norm(default)} if default else set()
    packages = manifest.packages_for(platform)
    for ix in [*manifest.packages.index, *packages.index]:
        url = ix.url or default
        if url:
            out.add(_norm(url))
    plat = manifest.get_platform(platform)
    backend = parse_backend(plat.backend) if plat is not None and plat.backend else None
    url = backend.index_url(packages.pytorch_index or PYTORCH_INDEX_BASE) if backend is not None else None
    if url is not None:
        out.add(_norm(url))
    return out | _direct_references([*packages.requirements, *packages.constraints])


def _direct_references(texts: list[str]) -> set[str]:
    from packaging.requirements import InvalidRequirement, Requirement

    out: set[str] = set()
    for text in texts:
        try:
            url = Requirement(text).url
        except InvalidRequirement:
            continue
        if url:
            out.add(_norm(url))
    return out


def named_locations(text: str) -> list[str]:
    """The package locations a requirements file names: its `--index-url`, `-i`,
    `--extra-index-url`, `--find-links` and `-f` options and the URLs of its URL pins."""
    from kernodeck.lockfile.read import parse_lockfile

    lock = parse_lockfile(text, lenient=True)
    out: list[str] = []
    for option in lock.index_options():
        parts = option.split()
        if "=" in parts[0]:  # `--index-url=URL`
            parts = [*parts[0].split("=", 1), *parts[1:]]
        if len(parts) >= 2:
            out.append(parts[1])
    out += [p.url for p in lock.pins if p.url]
    return out


def foreign_locations(text: str, declared: set[str], manifest_name: str = "repro.toml") -> list[str]:
    """The locations of a requirements file's text that are not in `declared` (a URL pin may lie
    under a declared location), in words."""
    out: list[str] = []
    for url in named_locations(text):
        n = _norm(url)
        if n in declared or any(n.startswith(d + "/") for d in declared):
            continue
        out.append(f"it names {_norm(url)}, a package location {manifest_name} does not declare")
    return out


@dataclass(frozen=True)
class _Now:
    """The manifest as a lock reads it now: with its `[packages] from` sources merged in (None
    when it cannot be read), the lock-inputs digest it gives the platform, the files read."""

    manifest: Manifest | None = None
    digest: str | None = None
    inputs: dict[str, str] = field(default_factory=dict)


def _now(manifest_file: Path, platform: str) -> _Now:
    from kernodeck.lock.inputs import default_index_for, lock_inputs_sha256, pin_inputs
    from kernodeck.manifest.load import load_manifest
    from kernodeck.manifest.sources import apply_sources

    try:
        manifest, raw = apply_sources(load_manifest(manifest_file), manifest_file)
        if manifest.get_platform(platform) is None:
            return _Now(manifest)
        inputs = pin_inputs(raw, manifest_file.parent)  # as `kernodeck lock` records them
        digest = lock_inputs_sha256(
            manifest, platform, default_index=default_index_for(manifest), extra=inputs
        )
    except KernodeckError:
        return _Now()
    return _Now(manifest, digest, inputs)


def current_inputs(manifest_file: Path, platform: str) -> tuple[str, dict[str, str]] | None:
    """(the lock-inputs digest the manifest gives `platform` now, {`[packages] from` file:
    sha256}): what a lock written now records; None when it cannot be told."""
    now = _now(manifest_file, platform)
    return (now.digest, now.inputs) if now.digest is not None else None


def stale_problems(text: str, manifest_file: Path, platform: str, now: _Now | None = None) -> list[str]:
    """Why a lock file's recorded lock inputs differ from the manifest's now, in words (empty
    when they are equal)."""
    from kernodeck.lock.inputs import stale_inputs

    if header_digest(text) is None and not has_old_header(text):
        return ["it records no lock inputs (it was not written by `kernodeck lock`, or was edited)"]
    now = now or _now(manifest_file, platform)
    if now.digest is None:
        return [
            f"the lock inputs of {manifest_file.name} cannot be read now (run `kernodeck lock` to see why)"
        ]
    # the same judgement and words as `kernodeck lock --check` (a pyproject.toml by its pin parts)
    return stale_inputs(text, now.digest, dict(now.inputs), manifest_file.name) or []


def lock_verdict(
    manifest_file: Path, platform: str, manifest: Manifest | None = None, *, path: Path | None = None
) -> LockVerdict:
    """The verdict on `platform`'s requirements file beside `manifest_file` (or at `path`):
    missing, stale (its recorded lock inputs differ from the manifest's now) or foreign (it names
    a package location the manifest, with its `[packages] from` sources, does not declare).
    `manifest`: the loaded manifest, used when its sources cannot be read."""
    lock_path = path or requirements_path(manifest_file.parent, platform)
    try:
        text = lock_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return LockVerdict(lock_path, platform, ("it is missing or cannot be read",), missing=True)
    now = _now(manifest_file, platform)
    declaring = now.manifest or manifest
    if declaring is None:
        return LockVerdict(lock_path, platform, (f"{manifest_file.name} cannot be read now",))
    stale = stale_problems(text, manifest_file, platform, now)
    foreign = foreign_locations(text, declared_locations(declaring, platform), manifest_file.name)
    return LockVerdict(lock_path, platform, tuple(stale), tuple(foreign))


def pylock_verdict(manifest_file: Path, platform: str) -> LockVerdict | None:
    """The verdict on `platform`'s pylock file beside `manifest_file` (its recorded lock inputs
    only); None when there is none."""
    from kernodeck.lockfile.names import pylock_path

    path = pylock_path(manifest_file.parent, platform)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return LockVerdict(path, platform, ("it cannot be read",))
    return LockVerdict(path, platform, tuple(stale_problems(text, manifest_file, platform)))


class LockNotUsable(KernodeckError):
    """A lock file the shared rule refuses (exit 1): each file, what differs, the command that
    fixes it."""

    exit_code = EXIT_FAILED

    def __init__(self, verdicts: list[LockVerdict], *, narrowing: str = "") -> None:
        fixes = sorted({v.fix for v in verdicts})
        stale = any(v.only_stale for v in verdicts)
        hint = "run " + " and ".join(f"`{f}`" for f in fixes)
        if narrowing:
            hint += f"; or {narrowing}"
        if stale:
            hint += "; --allow-stale uses a stale lock as it is (reported as a warning)"
        super().__init__(
            f"{len(verdicts)} lock file{'s' if len(verdicts) != 1 else ''} may not be used; nothing was written",
            context=[v.describe() for v in verdicts],
            hint=hint,
        )
        self.verdicts = verdicts
