"""Schema v1 of repro.toml as pydantic models. No I/O here.

Keys are kebab-case in TOML (`allow-dirty`), snake_case in Python (`allow_dirty`). Every model
forbids unknown keys. Field validators check single values (a sha256, a specifier, a marker);
`cross_field_problems` checks what needs the whole document (unique names, index references).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from kernodeck.backends import BACKEND_FORMS, parse_backend
from kernodeck.urls import PLACEHOLDER, is_placeholder_userinfo, redact, secret_query_params

SCHEMA_VERSION = 1

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_PY_VERSION = re.compile(r"^3\.\d+(\.\d+)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=_kebab,
        populate_by_name=True,
        validate_default=False,
        str_strip_whitespace=False,
        strict=True,  # TOML has real types: "no" is not a boolean, "5" is not a number
    )


# --- single-value validators -------------------------------------------------------------------


def _sha256(v: str) -> str:
    if not _HEX64.match(v):
        if re.fullmatch(r"[0-9a-fA-F]{64}", v):
            raise ValueError(f"sha256 {v!r} must be lowercase hex")
        raise ValueError(f"sha256 must be 64 lowercase hex characters, got {len(v)} characters: {v!r}")
    return v


def _revision(v: str) -> str:
    if not _HEX40.match(v):
        raise ValueError(
            f"revision must be a full 40-character lowercase hex git sha (run `git rev-parse HEAD`), got {v!r}"
        )
    return v


def _name(v: str) -> str:
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
Revision = Annotated[str, AfterValidator(_revision)]
Name = Annotated[str, AfterValidator(_name)]
ProjectName = Annotated[str, AfterValidator(_project_name)]
RequirementStr = Annotated[str, AfterValidator(_requirement)]
SpecifierStr = Annotated[str, AfterValidator(_specifier)]
MarkerStr = Annotated[str, AfterValidator(_marker)]
VersionStr = Annotated[str, AfterValidator(_version)]
PythonVersion = Annotated[str, AfterValidator(_python_version)]
EnvName = Annotated[str, AfterValidator(_env_name)]
BackendName = Annotated[str, AfterValidator(_backend)]
IndexUrl = Annotated[str, AfterValidator(_index_url)]
RelPath = Annotated[str, Field(min_length=1)]


# --- sections ----------------------------------------------------------------------------------


class Reference(_Model):
    """What is being reproduced, and its identity. A new `id` whenever the reference changes."""

    name: Name
    id: Annotated[str, Field(min_length=1)]
    description: str | None = None


class ConfigFile(_Model):
    path: RelPath
    sha256: Sha256


class Code(_Model):
    revision: Revision
    allow_dirty: bool = False
    entry_point: str | None = None
    config: list[ConfigFile] = []


class Python(_Model):
    version: PythonVersion
    implementation: Literal["cpython", "pypy"] = "cpython"


class Index(_Model):
    """A package index. Without `url`, the index pip is configured to use."""

    name: Name
    url: IndexUrl | None = None
    default: bool = False
    format: Literal["simple", "find-links"] = "simple"
    packages: list[ProjectName] = []


class Packages(_Model):
    requirements: list[RequirementStr] = []
    constraints: list[RequirementStr] = []
    allow_sdist: list[ProjectName] = []
    prereleases: bool = False
    exclude_newer: Annotated[datetime | None, Field(strict=False)] = None
    pytorch_index: IndexUrl | None = None
    sources: dict[str, Name] = {}
    index: list[Index] = []

    @field_validator("exclude_newer")
    @classmethod
    def _aware(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            raise ValueError("exclude-newer needs a time zone, e.g. 2026-11-30T00:00:00Z")
        return v


class Platform(_Model):
    """A target platform. Never the host: markers and tags are computed from these fields."""

    name: Name
    os: Literal["linux", "macos", "windows"]
    arch: Literal["x86_64", "aarch64", "arm64", "ppc64le", "s390x", "armv7l", "i686"]
    glibc: VersionStr | None = None
    musl: VersionStr | None = None
    macos: VersionStr | None = None
    python: PythonVersion | None = None
    backend: BackendName | None = None
    markers: dict[str, str] = {}


class Gpu(_Model):
    count: SpecifierStr | None = None
    name: str | None = None
    compute_capability: SpecifierStr | None = None
    memory_gib: SpecifierStr | None = None


class System(_Model):
    require_accelerator: bool = False
    nvidia_driver: SpecifierStr | None = None
    cuda: VersionStr | None = None
    rocm: VersionStr | None = None
    gpu: Gpu | None = None


class Data(_Model):
    name: Name
    path: RelPath
    sha256: Sha256
    size: Annotated[int, Field(ge=0)] | None = None
    source: str | None = None
    access: list[EnvName] = []


class Weights(_Model):
    """Weights as a local file (`path`), a file inside an installed distribution (`package` +
    `path`), or a hub repository at a pinned revision (`hub` + `revision` + `files`)."""

    name: Name
    path: RelPath | None = None
    package: ProjectName | None = None
    hub: str | None = None
    revision: Revision | None = None
    files: dict[str, Sha256] | None = None
    sha256: Sha256 | None = None
    size: Annotated[int, Field(ge=0)] | None = None
    source: str | None = None
    access: list[EnvName] = []


class Determinism(_Model):
    seed: int | None = None
    deterministic_algorithms: bool | None = None
    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    float32_matmul_precision: Literal["highest", "high", "medium"] | None = None
    env: dict[str, str] = {}


class CheckOutput(_Model):
    """One output file of a check and the criteria it must meet, decided before the run."""

    path: RelPath
    key: str | None = None  # an array in .npz, a tensor in .safetensors/.pt, a key in .json
    exists: bool = True
    count: Annotated[int, Field(ge=0)] | None = None
    shape: list[Annotated[int, Field(ge=-1)]] | None = None
    dtype: str | None = None
    finite: bool | None = None
    min: float | None = None
    max: float | None = None
    ids_from: str | None = None
    ids_key: str | None = None
    equals: list[Any] | None = None
    exact: bool = False
    reference: RelPath | None = None
    atol: Annotated[float, Field(ge=0)] | None = None
    rtol: Annotated[float, Field(ge=0)] | None = None
    cosine_min: Annotated[float, Field(ge=-1, le=1)] | None = None
    metric: str | None = None
    sha256: Sha256 | None = None


class Check(_Model):
    name: Name
    run: Annotated[list[str], Field(min_length=1)]
    timeout: Annotated[float, Field(gt=0)] = 300
    env: dict[str, str] = {}
    output: list[CheckOutput] = []


class FileRef(_Model):
    path: RelPath
    sha256: Sha256 | None = None


class Trajectory(_Model):
    log: RelPath
    reference: RelPath
    metric: str
    rtol: Annotated[float, Field(ge=0)] | None = None
    atol: Annotated[float, Field(ge=0)] | None = None


class Resume(_Model):
    checkpoint: FileRef
    required_state: list[str] = []
    run: Annotated[list[str], Field(min_length=1)]
    timeout: Annotated[float, Field(gt=0)] = 600
    trajectory: Trajectory | None = None


class Variant(_Model):
    """A deliberate, recorded difference from the reference (written by `capture --variant`)."""

    name: Name
    id: Annotated[str, Field(min_length=1)]
    based_on: str | None = None
    note: str | None = None
    changes: dict[str, str] = {}


class Manifest(_Model):
    schema_version: Literal[1]
    reference: Reference
    code: Code | None = None
    python: Python
    packages: Packages = Packages()
    platform: Annotated[list[Platform], Field(min_length=1)]
    system: System = System()
    data: list[Data] = []
    weights: list[Weights] = []
    determinism: Determinism | None = None
    check: list[Check] = []
    resume: Resume | None = None
    variant: list[Variant] = []

    def get_platform(self, name: str) -> Platform | None:
        return next((p for p in self.platform if p.name == name), None)


# --- cross-field rules ---------------------------------------------------------------------------

Problem = tuple[tuple[str | int, ...], str]


def _dupes(items: list[Any], attr: str, where: str) -> list[Problem]:
    seen: dict[str, int] = {}
    out: list[Problem] = []
    for i, item in enumerate(items):
        key = getattr(item, attr)
        if key in seen:
            out.append(((where, i, attr), f"duplicate {where} name {key!r} (first at {where}[{seen[key]}])"))
        else:
            seen[key] = i
    return out


def cross_field_problems(m: Manifest) -> list[Problem]:
    """Rules that need more than one field; each problem is (location, message)."""
    out: list[Problem] = []
    out += _dupes(m.platform, "name", "platform")
    out += _dupes(m.data, "name", "data")
    out += _dupes(m.weights, "name", "weights")
    out += _dupes(m.check, "name", "check")
    out += _dupes(m.variant, "name", "variant")
    out += [
        (("packages", "index", i, "name"), msg)
        for (_, i, _), msg in _dupes(m.packages.index, "name", "index")
    ]

    defaults = [i for i, ix in enumerate(m.packages.index) if ix.default]
    for i in defaults[1:]:
        out.append((("packages", "index", i, "default"), "only one index may be the default"))
    names = {ix.name for ix in m.packages.index}
    owner: dict[str, str] = {}
    for i, ix in enumerate(m.packages.index):
        if ix.url is None and not ix.default:
            out.append(
                (
                    ("packages", "index", i, "url"),
                    f"index {ix.name!r} needs a url (only the default index may omit it)",
                )
            )
        for j, pkg in enumerate(ix.packages):
            project = canonicalize_name(pkg)
            if project in owner and owner[project] != ix.name:
                out.append(
                    (
                        ("packages", "index", i, "packages", j),
                        f"{pkg!r} is already pinned to index {owner[project]!r}",
                    )
                )
            owner[project] = ix.name
    for pkg, ixname in m.packages.sources.items():
        if ixname not in names:
            known = ", ".join(sorted(names)) or "none declared"
            out.append(
                (("packages", "sources", pkg), f"unknown index {ixname!r} (declared indexes: {known})")
            )
        try:
            _project_name(pkg)
        except ValueError as e:
            out.append((("packages", "sources", pkg), str(e)))

    for i, p in enumerate(m.platform):
        b = parse_backend(p.backend) if p.backend else None
        if b is not None and b.kind == "mps" and p.os != "macos":
            out.append((("platform", i, "backend"), "backend 'mps' exists only on os = 'macos'"))
        if b is not None and b.kind in ("cuda", "rocm", "xpu") and p.os == "macos":
            out.append(
                (
                    ("platform", i, "backend"),
                    f"backend {p.backend!r} does not exist on macOS; use 'mps' or none",
                )
            )
        if b is not None and b.kind == "rocm" and p.os != "linux":
            out.append((("platform", i, "backend"), f"backend {p.backend!r} exists only on os = 'linux'"))
        if p.os != "linux" and (p.glibc or p.musl):
            out.append(
                (("platform", i, "glibc" if p.glibc else "musl"), "glibc/musl apply only to os = 'linux'")
            )
        if p.glibc and p.musl:
            out.append((("platform", i, "musl"), "a platform has either glibc or musl, not both"))
        if p.os != "macos" and p.macos:
            out.append((("platform", i, "macos"), "macos applies only to os = 'macos'"))
        for key in p.markers:
            if key not in _MARKER_KEYS:
                out.append((("platform", i, "markers", key), f"unknown marker variable {key!r}"))

    for i, w in enumerate(m.weights):
        if w.hub:
            if w.revision is None:
                out.append(
                    (
                        ("weights", i, "revision"),
                        f"hub weights {w.hub!r} need a pinned revision (40-hex commit)",
                    )
                )
            if not w.files:
                out.append((("weights", i, "files"), "hub weights need `files = { name = sha256 }`"))
            if w.package or w.path:
                out.append((("weights", i, "hub"), "hub weights take `files`, not `path` or `package`"))
        else:
            if w.path is None:
                out.append(
                    (
                        ("weights", i, "path"),
                        "weights need `path` (a file, or a file inside `package`) or `hub`",
                    )
                )
            if w.sha256 is None:
                out.append((("weights", i, "sha256"), "weights need a sha256 fingerprint"))
            if w.revision or w.files:
                out.append(
                    (
                        ("weights", i, "revision" if w.revision else "files"),
                        "only hub weights take revision/files",
                    )
                )

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
                        f"ids-from {o.ids_from!r} must be 'file#field', e.g. 'data/samples.jsonl#id'",
                    )
                )
            if o.min is not None and o.max is not None and o.min > o.max:
                out.append(((*loc, "min"), f"min {o.min} is greater than max {o.max}"))
    return out


_MARKER_KEYS = {
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
}
