"""Schema v1 of repro.toml as declared models (`kernodeck.manifest.model`). No I/O here.

Keys are kebab-case in TOML (`allow-dirty`), snake_case in Python (`allow_dirty`). Every model
forbids unknown keys. Field validators check single values (a sha256, a specifier, a marker);
`cross_field_problems` checks what needs the whole document (unique names, index references).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date, datetime, timezone
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kernodeck.backends import BACKEND_FORMS, parse_backend
from kernodeck.lockfile.names import is_pipfile, is_pyproject
from kernodeck.manifest.model import AfterValidator, Field, Model, WithJsonSchema, describe, field_validator
from kernodeck.support.urls import PLACEHOLDER, is_placeholder_userinfo, redact, secret_query_params

SCHEMA_VERSION = 1

#: exclude-newer must be earlier than this year (later ones overflow date arithmetic).
EXCLUDE_NEWER_MAX_YEAR = 3000

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_PY_VERSION = re.compile(r"^3\.\d+(\.\d+)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MARKER_VALUE = re.compile(r"[^'\"\\\x00-\x1f\x7f]*")
_PLACEHOLDER = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a tab is allowed


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Model(Model):
    model_config = dict(
        extra="forbid",
        alias_generator=_kebab,
        populate_by_name=True,
        validate_default=False,
        str_strip_whitespace=False,
        strict=True,  # TOML has real types: "no" is not a boolean, "5" is not a number
    )


def describe_fields() -> None:
    """Give the fields of the pydantic models (`pydantic_model`) their attribute docstrings as
    descriptions, for the JSON Schema and the docs; validation never needs them."""
    describe(__name__)


# --- single-value validators -------------------------------------------------------------------


def _sha256(v: str) -> str:
    if not _HEX64.match(v):
        if re.fullmatch(r"[0-9a-fA-F]{64}", v):
            raise ValueError(f"sha256 {v!r} must be lowercase hex")
        raise ValueError(f"sha256 must be 64 lowercase hex characters, got {len(v)} characters: {v!r}")
    return v


def _sha256_or_empty(v: str) -> str:
    return v if v == "" else _sha256(v)


def _revision(v: str) -> str:
    if not _HEX40.match(v):
        raise ValueError(
            f"revision must be a full 40-character lowercase hex git sha (run `git rev-parse HEAD`), got {v!r}"
        )
    return v


#: The longest name (of a platform, data, check, index, variant): platform names become lock file
#: names, which a file system limits to 255 bytes.
NAME_MAX = 100


def _name(v: str) -> str:
    if len(v) > NAME_MAX:
        raise ValueError(f"a name is at most {NAME_MAX} characters, got {len(v)} characters")
    if not _NAME.match(v):
        raise ValueError(
            f"name {v!r} must start with a letter or digit and use only letters, digits, '.', '_', '-'"
        )
    return v


def _project_name(v: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", v):
        raise ValueError(f"{v!r} is not a valid package name (PEP 508)")
    return v


def _requirement(v: str) -> str:
    try:
        req = Requirement(v)
    except InvalidRequirement as e:
        raise ValueError(f"invalid requirement {redact(v)!r}: {redact(str(e).splitlines()[0])}") from None
    if req.url:
        netloc = urlsplit(req.url).netloc
        if "@" in netloc and not is_placeholder_userinfo(netloc.rsplit("@", 1)[0]):
            raise ValueError(
                f"the direct url of {req.name!r} holds literal credentials; write them as environment "
                "variable placeholders (${USER}:${TOKEN}@host), and set those variables when you run kernodeck"
            )
        _no_literal_secrets(req.url, f"direct url of {req.name!r}")
    return v


def _specifier(v: str) -> str:
    try:
        SpecifierSet(v)
    except InvalidSpecifier:
        raise ValueError(f"invalid version specifier {v!r} (expected e.g. '>=560.28')") from None
    return v


def _quantity(v: str) -> str:
    """A comparison of a number (a device count, a compute capability, GiB), written as a specifier."""
    try:
        SpecifierSet(v)
    except InvalidSpecifier:
        raise ValueError(f"invalid comparison {v!r} (expected e.g. '>=1', '>=8.0' or '==2')") from None
    return v


def _marker(v: str) -> str:
    try:
        Marker(v)
    except InvalidMarker as e:
        raise ValueError(f"invalid marker {v!r}: {str(e).splitlines()[0]}") from None
    return v


def _version(v: str) -> str:
    try:
        Version(v)
    except InvalidVersion:
        raise ValueError(f"invalid version {v!r}") from None
    return v


def _python_version(v: str) -> str:
    if not _PY_VERSION.match(v):
        raise ValueError(f"python version must look like '3.11' (any 3.11.x) or '3.11.7' (exact), got {v!r}")
    return v


def _env_name(v: str) -> str:
    if not _ENV_NAME.match(v):
        raise ValueError(f"{v!r} is not an environment variable name; list variable names here, never values")
    return v


#: The longest a check or a resume may run, in seconds (30 days): a longer timeout overflows
#: the clocks and waits it is handed to (`timeout = inf` crashed `check`).
MAX_TIMEOUT_S = 30 * 24 * 3600
#: The longest user string a message quotes whole; a longer one is cut, with its length.
SHOWN_MAX = 80


def _shown(v: str) -> str:
    """A user's string fit for a message: at most SHOWN_MAX characters, then its length."""
    return v if len(v) <= SHOWN_MAX else f"{v[:SHOWN_MAX]}... ({len(v)} characters)"


