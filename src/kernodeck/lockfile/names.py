"""The names of the files Kernodeck keeps beside the code, and how to recognise them: the one owner
of `repro.toml`, `requirements-rebuild-<platform>.txt`, `pylock.<platform>.toml` and rebuild's
`installed-after.txt`."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

MANIFEST_NAME = "repro.toml"
REQUIREMENTS_PREFIX = "requirements-rebuild-"
REQUIREMENTS_SUFFIX = ".txt"
PYLOCK_PREFIX = "pylock."
PYLOCK_SUFFIX = ".toml"
#: `pip freeze --all` of a rebuilt environment, written by `kernodeck rebuild`: an observation.
INVENTORY_NAME = "installed-after.txt"


def manifest_file(path: str | os.PathLike[str]) -> Path:
    """A manifest path as given on a command line or to the API: a folder means the repro.toml inside it."""
    p = Path(path)
    return p / MANIFEST_NAME if p.is_dir() else p


def requirements_filename(platform: str) -> str:
    return f"{REQUIREMENTS_PREFIX}{platform}{REQUIREMENTS_SUFFIX}"


def pylock_filename(platform: str) -> str:
    return f"{PYLOCK_PREFIX}{platform}{PYLOCK_SUFFIX}"


def requirements_path(folder: Path, platform: str) -> Path:
    """Where a platform's requirements file lies: beside the manifest (or in --output-dir)."""
    return folder / requirements_filename(platform)


def pylock_path(folder: Path, platform: str) -> Path:
    return folder / pylock_filename(platform)


def platform_of(name: str) -> str | None:
    """The platform a lock file's name is for (`requirements-rebuild-<platform>.txt`,
    `pylock.<platform>.toml`); None for any other name."""
    for prefix, suffix in ((REQUIREMENTS_PREFIX, REQUIREMENTS_SUFFIX), (PYLOCK_PREFIX, PYLOCK_SUFFIX)):
        if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
            return name[len(prefix) : -len(suffix)]
    return None


def locked_platforms(folder: Path) -> dict[str, list[Path]]:
    """The platforms that have a lock file in `folder`, each with its files (the requirements file
    first, then the pylock file), sorted by platform; {} when the folder cannot be listed."""
    found: dict[str, list[Path]] = {}
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return {}
    for path in entries:
        platform = platform_of(path.name)
        if platform is not None:
            found.setdefault(platform, []).append(path)
    for paths in found.values():
        paths.sort(key=lambda f: not f.name.startswith(REQUIREMENTS_PREFIX))
    return dict(sorted(found.items()))


def is_lock_file(name: str) -> bool:
    """Whether a file name (or path) is a requirements or pylock file written by `kernodeck lock`."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return (base.startswith(REQUIREMENTS_PREFIX) and base.endswith(REQUIREMENTS_SUFFIX)) or (
        base.startswith(PYLOCK_PREFIX) and base.endswith(PYLOCK_SUFFIX)
    )


#: Where capture keeps the reference's data folder listings, relative to the manifest's folder
#: (kernodeck.fingerprint.listing_path).
LISTINGS_DIR = ".kernodeck/listings"


def is_kernodeck_file(name: str) -> bool:
    """The manifest, a lock file, rebuild's inventory or a kept folder listing: the files Kernodeck keeps beside the code
    (not code: commits that change only these leave the pinned revision's code as it was)."""
    posix = PurePosixPath(name.replace("\\", "/"))
    if str(posix.parent).endswith(LISTINGS_DIR):  # capture's listings of data folders
        return True
    return (
        posix.name in (MANIFEST_NAME, INVENTORY_NAME) or is_lock_file(posix.name) or is_edit_lock(posix.name)
    )


def edit_lock_name(manifest_name: str) -> str:
    """The inter-process lock file beside a manifest while it is edited (`.repro.toml.lock`)."""
    return f".{manifest_name}.lock"


def is_edit_lock(name: str) -> bool:
    """A manifest's edit lock (`manifest.edit.editing`): left beside it, never code."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return base.startswith(".") and base.endswith(".toml.lock")


# --- the sources `[packages] from` names --------------------------------------------------------


def is_pyproject(source: str) -> bool:
    """Whether a `[packages] from` entry is read as a pyproject.toml (else: a requirements file)."""
    return source.endswith(".toml")


def is_pipfile(source: str) -> bool:
    """Whether a `[packages] from` entry is read as a Pipenv Pipfile."""
    return source.replace("\\", "/").rsplit("/", 1)[-1] == "Pipfile"
