"""A conda environment file (`environment.yml`): what `kernodeck init` can take from it.

Many ML projects keep their environment only there. `[packages] from` cannot read it (its packages
come from conda channels, under conda's names, with conda's version syntax), so `init` copies
what has a PyPI equivalent into `[packages] requirements` and says what it left out and why:

    env = read_conda_env(Path("environment.yml"), "environment.yml")
    env.python          # "3.8" from `python=3.8.5`
    env.requirements    # ["torch==1.11.0.*", "numpy==1.19.2.*", "diffusers", ...]
    env.files           # requirement files its pip: list reads (`-r requirements.txt`)
    env.notes           # "cudatoolkit=11.3: ...", "-e .: ...", ...

Conda specs become PEP 508: `name=1.2` (conda: 1.2*) -> `name==1.2.*`, `name=1.2.3=build` ->
`name==1.2.3`, `name 1.2.*` -> `name==1.2.*`, `channel::name` -> `name`; `pytorch` is `torch` and
`py-opencv` is `opencv-python` on PyPI. Python itself, pip, and the system chain conda packages
bring (cudatoolkit, cudnn, nccl, mkl, ...) are not requirements: the first gives [python], the
others are named with where they belong. Only the block style conda writes
(`conda env export`) and people write is read; anything else is said, not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

#: The file names conda reads by default, in its order.
NAMES = ("environment.yml", "environment.yaml", "conda.yml", "conda.yaml")

#: Conda names whose PyPI distribution has another name.
_PYPI_NAME = {"pytorch": "torch", "py-opencv": "opencv-python", "pytorch-lightning": "pytorch-lightning"}

#: Conda packages that are not Python requirements: what they are, where that belongs instead.
_SYSTEM = {
    "cudatoolkit": "the CUDA runtime, which torch's build brings: set `backend` (e.g. cu118) on a [[platform]]",
    "cuda-toolkit": "the CUDA runtime, which torch's build brings: set `backend` (e.g. cu118) on a [[platform]]",
    "pytorch-cuda": "conda's CUDA variant of pytorch: set `backend` (e.g. cu118) on a [[platform]]",
    "cpuonly": 'conda\'s CPU variant of pytorch: set `backend = "cpu"` on a [[platform]]',
    "cudnn": "comes with torch's CUDA build",
    "nccl": "comes with torch's CUDA build",
    "magma-cuda": "conda's GPU linear algebra for pytorch builds",
    "mkl": "a system library (comes with the wheels that need it)",
    "blas": "a system library (comes with the wheels that need it)",
    "libblas": "a system library (comes with the wheels that need it)",
    "openblas": "a system library (comes with the wheels that need it)",
    "ffmpeg": "a system program: install it with the OS (the PyPI package of that name is not it)",
    "pip": "the installer: the rebuild's venv brings its own",
    "setuptools": "a build tool, not needed by installed wheels",
    "wheel": "a build tool, not needed by installed wheels",
}
_CUDA = ("cudatoolkit", "cuda-toolkit", "pytorch-cuda")
_SYSTEM_PREFIX = ("cuda-", "lib", "_", "mkl-", "magma-")
#: Python packages whose names start like conda's system packages: they are requirements.
_PYTHON_DESPITE_PREFIX = {
    "librosa",
    "libcst",
    "libtmux",
    "libsass",
    "cuda-python",
    "cuda-bindings",
    "cuda-core",
}

_ITEM = re.compile(r"^(?P<indent>\s*)-\s*(?P<body>.*?)\s*$")


@dataclass
class CondaEnv:
    file: str
    python: str | None = None  # major.minor
    python_spec: str | None = None  # as written, e.g. "python=3.8.5"
    # (backend, where) from `pytorch-cuda=11.7` / `cudatoolkit=11.3`: ("cu117", "environment.yml:5: pytorch-cuda=11.7")
    backend: tuple[str, str] | None = None
    requirements: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # pip: -r FILE, relative to the env file's folder
    notes: list[str] = field(default_factory=list)
    # where the pip: list installs the project itself (`-e .`) from setup.py / setup.cfg, whose
    # dependencies init reads beside it ("environment.yml:31"); None otherwise
    installs_setup: str | None = None


def find_conda_env(root: Path) -> Path | None:
    return next((root / n for n in NAMES if (root / n).is_file()), None)


def _unquote(text: str) -> str:
    text = re.sub(r"\s+#.*$", "", text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text.strip()


def _block_items(lines: list[str], first: int) -> Iterator[tuple[int, int, str]]:
    """(index, indentation, text) of each `- item` line from `first` to the next top-level key."""
    for i in range(first, len(lines)):
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if not raw[0].isspace() and not raw.startswith("-"):
            return  # the next top-level key
        m = _ITEM.match(raw)
        if m is not None:
            yield i, len(m.group("indent")), _unquote(m.group("body"))


def _items(lines: list[str]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]] | None:
    """(conda items, pip items) as (line number, text) from the `dependencies:` block; None when
    it is not written in block style."""
    start = next((i for i, line in enumerate(lines) if re.match(r"^dependencies\s*:", line)), None)
    if start is None:
        return [], []
    if lines[start].split(":", 1)[1].split("#", 1)[0].strip():
        return None  # a flow list `dependencies: [a, b]`
    conda: list[tuple[int, str]] = []
    pip: list[tuple[int, str]] = []
    top: int | None = None  # the indentation of the block's items
    in_pip: int | None = None  # the indentation of the pip: item, while inside it
    for i, indent, body in _block_items(lines, start + 1):
        if top is None:
            top = indent
        if indent <= top:
            in_pip = None
            if re.fullmatch(r"pip\s*:", body):
                in_pip = indent
                continue
            conda.append((i + 1, body))
        elif in_pip is not None:
            pip.append((i + 1, body))
    return conda, pip


def _conda_requirement(spec: str) -> tuple[str, str]:
    """(PyPI name, PEP 508 specifier) of a conda match spec, or raise ValueError."""
    spec = spec.split("::", 1)[-1].strip()
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", spec)
    if m is None:
        raise ValueError(spec)
    name, rest = m.group(1), m.group(2).strip()
    if "|" in rest:
        raise ValueError(spec)
    if rest.startswith("=") and not rest.startswith("=="):
        version, _, build = rest[1:].partition("=")
        # name=1.2.3=build: exactly that version (the build is conda's own); name=1.2: 1.2.*
        rest = f"=={version}" if build else f"=={version.rstrip('*').rstrip('.')}.*"
    elif rest and rest[0].isdigit():
        rest = f"=={rest.replace('*', '').rstrip('.')}.*" if rest.endswith("*") else f"=={rest}"
    elif rest.endswith("*"):
        rest = rest.rstrip("*").rstrip(".") + ".*"
    lower = name.lower()
    return _PYPI_NAME.get(lower, name), rest


def _python(spec: str) -> str | None:
    m = re.search(r"(\d+)\.(\d+)", spec)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _system_package(env: CondaEnv, where: str, name: str, body: str) -> None:
    """A conda system package: named as not a requirement; a CUDA runtime (`pytorch-cuda=11.7`)
    gives the backend torch's build needs."""
    why = _SYSTEM.get(name, "a conda system package, not a Python requirement")
    cuda = re.search(r"(\d+)\.(\d+)", body) if name in _CUDA else None
    if cuda is not None:
        backend = f"cu{cuda[1]}{cuda[2]}"
        why = f'the CUDA runtime, which torch\'s build brings: set backend = "{backend}" on a [[platform]]'
        if env.backend is None:
            env.backend = (backend, f"{where}: {body}")
    env.notes.append(f"{where}: {body}: not a requirement ({why})")