#: The longest reference or variant id (ids are date-based, `2026-11-30.2`).
ID_MAX = 128


def _identity(v: str) -> str:
    """A reference or variant id: printed in every report and lock file header, so short and on
    one line."""
    if len(v) > ID_MAX:
        raise ValueError(f"an id is at most {ID_MAX} characters, got {len(v)} characters ({_shown(v)!r})")
    if _CONTROL.search(v) or "\t" in v:
        raise ValueError("an id holds no line breaks, tabs or other control characters")
    return v


def _timeout(v: float) -> float:
    if not math.isfinite(v) or v > MAX_TIMEOUT_S:
        raise ValueError(
            f"timeout must be a number of seconds greater than 0 and at most {MAX_TIMEOUT_S} (30 days), got {v}"
        )
    return v


def _a_number(v: float) -> float:
    if math.isnan(v):
        raise ValueError("nan compares with nothing (every check would pass); write a number")
    return v


def _env_entries(v: dict[str, str]) -> dict[str, str]:
    """Environment variables a run is given: a name without '=', NUL or line breaks, a value
    without NUL or line breaks (the environment block cannot hold them)."""
    for key, value in v.items():
        if not key or "=" in key or _CONTROL.search(key):
            raise ValueError(
                f"environment variable name {_shown(key)!r} must be non-empty and hold no '=' or control characters"
            )
        if _CONTROL.search(value):
            raise ValueError(
                f"the value of {_shown(key)} holds a NUL byte, a line break or another control character; "
                "an environment variable cannot carry it"
            )
    return v


def _backend(v: str) -> str:
    if parse_backend(v) is None:
        raise ValueError(f"unknown backend {v!r}; expected {BACKEND_FORMS}")
    return v


def _no_literal_secrets(v: str, what: str) -> None:
    """Refuse a URL holding a literal secret (a secret-shaped query parameter, a fragment),
    without echoing it."""
    secret = secret_query_params(v)
    if secret:
        raise ValueError(
            f"the {what} holds a literal secret in its query parameter {secret[0]!r}; write it as an "
            f"environment variable placeholder instead, e.g. {secret[0]}=${{INDEX_TOKEN}}, and set that "
            "variable when you run kernodeck"
        )
    fragment = urlsplit(v).fragment
    if fragment and not PLACEHOLDER.fullmatch(fragment):
        raise ValueError(f"the {what} has a fragment ('#...'); an index url has none, remove it")


def _index_url(v: str) -> str:
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https", "file"):
        raise ValueError(f"index url {redact(v)!r} must start with https://, http:// or file://")
    _no_literal_secrets(v, "index url")
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        pieces = userinfo.split(":", 1)
        literal = [p for p in pieces if p and not _PLACEHOLDER.match(p)]
        if literal:
            host = parts.netloc.rsplit("@", 1)[1]
            suggestion = f"{parts.scheme}://${{INDEX_USER}}:${{INDEX_TOKEN}}@{host}{parts.path}"
            raise ValueError(
                "credentials are written literally in the index url; write them as environment "
                f"variable placeholders instead, e.g. {suggestion!r}, and set those variables when you run kernodeck"
            )
    return v


Sha256 = Annotated[str, AfterValidator(_sha256)]
#: A fingerprint `kernodeck capture` fills in: a sha256, or "" (not computed yet).
FillableSha256 = Annotated[str, AfterValidator(_sha256_or_empty)]
Revision = Annotated[str, AfterValidator(_revision)]
Name = Annotated[str, AfterValidator(_name)]
ProjectName = Annotated[str, AfterValidator(_project_name)]
RequirementStr = Annotated[str, AfterValidator(_requirement)]
SpecifierStr = Annotated[str, AfterValidator(_specifier)]
QuantityStr = Annotated[str, AfterValidator(_quantity)]
MarkerStr = Annotated[str, AfterValidator(_marker)]
VersionStr = Annotated[str, AfterValidator(_version)]
PythonVersion = Annotated[str, AfterValidator(_python_version)]
EnvName = Annotated[str, AfterValidator(_env_name)]
BackendName = Annotated[str, AfterValidator(_backend)]
IndexUrl = Annotated[str, AfterValidator(_index_url)]
Timeout = Annotated[float, Field(gt=0), AfterValidator(_timeout)]
Identity = Annotated[str, Field(min_length=1), AfterValidator(_identity)]
Number = Annotated[float, AfterValidator(_a_number)]
Tolerance = Annotated[float, Field(ge=0), AfterValidator(_a_number)]
EnvTable = Annotated[dict[str, str], AfterValidator(_env_entries)]
RelPath = Annotated[str, Field(min_length=1)]


# --- sections ----------------------------------------------------------------------------------


class Reference(_Model):
    """What is being reproduced, and its identity. A new `id` whenever the reference changes."""

    name: Name
    """Short name of what is reproduced."""
    id: Identity
    """Identity of the reference (at most 128 characters, on one line); `kernodeck capture` writes a new date-based id (`YYYY-MM-DD.N`) whenever
    what it records changes."""
    description: str | None = None
    """Free text for people."""


class ConfigFile(_Model):
    path: RelPath
    """A configuration file the run reads."""
    sha256: Sha256
    """Its content fingerprint."""
    external: bool = False
    """The path may lie outside the project (a shared mount); verify reports it as external."""


