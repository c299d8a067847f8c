"""Where the build requirements of an sdist come from while a lock builds its metadata.

An sdist's metadata is built by PEP 517 in a throwaway environment (`build`'s `DefaultIsolatedEnv`).
`build` would install its build requirements with the locking user's pip configuration: their
index, find-links and constraints (`PIP_INDEX_URL`, `PIP_CONSTRAINT`, pip.conf), and today's
releases. The same lock then gives other metadata, or fails, on a teammate's machine, and an old
sdist that still imports `pkg_resources` fails with setuptools 81 even under an `exclude-newer`
that predates it. As uv does, the build requirements come from the lock's own sources instead:

- the manifest's default indexes (`--index-url` for the primary, `--extra-index-url` and
  `--find-links` for the others), written to a requirements file with `${VAR}` credentials kept as
  placeholders (pip expands them from the environment, which carries exactly those variables);
- releases uploaded before `exclude-newer` (pip's `--uploaded-prior-to`, pip 26 and later; an index
  that serves no upload times is asked again without the cut, as the lock itself lets such files
  pass);
- pip isolated from the user's configuration, with what the machine needs to reach the network
  (CA bundle, proxy, client certificate: `kernodeck.handover.installer_env`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from packaging.version import InvalidVersion, Version

from kernodeck.handover.installer_env import installer_environment
from kernodeck.support.urls import PLACEHOLDER, redact

#: The pip that first knows `--uploaded-prior-to`.
UPLOADED_PRIOR_TO_PIP = Version("26.0")

#: What pip says when an index serves no upload times under `--uploaded-prior-to`.
_NO_UPLOAD_TIMES = "does not provide upload-time metadata"

#: Causes whose installer hint holds here too (how the network is reached); the others speak of a
#: lock's pins.
_NETWORK_KINDS = frozenset({"certificate", "proxy", "dns", "connection", "timeout", "auth"})

_HINT = (
    "an sdist's build requirements come from the manifest's indexes, released before its "
    "exclude-newer, within [packages] build-constraints: they must be there; or pick a version with "
    "a wheel, or take the package out of allow-sdist"
)


@dataclass(frozen=True)
class BuildSources:
    """The sources of an sdist build's requirements: requirements-file option lines (`--index-url
    URL`, credentials as `${VAR}`), the variables those lines name, exclude-newer, and the
    manifest's build constraints. The default (no lines) is pip's built-in index, as for a lock
    that declares none."""

    options: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()
    uploaded_before: datetime | None = None
    constraints: tuple[str, ...] = ()  # [packages] build-constraints

    @classmethod
    def of(
        cls,
        sources: Iterable[tuple[str, str]],
        uploaded_before: datetime | None,
        *,
        constraints: Iterable[str] = (),
    ) -> BuildSources:
        """From (format, url) pairs in the lock's order: the first index is `--index-url`, later
        ones `--extra-index-url`, find-links folders `--find-links`."""
        options: list[str] = []
        names: list[str] = []
        for fmt, url in sources:
            if fmt == "find-links":
                options.append(f"--find-links {url}")
            elif any(o.startswith("--index-url ") for o in options):
                options.append(f"--extra-index-url {url}")
            else:
                options.append(f"--index-url {url}")
            names += PLACEHOLDER.findall(url)
        return cls(
            tuple(dict.fromkeys(options)), tuple(dict.fromkeys(names)), uploaded_before, tuple(constraints)
        )


class BuildRequirementsError(Exception):
    """Installing an sdist's build requirements failed: `first_error` and `hint` say why."""

    def __init__(self, first_error: str, hint: str) -> None:
        super().__init__(first_error)
        self.first_error = first_error
        self.hint = hint


@functools.cache
def _outer_pip() -> Version | None:
    """The version of the pip beside Kernodeck when it can install into another environment
    (`--python`, pip 22.3; not a distribution's debundled pip), as `build` itself decides."""
    from importlib import metadata as importlib_metadata  # only when an sdist is built (10 ms)

    try:
        version = Version(importlib_metadata.version("pip"))
    except (importlib_metadata.PackageNotFoundError, InvalidVersion):
        return None
    if version < Version("22.3") or importlib.util.find_spec("pip._vendor") is None:
        return None
    return version


def _utc(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def install_argv(python: str, requirements_file: str, sources: BuildSources) -> list[str]:
    """The pip command that installs the build requirements listed in `requirements_file` into
    the environment of `python` (network arguments not included)."""
    pip = _outer_pip()
    head = [sys.executable, "-m", "pip", "--python", python] if pip else [python, "-I", "-m", "pip"]
    argv = [*head, "install", "--isolated", "--no-input", "--disable-pip-version-check"]
    argv += ["--no-warn-script-location", "--no-compile"]
    if sources.uploaded_before is not None and pip is not None and pip >= UPLOADED_PRIOR_TO_PIP:
        argv += ["--uploaded-prior-to", _utc(sources.uploaded_before)]
    return [*argv, "-r", requirements_file]


def install_build_requirements(python: str, requirements: Sequence[str], sources: BuildSources) -> None:
    """Install `requirements` (PEP 508 strings) into the build environment of `python` from
    `sources`; raises BuildRequirementsError with pip's cause."""
    if not requirements:
        return
    import tempfile

    inst = installer_environment(os.environ, sources.variables, installer="pip")
    with tempfile.TemporaryDirectory(prefix="kernodeck-build-requirements-") as tmp:
        path = os.path.join(tmp, "requirements.txt")
        lines = [*sources.options, *requirements]
        if sources.constraints:  # [packages] build-constraints, as a constraints file
            constraints = os.path.join(tmp, "build-constraints.txt")
            with open(constraints, "w", encoding="utf-8") as f:
                f.write("\n".join(sources.constraints) + "\n")
            lines.insert(len(sources.options), f"-c {constraints}")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        argv = install_argv(python, path, sources)
        argv[-2:-2] = inst.pip_args
        proc = _run(argv, inst.env)
        if proc.returncode != 0 and _NO_UPLOAD_TIMES in proc.stdout and "--uploaded-prior-to" in argv:
            at = argv.index("--uploaded-prior-to")
            proc = _run([*argv[:at], *argv[at + 2 :]], inst.env)
    if proc.returncode != 0:
        from kernodeck.handover.installer_errors import installer_cause

        cause = installer_cause(proc.stdout, requirements="the manifest", credentials=list(sources.variables))
        listed = ", ".join(requirements)
        raise BuildRequirementsError(
            f"installing its build requirements ({listed}) failed: {cause.error}",
            hint=redact(cause.hint) if cause.kind in _NETWORK_KINDS else _HINT,
        )


#: How long one install of build requirements may take (a hung index must not hang the lock).
INSTALL_TIMEOUT = 900.0


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise BuildRequirementsError(
            f"installing its build requirements took longer than {INSTALL_TIMEOUT:.0f} s",
            hint="the index is slow or unreachable: retry, or raise PIP_DEFAULT_TIMEOUT",
        ) from None