def read_conda_env(path: Path, display: str) -> CondaEnv:
    """What `init` can take from a conda environment file (see the module docstring)."""
    env = CondaEnv(display)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        env.notes.append(f"{display}: cannot read it ({e.strerror or e})")
        return env
    items = _items(lines)
    if items is None:
        env.notes.append(f"{display}: `dependencies` is not a block list; copy its packages here by hand")
        return env
    conda, pip = items
    for line, body in conda:
        _conda_item(env, f"{display}:{line}", body)
    for line, body in pip:
        _pip_item(env, path, f"{display}:{line}", body)
    return env


def _conda_item(env: CondaEnv, where: str, body: str) -> None:
    """One conda package: Python gives [python], a system package is named, the rest is copied."""
    name = re.split(r"[\s=<>!~]", body.split("::", 1)[-1], maxsplit=1)[0].lower()
    if name == "python":
        env.python, env.python_spec = _python(body), body
        return
    if name in _SYSTEM or (name.startswith(_SYSTEM_PREFIX) and name not in _PYTHON_DESPITE_PREFIX):
        _system_package(env, where, name, body)
        return
    try:
        pypi, spec = _conda_requirement(body)
        text = str(Requirement(pypi + spec))
    except (ValueError, InvalidRequirement):
        env.notes.append(
            f"{where}: {body}: not read (a conda spec with no PEP 508 equivalent); add it by hand"
        )
        return
    env.requirements.append(text)