class Code(_Model):
    revision: Revision
    """The git commit the reference ran (`kernodeck capture` records it)."""
    allow_dirty: bool = False
    """Accept a working tree with uncommitted changes."""
    entry_point: str | None = None
    """The command or module that runs the reference, for people and hand-over."""
    config: list[ConfigFile] = []
    """Configuration files and their fingerprints."""


class Python(_Model):
    version: PythonVersion
    """`"3.11"`: any 3.11.x; `"3.11.7"`: exactly that."""
    implementation: Literal["cpython", "pypy"] = "cpython"
    """The interpreter implementation."""


class Index(_Model):
    """A package index. Without `url`, the index pip is configured to use."""

    name: Name
    """How `sources` and error messages name this index."""
    url: IndexUrl | None = None
    """Simple-API root or find-links folder/page; `${VAR}` placeholders for credentials."""
    default: bool = False
    """The primary index (replaces the one pip is configured to use)."""
    format: Literal["simple", "find-links"] = "simple"
    """`simple` (PEP 503/691) or `find-links` (a flat folder or page of files)."""
    packages: list[ProjectName] = []
    """Projects taken only from this index (and never from another)."""
    platforms: list[Name] = []
    """Only on these platforms (empty: every platform, unless a platform's `indexes` names it)."""
    optional: bool = False
    """Lock without this index when it cannot be reached (connection refused, DNS, timeout), and
    say so; otherwise an unreachable index fails the lock. An index a requirement file in `from`
    names (`--extra-index-url`) is required: declare it here with the same `url` and
    `optional = true` to make it optional."""


class Packages(_Model):
    """What to lock. `requirements` lists them here; `from` names files the project already keeps
    them in (a pyproject.toml, with `extras` and PEP 735 `groups`; requirement files read the way
    pip reads them), relative to the manifest's folder and read at lock time."""

    from_: Annotated[list[RelPath], Field(alias="from")] = []
    """Files the requirements are read from at lock time: a `*.toml` is a pyproject.toml (its
    `[project]` dependencies, or Poetry's `[tool.poetry.dependencies]` when it has no `[project]`
    table), a `Pipfile` is Pipenv's (its `[packages]`), anything else a requirements file read the
    way pip reads it (nested `-r`/`-c`, indexes, `-e .`). Their content is part of the lock inputs
    (`# input-sha256` lines). Each stays inside the project (symlinks followed), and so does every
    file it includes with `-r`/`-c` (after `${NAME}` expansion), unless `external` is true; a file
    read must be a regular file of at most 16 MiB."""
    external: bool = False
    """`from` sources, and the files they include with `-r`/`-c`, may lie outside the project (a
    shared checkout of requirement files, a parent folder's pyproject.toml). Without it, an
    absolute path, a `..` that climbs out, or a symlink or `${NAME}` that leads out is refused."""
    extras: list[Name] = []
    """Extras of the pyproject.toml named in `from` whose dependencies are locked too, on every
    platform (Poetry's `[tool.poetry.extras]` for a Poetry project); one platform's own: its
    `extras`."""
    groups: list[Name] = []
    """PEP 735 dependency groups of the pyproject.toml named in `from` (`{include-group}` expanded),
    or Poetry's `[tool.poetry.group.NAME]` for a Poetry project; with a `Pipfile` in `from` and no
    pyproject.toml, its package categories by table name (`"dev-packages"`, which `pipenv install
    --dev` installs, or another)."""
    requirements: list[RequirementStr] = []
    """Requirements written here (besides those read from `from`)."""
    constraints: list[RequirementStr] = []
    """Constraints: they limit versions but install nothing by themselves."""
    skip: list[Annotated[str, Field(min_length=1)]] = []
    """Lines of the requirement files in `from` that are left out of the lock, each named by the
    line as written (`git+https://host/org/tool.git`, `../other-project`, an option) or by the
    project it names (`tool` for `tool @ git+...` or `...#egg=tool`): for what a lock cannot take
    from an index (a VCS or URL requirement, a path to another project, an option Kernodeck does
    not read), which is then installed some other way. `validate` names every line skipped; an
    entry that names no line is an error."""
    allow_sdist: list[ProjectName] = []
    """Projects that may be locked as source distributions (otherwise wheels only). Their metadata
    is built with build requirements from these indexes, released before exclude-newer."""
    build_constraints: list[RequirementStr] = []
    """Constraints on the build requirements of those source distributions, when the lock builds
    their metadata and when rebuild builds them (uv's build-constraint-dependencies, pip's
    --build-constraint): e.g. "setuptools<81" for an old setup.py that imports pkg_resources."""
    prereleases: bool = False
    """Allow pre-release versions."""
    exclude_newer: Annotated[
        datetime | None,
        Field(strict=False),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "string", "format": "date-time"},
                    {"type": "string", "format": "date"},
                    {"type": "null"},
                ]
            }
        ),
    ] = None
    """Ignore files uploaded after this time (with a time zone; a date alone is its first instant
    in UTC): the lock repeats later."""
    pytorch_index: IndexUrl | None = None
    """Base of the per-backend PyTorch indexes (`<base>/<backend>`)."""
    sources: dict[str, Name] = {}
    """Project name = index name: where that project comes from."""
    index: list[Index] = []
    # One version per package across platforms: "prefer" (the newest version installable on
    # every platform that has the package, else report the difference), "require" (a difference
    # fails the lock), "no" (each platform resolved on its own).
    same_versions: Literal["prefer", "require", "no"] = "prefer"

    @field_validator("exclude_newer", mode="before")
    @classmethod
    def _a_time(cls, v: Any) -> Any:
        # A date alone (as uv takes it: `2026-11-30`, quoted or a TOML date) is its first instant
        # in UTC; uv reads it in the machine's time zone, but a lock must not depend on where it runs.
        if isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v.strip()):
            try:
                v = date.fromisoformat(v.strip())
            except ValueError:
                return v  # not a date: the datetime parser says why
        if isinstance(v, date) and not isinstance(v, datetime):
            return datetime(v.year, v.month, v.day, tzinfo=timezone.utc)
        # pydantic would read a number as seconds since 1970: a TOML date-time or its text only
        if v is not None and not isinstance(v, (datetime, str)):
            raise ValueError(
                f"exclude-newer must be a date-time such as 2026-11-30T00:00:00Z, got {type(v).__name__} {v!r}"
            )
        return v

    @field_validator("exclude_newer")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError(
                "exclude-newer needs a time zone, e.g. 2026-11-30T00:00:00Z (or a date alone, 2026-11-30: "
                "its first instant in UTC)"
            )
        if v is not None and v.year >= EXCLUDE_NEWER_MAX_YEAR:
            raise ValueError(
                f"exclude-newer {v.isoformat()} is too far in the future (before {EXCLUDE_NEWER_MAX_YEAR} only)"
            )
        return v


