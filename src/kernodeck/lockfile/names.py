"""The names of the files `kernodeck lock` writes, and how to recognise them: the one owner of
`requirements-rebuild-<platform>.txt` and `pylock.<platform>.toml`."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

MANIFEST_NAME = "repro.toml"
REQUIREMENTS_PREFIX = "requirements-rebuild-"
REQUIREMENTS_SUFFIX = ".txt"
PYLOCK_PREFIX = "pylock."
PYLOCK_SUFFIX = ".toml"


def requirements_filename(platform: str) -> str:
    return f"{REQUIREMENTS_PREFIX}{platform}{REQUIREMENTS_SUFFIX}"


def pylock_filename(platform: str) -> str:
    return f"{PYLOCK_PREFIX}{platform}{PYLOCK_SUFFIX}"


def requirements_path(folder: Path, platform: str) -> Path:
    """Where a platform's requirements file lies: beside the manifest (or in --output-dir)."""
    return folder / requirements_filename(platform)


def pylock_path(folder: Path, platform: str) -> Path:
    return folder / pylock_filename(platform)


def is_lock_file(name: str) -> bool:
    """Whether a file name (or path) is a requirements or pylock file written by `kernodeck lock`."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return (base.startswith(REQUIREMENTS_PREFIX) and base.endswith(REQUIREMENTS_SUFFIX)) or (
        base.startswith(PYLOCK_PREFIX) and base.endswith(PYLOCK_SUFFIX)
    )


def is_kernodeck_file(name: str) -> bool:
    """The manifest or a lock file: the files Kernodeck keeps beside the code (not code)."""
    base = PurePosixPath(name.replace("\\", "/")).name
    return base == MANIFEST_NAME or is_lock_file(base)