def _pip_item(env: CondaEnv, path: Path, where: str, body: str) -> None:
    """One line of the pip: list: a requirement copied, `-r FILE` kept, the rest named with why."""
    if body.startswith(("-r ", "--requirement ")):
        env.files.append(body.split(None, 1)[1].strip())
    elif body.startswith(("-e ", "--editable ")):
        _editable(env, path, where, body)
    elif body.startswith("-"):
        env.notes.append(f"{where}: {body}: a pip option; declare indexes as [[packages.index]]")
    else:
        try:
            pip_req = Requirement(body)
        except InvalidRequirement:
            env.notes.append(f"{where}: {body}: not a requirement Kernodeck can lock; add it by hand")
            return
        if pip_req.url:
            _copy_direct(env, where, body, str(pip_req))
            return
        env.requirements.append(str(pip_req))


#: A VCS install pip names by its `#egg=` fragment: `git+https://host/org/repo.git@main#egg=name`.
_VCS_EGG = re.compile(r"^(?P<url>(git|hg|svn|bzr)\+[^#\s]+)#(?:.*&)?egg=(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)")


def _copy_direct(env: CondaEnv, where: str, body: str, requirement: str) -> None:
    """A VCS or URL install is copied as the direct reference it is, so the lock stops at it
    (it cannot be locked from an index) instead of locking the rest as if it were not there."""
    env.requirements.append(requirement)
    env.notes.append(
        f"{where}: {body}: copied as {requirement!r}, which no index can lock: `kernodeck validate` and "
        "`kernodeck lock` stop at it until you publish it, pin a release, or remove it here (and install it yourself)"
    )


def _editable(env: CondaEnv, path: Path, where: str, body: str) -> None:
    """`-e .` is the project itself (its setup.py / setup.cfg dependencies are read beside it:
    `installs_setup`); a VCS install is copied as a direct reference (`_copy_direct`); another
    editable install (a path) is named, not locked."""
    target = body.split(None, 1)[1].strip()
    vcs = _VCS_EGG.match(target)
    if vcs is not None:
        _copy_direct(env, where, body, f"{vcs['name']} @ {vcs['url']}")
        return
    if target not in (".", "./"):
        env.notes.append(f"{where}: {body}: not locked (an editable install): publish it, or pin a release")
        return
    legacy = [n for n in ("setup.py", "setup.cfg") if (path.parent / n).is_file()]
    if (path.parent / "pyproject.toml").is_file():
        what = 'add "pyproject.toml" to `from` to lock its dependencies'
    elif not legacy:
        what = "no pyproject.toml, setup.py or setup.cfg beside it: add its dependencies here"
    else:
        what = f"its dependencies are in {' / '.join(legacy)}, which Kernodeck does not run: add them here"
        env.installs_setup = where
    env.notes.append(f"{where}: -e .: the project itself: {what}")