class Platform(_Model):
    """A target platform. Never the host: markers and tags are computed from these fields."""

    name: Name
    """How `--platform` and the lock file names (`requirements-rebuild-<name>.txt`) call it."""
    os: Literal["linux", "macos", "windows"]
    """Operating system."""
    arch: Literal["x86_64", "aarch64", "arm64", "ppc64le", "s390x", "armv7l", "i686"]
    """CPU architecture."""
    glibc: VersionStr | None = None
    """Oldest glibc to support (Linux; manylinux tags)."""
    musl: VersionStr | None = None
    """musl version (Linux; musllinux tags)."""
    macos: VersionStr | None = None
    """Oldest macOS version to support."""
    python: PythonVersion | None = None
    """Python version of this platform, when it differs from `[python] version`."""
    backend: BackendName | None = None
    """torch compute backend: its builds come from the matching PyTorch index."""
    markers: dict[str, str] = {}
    """Overrides of environment marker values for this platform."""
    indexes: list[Name] = []
    """Indexes used on this platform only (like listing it in each index's `platforms`)."""
    extras: list[Name] = []
    """Extras of the pyproject.toml named in `from` locked on this platform only, besides
    `[packages] extras` (common to every platform): a torch variant's extra (`["cu128"]` on
    `linux-x86_64-cu128`, as `uv sync --extra cu128` selects it). With same-versions, platforms
    are aligned only with those whose own extras are the same (a variant's torch is its own)."""


class Gpu(_Model):
    """What the visible accelerators must be, e.g. `gpu = { count = ">=1", compute-capability = ">=8.0", memory-gib = ">=20" }`."""

    count: QuantityStr | None = None
    """How many devices are visible, e.g. ">=1" or "==8"."""
    name: str | None = None
    """Device name (as the driver reports it), e.g. "NVIDIA H100 80GB HBM3"."""
    compute_capability: QuantityStr | None = None
    """CUDA compute capability (major.minor), e.g. ">=8.0" for Ampere and newer."""
    memory_gib: QuantityStr | None = None
    """Memory per device in GiB, e.g. ">=20"."""


class System(_Model):
    require_accelerator: bool = False
    """A run never falls back to the CPU: no accelerator fails verify."""
    nvidia_driver: SpecifierStr | None = None
    """NVIDIA driver versions that may run the reference."""
    cuda: VersionStr | None = None
    """CUDA version torch was built with."""
    rocm: VersionStr | None = None
    """ROCm version torch was built with."""
    gpu: Gpu | None = None
    """Device expectations."""


class Data(_Model):
    """A data file or folder. Without `sha256` (or with `sha256 = ""`), `kernodeck capture`
    computes the fingerprint and writes it; verify fails until it is there."""

    name: Name
    """How verify and `capture --data NAME` call it."""
    path: RelPath
    """A file or folder."""
    sha256: FillableSha256 | None = None
    """Content fingerprint (a folder: of its files' digests). Leave out or write \"\": `kernodeck capture`
    computes and writes it; verify fails until then."""
    size: Annotated[int, Field(ge=0)] | None = None
    """Size in bytes, checked before hashing."""
    source: str | None = None
    """Where to get it, for people and hints."""
    access: list[EnvName] = []
    """Environment variables needed to fetch it (names, never values)."""
    external: bool = False
    """The path may lie outside the project (a shared mount); verify reports it as external."""


class Weights(_Model):
    """Weights as a local file (`path`), a file inside an installed distribution (`package` +
    `path`), or a hub repository at a pinned revision (`hub` + `revision` + `files`)."""

    name: Name
    """How verify and `capture --data NAME` call it."""
    path: RelPath | None = None
    """A file or folder (inside `package` when that is set)."""
    package: ProjectName | None = None
    """An installed distribution that holds `path`."""
    hub: str | None = None
    """A hub repository (`org/name`)."""
    revision: Revision | None = None
    """The hub repository's pinned commit."""
    files: dict[str, Sha256] | None = None
    """Hub files and their fingerprints."""
    sha256: FillableSha256 | None = None  # path weights: "" or left out until `kernodeck capture`
    """Fingerprint of `path`; left out or \"\" until `kernodeck capture` records it."""
    size: Annotated[int, Field(ge=0)] | None = None
    """Size in bytes."""
    source: str | None = None
    """Where to get it, for people and hints."""
    access: list[EnvName] = []
    """Environment variables needed to fetch it (names, never values)."""
    external: bool = False
    """The path may lie outside the project (a shared mount); verify reports it as external."""


