"""The names of the files Kernodeck keeps beside the code, and how to recognise them: the one owner
of `repro.toml`, `requirements-rebuild-<platform>.txt`, `pylock.<platform>.toml` and rebuild's
`installed-after.txt`."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

MANIFEST_NAME = "repro.toml"
REQUIREMENTS_PREFIX = "requirements-rebuild-"
REQUIREMENTS_SUFFIX = ".txt"
PYLOCK_PREFIX = "pylock."
PYLOCK_SUFFIX = ".toml"
#: `pip freeze --all` of a rebuilt environment, written by `kernodeck rebuild`: an observation.
INVENTORY_NAME = "installed-after.txt"


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


def is_lock_file(name: str) -> bool:
    """Whether a file name (or path) is a requirements or pylock file written by `kernodeck lock`."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return (base.startswith(REQUIREMENTS_PREFIX) and base.endswith(REQUIREMENTS_SUFFIX)) or (
        base.startswith(PYLOCK_PREFIX) and base.endswith(PYLOCK_SUFFIX)
    )


def is_kernodeck_file(name: str) -> bool:
    """The manifest, a lock file or rebuild's inventory: the files Kernodeck keeps beside the code
    (not code: commits that change only these leave the pinned revision's code as it was)."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return base in (MANIFEST_NAME, INVENTORY_NAME) or is_lock_file(base) or is_edit_lock(base)


def edit_lock_name(manifest_name: str) -> str:
    """The inter-process lock file beside a manifest while it is edited (`.repro.toml.lock`)."""
    return f".{manifest_name}.lock"


def is_edit_lock(name: str) -> bool:
    """A manifest's edit lock (`manifest.edit.editing`): left beside it, never code."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return base.startswith(".") and base.endswith(".toml.lock")
