"""A Target: the marker environment and ordered wheel tags of a declared platform, never the host.

`Target.from_platform(platform, python)` computes everything from the manifest: os, arch, glibc or
musl, macOS version, Python version and implementation. One machine can therefore lock every
platform. Tags come from packaging's own generators (`cpython_tags`, `generic_tags`,
`compatible_tags`, `mac_platforms`) fed with platform lists built here, so the order matches what
an installer on that platform would prefer, with one deliberate difference on Linux: the native
`linux_<arch>` tag ranks after every manylinux/musllinux tag (an index file tagged `linux_<arch>`
was built for some machine, a manylinux one for the platform).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.markers import Marker
from packaging.tags import Tag, compatible_tags, cpython_tags, generic_tags, mac_platforms
from packaging.version import Version

from kernodeck.backends import Backend, parse_backend

if TYPE_CHECKING:
    from kernodeck.manifest.schema import Platform, Python

DEFAULT_GLIBC = "2.28"
DEFAULT_MACOS = "14.0"

#: glibc minor releases per major version (2.x is the only major so far).
_LAST_GLIBC_MINOR = {2: 99}
_LEGACY_MANYLINUX = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
_LEGACY_MANYLINUX_ARCHS = {
    "manylinux2014": {"x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x"},
    "manylinux2010": {"x86_64", "i686"},
    "manylinux1": {"x86_64", "i686"},
}

_OS_MARKERS = {
    "linux": {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux"},
    "macos": {"os_name": "posix", "sys_platform": "darwin", "platform_system": "Darwin"},
    "windows": {"os_name": "nt", "sys_platform": "win32", "platform_system": "Windows"},
}

#: (os, declared arch) -> (platform_machine marker value, arch used in wheel platform tags)
_MACHINE = {
    ("linux", "x86_64"): ("x86_64", "x86_64"),
    ("linux", "aarch64"): ("aarch64", "aarch64"),
    ("linux", "arm64"): ("aarch64", "aarch64"),
    ("linux", "ppc64le"): ("ppc64le", "ppc64le"),
    ("linux", "s390x"): ("s390x", "s390x"),
    ("linux", "armv7l"): ("armv7l", "armv7l"),
    ("linux", "i686"): ("i686", "i686"),
    ("macos", "x86_64"): ("x86_64", "x86_64"),
    ("macos", "arm64"): ("arm64", "arm64"),
    ("macos", "aarch64"): ("arm64", "arm64"),
    ("windows", "x86_64"): ("AMD64", "win_amd64"),
    ("windows", "arm64"): ("ARM64", "win_arm64"),
    ("windows", "aarch64"): ("ARM64", "win_arm64"),
    ("windows", "i686"): ("x86", "win32"),
}

_IMPL = {"cpython": ("cp", "CPython"), "pypy": ("pp", "PyPy")}

#: PyPy's ABI tag suffix ("pypy311_pp73"); PyPy 7.3 covers every supported Python 3 version.
_PYPY_ABI = "pp73"


def _ver_tuple(text: str, n: int = 2) -> tuple[int, ...]:
    rel = Version(text).release
    return tuple((*rel, *([0] * n))[:n])


def manylinux_platforms(arch: str, glibc: str = DEFAULT_GLIBC) -> list[str]:
    """manylinux_2_X_<arch> from `glibc` down to 2.17 (2.5 on x86), legacy aliases after their twin."""
    major, minor = _ver_tuple(glibc)
    oldest = (2, 5) if arch in ("x86_64", "i686") else (2, 17)
    out: list[str] = []
    for maj in range(major, 1, -1):
        top = minor if maj == major else _LAST_GLIBC_MINOR.get(maj, 0)
        floor = oldest[1] if maj == oldest[0] else 0
        for mi in range(top, floor - 1, -1):
            out.append(f"manylinux_{maj}_{mi}_{arch}")
            legacy = _LEGACY_MANYLINUX.get((maj, mi))
            if legacy and arch in _LEGACY_MANYLINUX_ARCHS[legacy]:
                out.append(f"{legacy}_{arch}")
    return out


def musllinux_platforms(arch: str, musl: str) -> list[str]:
    major, minor = _ver_tuple(musl)
    return [f"musllinux_{major}_{mi}_{arch}" for mi in range(minor, -1, -1)]


def platform_tags_for(
    os: str, arch: str, *, glibc: str | None = None, musl: str | None = None, macos: str | None = None
) -> list[str]:
    """The wheel platform tags of a declared platform, most preferred first."""
    _machine, tag_arch = _MACHINE[(os, arch)]
    if os == "linux":
        libc = (
            musllinux_platforms(tag_arch, musl)
            if musl
            else manylinux_platforms(tag_arch, glibc or DEFAULT_GLIBC)
        )
        return [*libc, f"linux_{tag_arch}"]
    if os == "macos":
        major, minor = _ver_tuple(macos or DEFAULT_MACOS)
        return list(mac_platforms((major, minor), tag_arch))
    return [tag_arch]


@dataclass(frozen=True)
class Target:
    """One platform to lock for: its PEP 508 marker environment and its ordered wheel tags."""

    name: str
    os: str
    arch: str
    python_version: str
    python_full_version: str
    implementation: str
    backend: Backend | None
    markers: dict[str, str]
    tags: tuple[Tag, ...]
    libc: str = ""  # "manylinux_2_28", "musllinux_1_2", "macos 14.0", "windows"
    _rank: dict[Tag, int] = field(init=False, default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        rank: dict[Tag, int] = {}
        for i, t in enumerate(self.tags):
            rank.setdefault(t, i)
        object.__setattr__(self, "_rank", rank)

    def __hash__(self) -> int:
        return hash((self.name, self.os, self.arch, self.python_full_version, self.implementation, self.tags))

    @classmethod
    def from_platform(cls, platform: Platform, python: Python) -> Target:
        return cls.build(
            name=platform.name,
            os=platform.os,
            arch=platform.arch,
            python=platform.python or python.version,
            implementation=python.implementation,
            glibc=platform.glibc,
            musl=platform.musl,
            macos=platform.macos,
            backend=platform.backend,
            markers=platform.markers,
        )

    @classmethod
    def build(
        cls,
        *,
        name: str,
        os: str,
        arch: str,
        python: str,
        implementation: str = "cpython",
        glibc: str | None = None,
        musl: str | None = None,
        macos: str | None = None,
        backend: str | None = None,
        markers: Mapping[str, str] | None = None,
    ) -> Target:
        """A target from plain values (what `from_platform` reads from the manifest)."""
        if (os, arch) not in _MACHINE:
            raise ValueError(f"unsupported platform: os {os!r} with arch {arch!r}")
        if implementation not in _IMPL:
            raise ValueError(f"unsupported Python implementation {implementation!r}")
        rel = Version(python).release
        py_version = f"{rel[0]}.{rel[1]}"
        full = ".".join(str(x) for x in (*rel, 0, 0)[:3])
        machine, tag_arch = _MACHINE[(os, arch)]
        _short, pretty = _IMPL[implementation]
        env = dict(_OS_MARKERS[os])
        env.update(
            platform_machine=machine,
            platform_release="",
            platform_version="",
            python_version=py_version,
            python_full_version=full,
            implementation_name=implementation,
            implementation_version=full,
            platform_python_implementation=pretty,
        )
        env.update(markers or {})

        platforms = platform_tags_for(os, arch, glibc=glibc, musl=musl, macos=macos)
        pyv = (rel[0], rel[1])
        nodot = f"{rel[0]}{rel[1]}"
        tags: list[Tag] = []
        if implementation == "cpython":
            tags.extend(cpython_tags(pyv, [f"cp{nodot}"], platforms))
            interp = f"cp{nodot}"
        else:
            tags.extend(generic_tags(f"pp{nodot}", [f"pypy{nodot}_{_PYPY_ABI}"], platforms))
            interp = "pp3"
        tags.extend(compatible_tags(pyv, interp, platforms))
        tags = list(dict.fromkeys(tags))

        if os == "linux":
            libc = (
                f"musllinux_{'_'.join(map(str, _ver_tuple(musl)))}"
                if musl
                else (f"manylinux_{'_'.join(map(str, _ver_tuple(glibc or DEFAULT_GLIBC)))}")
            )
            desc = f"{libc} {tag_arch}"
        elif os == "macos":
            libc = f"macos {macos or DEFAULT_MACOS}"
            desc = f"{libc} {tag_arch}"
        else:
            libc = "windows"
            desc = f"windows {machine}"
        return cls(
            name=name,
            os=os,
            arch=tag_arch if os != "windows" else arch,
            python_version=py_version,
            python_full_version=full,
            implementation=implementation,
            backend=parse_backend(backend) if backend else None,
            markers=env,
            tags=tuple(tags),
            libc=desc,
        )

    # -- queries -----------------------------------------------------------------------------------

    @property
    def best_tag(self) -> Tag:
        return self.tags[0]

    def tag_rank(self, tags: Iterable[Tag]) -> int | None:
        """The best (lowest) rank among a file's tags, None when no tag is supported."""
        best: int | None = None
        for t in tags:
            r = self._rank.get(t)
            if r is not None and (best is None or r < best):
                best = r
        return best

    def supports(self, tags: Iterable[Tag]) -> bool:
        return self.tag_rank(tags) is not None

    def evaluate_marker(self, marker: Marker | str | None, extras: Iterable[str] = ()) -> bool:
        """Evaluate a PEP 508 marker in this target's environment; true if any of `extras` makes it true."""
        if marker is None:
            return True
        m = Marker(marker) if isinstance(marker, str) else marker
        names = list(extras) or [""]
        return any(m.evaluate({**self.markers, "extra": e}) for e in names)

    def summary(self) -> str:
        """e.g. 'cpython 3.11, manylinux_2_28 x86_64, backend cu126'."""
        parts = [f"{self.implementation} {self.python_version}", self.libc]
        if self.backend is not None:
            parts.append(f"backend {self.backend.name}")
        return ", ".join(parts)

    def describe_tag(self) -> str:
        """The most specific tag, for messages: 'cp311-cp311-manylinux_2_28_x86_64'."""
        return str(self.best_tag)


def iter_tag_strings(target: Target) -> Iterator[str]:
    for t in target.tags:
        yield str(t)