class Determinism(_Model):
    seed: int | None = None
    """The seed the reference run used."""
    deterministic_algorithms: bool | None = None
    """`torch.use_deterministic_algorithms` as the reference ran it."""
    cudnn_benchmark: bool | None = None
    """`torch.backends.cudnn.benchmark`."""
    cudnn_deterministic: bool | None = None
    """`torch.backends.cudnn.deterministic`."""
    float32_matmul_precision: Literal["highest", "high", "medium"] | None = None
    """`torch.set_float32_matmul_precision`."""
    env: EnvTable = {}
    """Environment variables that affect determinism (e.g. `CUBLAS_WORKSPACE_CONFIG`); names
    without '=', names and values without NUL, line breaks or other control characters."""


class CheckOutput(_Model):
    """One output file of a check and the criteria it must meet, decided before the run."""

    path: RelPath
    """The output file, relative to the manifest's folder."""
    key: str | None = None  # an array in .npz, a tensor in .safetensors/.pt, a key in .json
    """What inside the file: an array in .npz, a tensor in .safetensors/.pt, a key in .json."""
    exists: bool = True
    """`false`: the file must not exist."""
    count: Annotated[int, Field(ge=0)] | None = None
    """Number of items."""
    shape: list[Annotated[int, Field(ge=-1)]] | None = None
    """Shape of the array (-1: any size in that dimension)."""
    dtype: str | None = None
    """Element type of the array."""
    finite: bool | None = None
    """Every value is finite (no NaN or infinity)."""
    min: Number | None = None
    """Smallest value allowed."""
    max: Number | None = None
    """Largest value allowed."""
    ids_from: str | None = None
    """`file#field`: the output's ids equal that input's ids, in order."""
    ids_key: str | None = None
    """The output's id field, when it differs from the input's."""
    equals: list[Any] | None = None
    """The items, exactly."""
    exact: bool = False
    """Equal to `reference`, bit for bit."""
    reference: RelPath | None = None
    """The reference output to compare with."""
    atol: Tolerance | None = None
    """Absolute tolerance against `reference`."""
    rtol: Tolerance | None = None
    """Relative tolerance against `reference`."""
    cosine_min: Annotated[float, Field(ge=-1, le=1)] | None = None
    """Smallest cosine similarity of each row with `reference`."""
    metric: str | None = None
    """A numeric value inside the file (dotted path) compared with `reference`."""
    sha256: Sha256 | None = None
    """Fingerprint of the whole file."""
    external: bool = False
    """`reference` may lie outside the project (a shared mount); verify reports it as external."""


class Check(_Model):
    """A small sample of the application, run as a command and judged by its outputs. Placeholders in `run`: `{out}` becomes a fresh, empty output folder made for this run (each output's `path` is read from it, so the command must write there), `{python}` the interpreter being verified (a leading `python` or `python3` is replaced by it too). Example: `run = ["python", "-m", "app.embed", "--input", "data/samples.jsonl", "--out", "{out}"]` with an output `path = "embeddings.npy"` reads `{out}/embeddings.npy`. The command runs in the manifest's folder, without a shell."""

    name: Name
    """How `kernodeck check` and reports call it."""
    run: Annotated[list[str], Field(min_length=1)]
    """The command, as a list of arguments (no shell); `{out}` and `{python}` are replaced (see above)."""
    timeout: Timeout = 300
    """Seconds before the command is stopped (at most 30 days; not `inf`)."""
    env: EnvTable = {}
    """Environment variables set for the command (names without '=', no control characters)."""
    output: list[CheckOutput] = []
    """The outputs and the criteria each must meet."""


class FileRef(_Model):
    path: RelPath
    """The file."""
    sha256: Sha256 | None = None
    """Its fingerprint."""
    external: bool = False
    """The path may lie outside the project (a shared mount); verify reports it as external."""


class Trajectory(_Model):
    log: RelPath
    """The log the resumed run writes."""
    reference: RelPath
    """The reference run's log."""
    metric: str
    """The value compared along the trajectory."""
    rtol: Tolerance | None = None
    """Relative tolerance."""
    atol: Tolerance | None = None
    """Absolute tolerance."""


class Resume(_Model):
    checkpoint: FileRef
    """The checkpoint the run resumes from."""
    required_state: list[str] = []
    """Keys the checkpoint must hold (e.g. optimizer, scheduler, RNG states)."""
    run: Annotated[list[str], Field(min_length=1)]
    """The command that resumes, as a list of arguments; `{out}` (a fresh output folder: write the log there) and `{python}` are replaced as in `[[check]]`, e.g. `["python", "train.py", "--resume", "checkpoints/step-200.pt", "--log", "{out}/resume.jsonl"]`."""
    timeout: Timeout = 600
    """Seconds before the command is stopped (at most 30 days; not `inf`)."""
    trajectory: Trajectory | None = None
    """The resumed run's metrics against the reference run's."""


class Variant(_Model):
    """A deliberate, recorded difference from the reference (written by `capture --variant`)."""

    name: Name
    """How the variant is called."""
    id: Identity
    """Its identity (date-based, like the reference's)."""
    based_on: str | None = None
    """The reference id it differs from."""
    note: str | None = None
    """Why it differs."""
    changes: dict[str, str] = {}
    """Manifest key = value recorded for this variant."""


class Manifest(_Model):
    schema_version: Literal[1]
    """Always 1."""
    reference: Reference
    """What is reproduced, and its identity."""
    code: Code | None = None
    """The code revision and configuration."""
    python: Python
    """The interpreter."""
    packages: Packages = Packages()
    """What to lock and where from."""
    platform: Annotated[list[Platform], Field(min_length=1)]
    """The platforms to lock for, one entry each."""
    system: System = System()
    """What the machine must offer (driver, CUDA/ROCm, devices)."""
    data: list[Data] = []
    """Data files and folders with their fingerprints."""
    weights: list[Weights] = []
    """Model weights: a file, a file inside a package, or a hub repository at a revision."""
    determinism: Determinism | None = None
    """Settings the reference ran with."""
    check: list[Check] = []
    """Commands whose outputs must meet criteria decided in advance."""
    resume: Resume | None = None
    """Resuming from a checkpoint."""
    variant: list[Variant] = []
    """Deliberate, recorded differences from the reference (`capture --variant`)."""

    @field_validator("schema_version", mode="before")
    @classmethod
    def _an_integer(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(
                f"schema-version must be the integer {SCHEMA_VERSION}, got {type(v).__name__} {v!r}"
            )
        return v

    def get_platform(self, name: str) -> Platform | None:
        return next((p for p in self.platform if p.name == name), None)

    def index_platforms(self, index: str) -> frozenset[str]:
        """The platforms an index is restricted to (its `platforms` and every platform whose
        `indexes` names it); empty: every platform."""
        ix = next((i for i in self.packages.index if i.name == index), None)
        named = {p.name for p in self.platform if index in p.indexes}
        return frozenset([*(ix.platforms if ix else []), *named])

    def packages_for(self, platform: str) -> Packages:
        """`[packages]` as one platform sees it: without the indexes restricted to other platforms
        (and the `sources` entries that name them)."""
        keep = [
            ix
            for ix in self.packages.index
            if not self.index_platforms(ix.name) or platform in self.index_platforms(ix.name)
        ]
        if len(keep) == len(self.packages.index):
            return self.packages
        names = {ix.name for ix in keep}
        return self.packages.model_copy(
            update={
                "index": keep,
                "sources": {k: v for k, v in self.packages.sources.items() if v in names},
            }
        )


def unfingerprinted(m: Manifest) -> list[tuple[tuple[str | int, ...], str]]:
    """(location, "data 'NAME'") of every data and local weights entry whose sha256 is not
    recorded yet (left out or ""): `kernodeck capture` fills them in."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    for i, d in enumerate(m.data):
        if not d.sha256:
            out.append((("data", i, "sha256"), f"data {d.name!r}"))
    for i, w in enumerate(m.weights):
        if not w.hub and not w.sha256:
            out.append((("weights", i, "sha256"), f"weights {w.name!r}"))
    return out


# --- cross-field rules ---------------------------------------------------------------------------

Problem = tuple[tuple[str | int, ...], str]


def _dupes(names: list[str], where: str) -> list[Problem]:
    """A problem at `(where, i, "name")` for each name that appeared before."""
    seen: dict[str, int] = {}
    out: list[Problem] = []
    for i, key in enumerate(names):
        if key in seen:
            out.append(
                ((where, i, "name"), f"duplicate {where} name {key!r} (first at {where}[{seen[key]}])")
            )
        else:
            seen[key] = i
    return out


def _unique_names(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    out += _dupes([p.name for p in m.platform], "platform")
    out += _dupes([d.name for d in m.data], "data")
    out += _dupes([w.name for w in m.weights], "weights")
    out += _dupes([c.name for c in m.check], "check")
    out += _dupes([v.name for v in m.variant], "variant")
    out += [
        (("packages", "index", i, "name"), msg)
        for (_, i, _), msg in _dupes([ix.name for ix in m.packages.index], "index")
    ]
    return out


def _platform_case(m: Manifest) -> list[Problem]:
    """Platform names name files (`requirements-rebuild-<name>.txt`): two that differ only in case
    would be one file on macOS and Windows."""
    seen: dict[str, int] = {}
    out: list[Problem] = []
    for i, p in enumerate(m.platform):
        key = p.name.casefold()
        first = seen.setdefault(key, i)
        if first != i and m.platform[first].name != p.name:
            out.append(
                (
                    ("platform", i, "name"),
                    f"platform name {p.name!r} differs from {m.platform[first].name!r} (platform[{first}]) "
                    "only in case: their lock files would be one file on macOS and Windows",
                )
            )
    return out


def _from_rules(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    seen_from: dict[str, int] = {}
    for i, src in enumerate(m.packages.from_):
        if src in seen_from:
            out.append(
                (("packages", "from", i), f"{src!r} is listed twice (first at from[{seen_from[src]}])")
            )
        seen_from.setdefault(src, i)
    if m.packages.extras and not any(is_pyproject(s) for s in m.packages.from_):
        out.append(
            (
                ("packages", "extras"),
                'extras apply to a pyproject.toml; name one in `from`, e.g. from = ["pyproject.toml"]',
            )
        )
    if m.packages.groups and not any(is_pyproject(s) or is_pipfile(s) for s in m.packages.from_):
        out.append(
            (
                ("packages", "groups"),
                "groups apply to a pyproject.toml (its dependency groups) or a Pipfile (its package "
                'categories); name one in `from`, e.g. from = ["pyproject.toml"]',
            )
        )
    return out


def _platform_extras_rules(m: Manifest) -> list[Problem]:
    """A platform's `extras`, like `[packages] extras`, select extras of a pyproject.toml in `from`."""
    if any(is_pyproject(s) for s in m.packages.from_):
        return []
    return [
        (
            ("platform", i, "extras"),
            'extras apply to a pyproject.toml; name one in [packages] `from`, e.g. from = ["pyproject.toml"]',
        )
        for i, p in enumerate(m.platform)
        if p.extras
    ]


def _index_rules(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    defaults = [i for i, ix in enumerate(m.packages.index) if ix.default]
    for i in defaults[1:]:
        out.append((("packages", "index", i, "default"), "only one index may be the default"))
    platform_names = {p.name for p in m.platform}
    for i, ix in enumerate(m.packages.index):
        for j, pname in enumerate(ix.platforms):
            if pname not in platform_names:
                out.append(
                    (
                        ("packages", "index", i, "platforms", j),
                        f"unknown platform {pname!r} (platforms: {', '.join(sorted(platform_names))})",
                    )
                )
        if ix.default and m.index_platforms(ix.name):
            out.append(
                (
                    ("packages", "index", i, "platforms"),
                    "the default index serves every platform; give a per-platform index no `default`",
                )
            )
        if ix.url is None and not ix.default:
            out.append(
                (
                    ("packages", "index", i, "url"),
                    f"index {ix.name!r} needs a url (only the default index may omit it)",
                )
            )
    return out


def _index_packages(m: Manifest) -> list[Problem]:
    """A project is pinned to one index (unless the two never serve the same platform)."""
    out: list[Problem] = []
    owner: dict[str, str] = {}
    for i, ix in enumerate(m.packages.index):
        for j, pkg in enumerate(ix.packages):
            project = canonicalize_name(pkg)
            if project in owner and owner[project] != ix.name and not _disjoint(m, owner[project], ix.name):
                out.append(
                    (
                        ("packages", "index", i, "packages", j),
                        f"{pkg!r} is already pinned to index {owner[project]!r}",
                    )
                )
            owner[project] = ix.name
    return out


def _index_references(m: Manifest) -> list[Problem]:
    """`[packages] sources` and a platform's `indexes` name declared indexes."""
    out: list[Problem] = []
    names = {ix.name for ix in m.packages.index}
    known = ", ".join(sorted(names)) or "none declared"
    for pkg, ixname in m.packages.sources.items():
        if ixname not in names:
            out.append(
                (("packages", "sources", pkg), f"unknown index {ixname!r} (declared indexes: {known})")
            )
        try:
            _project_name(pkg)
        except ValueError as e:
            out.append((("packages", "sources", pkg), str(e)))
    for i, p in enumerate(m.platform):
        for j, ixname in enumerate(p.indexes):
            if ixname not in names:
                out.append(
                    (("platform", i, "indexes", j), f"unknown index {ixname!r} (declared indexes: {known})")
                )
    return out


def _platform_backends(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    for i, p in enumerate(m.platform):
        b = parse_backend(p.backend) if p.backend else None
        if b is None:
            continue
        if b.kind == "mps" and p.os != "macos":
            out.append((("platform", i, "backend"), "backend 'mps' exists only on os = 'macos'"))
        if b.kind in ("cuda", "rocm", "xpu") and p.os == "macos":
            out.append(
                (
                    ("platform", i, "backend"),
                    f"backend {p.backend!r} does not exist on macOS; use 'mps' or none",
                )
            )
        if b.kind == "rocm" and p.os != "linux":
            out.append((("platform", i, "backend"), f"backend {p.backend!r} exists only on os = 'linux'"))
    return out


def _platform_versions(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    for i, p in enumerate(m.platform):
        if p.os != "linux" and (p.glibc or p.musl):
            out.append(
                (("platform", i, "glibc" if p.glibc else "musl"), "glibc/musl apply only to os = 'linux'")
            )
        if p.glibc and p.musl:
            out.append((("platform", i, "musl"), "a platform has either glibc or musl, not both"))
        if p.os != "macos" and p.macos:
            out.append((("platform", i, "macos"), "macos applies only to os = 'macos'"))
    return out


def _platform_markers(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    for i, p in enumerate(m.platform):
        for key, value in p.markers.items():
            if key not in MARKER_VARIABLES:
                out.append((("platform", i, "markers", key), f"unknown marker variable {key!r}"))
            elif not _MARKER_VALUE.fullmatch(value):
                out.append(
                    (
                        ("platform", i, "markers", key),
                        f"marker value {value!r} may not hold quotes, backslashes or control characters"
                        " (it is written into marker expressions)",
                    )
                )
    return out


def _hub_weights(i: int, w: Weights) -> list[Problem]:
    out: list[Problem] = []
    if w.revision is None:
        out.append(
            (("weights", i, "revision"), f"hub weights {w.hub!r} need a pinned revision (40-hex commit)")
        )
    if not w.files:
        out.append((("weights", i, "files"), "hub weights need `files = { name = sha256 }`"))
    if w.package or w.path:
        out.append((("weights", i, "hub"), "hub weights take `files`, not `path` or `package`"))
    return out


def _weights_rules(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    for i, w in enumerate(m.weights):
        if w.hub:
            out += _hub_weights(i, w)
            continue
        if w.path is None:
            out.append(
                (("weights", i, "path"), "weights need `path` (a file, or a file inside `package`) or `hub`")
            )
        if w.revision or w.files:
            out.append(
                (
                    ("weights", i, "revision" if w.revision else "files"),
                    "only hub weights take revision/files",
                )
            )
    return out


def _output_rules(m: Manifest) -> list[Problem]:
    out: list[Problem] = []
    for i, c in enumerate(m.check):
        for j, o in enumerate(c.output):
            loc: tuple[str | int, ...] = ("check", i, "output", j)
            numeric = o.atol is not None or o.rtol is not None or o.cosine_min is not None
            if numeric and o.reference is None:
                out.append(
                    ((*loc, "reference"), "atol/rtol/cosine-min compare against a `reference` file; add one")
                )
            if o.ids_from is not None and "#" not in o.ids_from:
                out.append(
                    (
                        (*loc, "ids-from"),
                        f"ids-from {_shown(o.ids_from)!r} must be 'file#field', e.g. 'data/samples.jsonl#id'",
                    )
                )
            if o.min is not None and o.max is not None and o.min > o.max:
                out.append(((*loc, "min"), f"min {o.min} is greater than max {o.max}"))
    return out


def _disjoint(m: Manifest, a: str, b: str) -> bool:
    """Two indexes that never serve the same platform (each restricted, no platform in common)."""
    pa, pb = m.index_platforms(a), m.index_platforms(b)
    return bool(pa) and bool(pb) and not (pa & pb)


#: The PEP 508 marker variables.
MARKER_VARIABLES = (
    "os_name",
    "sys_platform",
    "platform_machine",
    "platform_python_implementation",
    "platform_release",
    "platform_system",
    "platform_version",
    "python_version",
    "python_full_version",
    "implementation_name",
    "implementation_version",
)


def leaves_project(rel: str) -> bool:
    """Whether a project-relative path, read as written (no symlinks), names something outside the
    project: absolute, a drive or UNC path, or climbing out with `..`."""
    posix = rel.replace("\\", "/")
    if posix.startswith("/") or re.match(r"^[A-Za-z]:", posix):
        return True
    depth = 0
    for part in posix.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


_OUTSIDE = (
    "{what} {path!r} is outside the project; paths are relative to repro.toml's folder and stay inside it"
)
_EXTERNAL_HINT = " (a shared mount: add `external = true` to this entry)"
_EXTERNAL_FROM_HINT = " (a shared mount: add `external = true` under [packages])"


def _bounded_paths(m: Manifest) -> list[tuple[tuple[str | int, ...], str, str, bool | None]]:
    """(location, what, path, its entry's `external`, None where an entry has none) of every
    path the manifest reads from the project."""
    found: list[tuple[tuple[str | int, ...], str, str, bool | None]] = [
        (("code", "config", i, "path"), "config", c.path, c.external)
        for i, c in enumerate(m.code.config if m.code is not None else [])
    ]
    found += [
        (("packages", "from", i), "source", f, m.packages.external) for i, f in enumerate(m.packages.from_)
    ]
    found += [(("data", i, "path"), "data path", d.path, d.external) for i, d in enumerate(m.data)]
    found += [
        (("weights", i, "path"), "weights path", w.path, w.external)
        for i, w in enumerate(m.weights)
        if w.path is not None and w.package is None
    ]
    if m.resume is not None:
        r = m.resume
        found.append(
            (("resume", "checkpoint", "path"), "checkpoint", r.checkpoint.path, r.checkpoint.external)
        )
        if r.trajectory is not None:
            found.append(
                (("resume", "trajectory", "reference"), "trajectory reference", r.trajectory.reference, None)
            )
    for i, c in enumerate(m.check):
        found += [
            (("check", i, "output", j, "reference"), "reference", o.reference, o.external)
            for j, o in enumerate(c.output)
            if o.reference is not None
        ]
    return found


def _path_bounds(m: Manifest) -> list[Problem]:
    """Every path the manifest reads stays inside the project unless its entry says `external`;
    a check's outputs stay in its output folder."""
    out: list[Problem] = []
    for loc, what, path, external in _bounded_paths(m):
        if external or not leaves_project(path):
            continue
        hint = _EXTERNAL_FROM_HINT if loc[0] == "packages" else _EXTERNAL_HINT if external is not None else ""
        out.append((loc, _OUTSIDE.format(what=what, path=path) + hint))
    for i, c in enumerate(m.check):
        out += [
            (
                ("check", i, "output", j, "path"),
                f"output {o.path!r} leaves the check's output folder; write it relative to $OUT",
            )
            for j, o in enumerate(c.output)
            if leaves_project(o.path)
        ]
    return out


#: The rules that need more than one field, each a function of the whole manifest.
CROSS_FIELD_RULES: tuple[Callable[[Manifest], list[Problem]], ...] = (
    _unique_names,
    _platform_case,
    _from_rules,
    _platform_extras_rules,
    _index_rules,
    _index_packages,
    _index_references,
    _platform_backends,
    _platform_versions,
    _platform_markers,
    _weights_rules,
    _path_bounds,
    _output_rules,
)


def cross_field_problems(m: Manifest) -> list[Problem]:
    """Rules that need more than one field (CROSS_FIELD_RULES, in order); each problem is
    (location, message)."""
    return [problem for rule in CROSS_FIELD_RULES for problem in rule(m)]
