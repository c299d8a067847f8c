"""Which `[[platform]]` of a manifest a command works on: the one chooser of verify and rebuild.

`choose` takes typed facts (`PlatformFacts`) and returns the platform with the reason it was
chosen, or raises a `UsageError` that says what was rejected and why. The rule, in order:

1. a platform named with `--platform` (unknown name: usage error);
2. with `lone=True` (verify) a manifest with a single platform is that platform, facts or not:
   verify's layers then report any difference as a finding;
3. the platforms whose os and architecture are this machine's;
4. among several, the backend: the candidates whose backend kind the facts offer, in the facts'
   order of preference (verify: the live torch's build, its CUDA/ROCm version checked; rebuild:
   the devices this host has, GPU first), else the platforms without a backend (torch from the
   default indexes, any build).

The facts come from where each command stands: `probe_facts` (verify, from the environment probe)
and `host_facts` (rebuild, from this host's devices before any torch is installed).
"""

from __future__ import annotations

import platform as _platform
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernodeck.backends import parse_backend
from kernodeck.errors import UsageError
from kernodeck.manifest.schema import Platform

if TYPE_CHECKING:
    from kernodeck.probe.facts import Facts

#: Usual spellings of an architecture -> the manifest's.
_ARCH = {
    "amd64": "x86_64",
    "x64": "x86_64",
    "arm64": "aarch64",
    "aarch64": "aarch64",
    "i386": "i686",
    "x86": "i686",
}


def norm_arch(arch: str) -> str:
    """An architecture as the manifest spells it (`x86_64`, `aarch64`, `i686`) from any usual
    spelling (`AMD64`, `arm64`, ...)."""
    a = arch.lower()
    return _ARCH.get(a, a)


def os_of_sys_platform(sys_platform: str) -> str:
    """A manifest `os` (`linux`, `macos`, `windows`) from `sys.platform`; anything else as it is."""
    if sys_platform.startswith("linux"):
        return "linux"
    if sys_platform == "darwin":
        return "macos"
    if sys_platform in ("win32", "cygwin"):
        return "windows"
    return sys_platform


#: Device kinds a host can offer, GPU first (the order of preference of `host_facts`).
HOST_KIND_ORDER = ("cuda", "rocm", "mps", "cpu")

#: Where a `PlatformFacts`' backend kinds come from: the environment's torch build, the host's
#: devices (rebuild, before torch is installed), or the drivers an environment without torch sees.
KindsSource = Literal["live-torch", "host-devices", "drivers"]


@dataclass(frozen=True)
class PlatformFacts:
    """What a chooser needs to know about the machine (or environment) a command looks at."""

    os: str  # "linux" | "macos" | "windows"
    machine: str  # as observed ("aarch64", "AMD64"), for messages; `arch` is normalised
    kinds: tuple[str, ...]  # backend kinds on offer, most preferred first: ("cuda", "cpu")
    kinds_from: KindsSource
    cuda: str | None = None  # the live torch's CUDA version ("12.6"), when known
    hip: str | None = None  # the live torch's HIP/ROCm version, when known

    @property
    def arch(self) -> str:
        return norm_arch(self.machine)

    def where(self) -> str:
        return f"this {self.os} {self.arch} machine"


@dataclass(frozen=True)
class PlatformChoice:
    platform: Platform
    #: Why this one, in words ("named with --platform", "matches this linux x86_64 machine ...").
    reason: str
    named: bool = False


def backend_kind(backend: str | None) -> str:
    """The device kind of a platform's backend, as the backend table says (cpu when none)."""
    parsed = parse_backend(backend) if backend else None
    return parsed.kind if parsed is not None else "cpu"


def host_device_kinds() -> tuple[str, ...]:
    """The device kinds this host has (driver files and tools, no torch), GPU first."""
    kinds = {"cpu"}
    if Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi"):
        kinds.add("cuda")
    if Path("/dev/kfd").exists():
        kinds.add("rocm")
    if sys.platform == "darwin":
        kinds.add("mps")
    return tuple(k for k in HOST_KIND_ORDER if k in kinds)


def host_facts(kinds: Sequence[str] | None = None) -> PlatformFacts:
    """This host, as rebuild sees it before anything is installed (`kinds`: the device kinds, found
    with `host_device_kinds` when not given)."""
    found = tuple(kinds) if kinds is not None else host_device_kinds()
    return PlatformFacts(
        os=os_of_sys_platform(sys.platform),
        machine=_platform.machine(),
        kinds=found,
        kinds_from="host-devices",
    )


def live_kind(facts: Facts) -> str:
    """The backend kind of an environment: its torch build, else the drivers it sees."""
    kind = facts.torch_build_kind()
    if kind is not None:
        return kind
    if facts.nvidia.driver() is not None:
        return "cuda"
    if facts.rocm.driver_present:
        return "rocm"
    return "mps" if facts.platform.os == "macos" else "cpu"


def probe_facts(facts: Facts) -> PlatformFacts:
    """An environment as verify's probe saw it: its os and machine, and the live torch build."""
    kind = live_kind(facts)
    return PlatformFacts(
        os=os_of_sys_platform(facts.markers.get("sys_platform", "")) or facts.platform.os,
        machine=facts.platform.machine,
        kinds=(kind,),
        kinds_from="live-torch" if facts.torch_build_kind() is not None else "drivers",
        cuda=facts.torch_cuda(),
        hip=facts.torch_hip(),
    )


def _describe_kinds(facts: PlatformFacts) -> str:
    if facts.kinds_from == "live-torch":
        return f"the live torch is a {facts.kinds[0]} build"
    whose = "devices" if facts.kinds_from == "host-devices" else "drivers"
    return f"this machine's {whose}: {', '.join(facts.kinds)}"


def choose(
    platforms: Sequence[Platform],
    facts: PlatformFacts | None,
    name: str | None,
    *,
    known: Sequence[Platform] | None = None,
    lone: bool = False,
    among: str = "",
) -> PlatformChoice:
    """The platform a command works on, with the reason (see the module docstring for the rule).

    `platforms`: the candidates (rebuild: the locked ones); `known`: every platform of the manifest
    (for `--platform NAME` and messages; `platforms` when None); `lone`: a single known platform is
    chosen without facts; `among`: a word for the candidates in messages ("locked")."""
    every = list(known if known is not None else platforms)
    names = ", ".join(p.name for p in every)
    if name is not None:
        for p in every:
            if p.name == name:
                return PlatformChoice(p, "named with --platform", named=True)
        raise UsageError(f"no platform {name!r} in the manifest", hint=f"platforms: {names}")
    if lone and len(every) == 1:
        return PlatformChoice(every[0], "the only platform in the manifest")
    if facts is None:
        raise UsageError(
            "cannot choose a platform without facts about the environment",
            hint=f"pass --platform (one of {names})",
        )
    rejected: list[str] = []
    fits: list[Platform] = []
    for p in platforms:
        if p.os != facts.os:
            rejected.append(f"{p.name}: os {p.os}, this machine is {facts.os}")
        elif norm_arch(p.arch) != facts.arch:
            rejected.append(f"{p.name}: arch {p.arch}, this machine is {facts.machine}")
        else:
            fits.append(p)
    by_backend = False
    if len(fits) > 1:
        ranked: list[tuple[int, Platform]] = []
        loose: list[Platform] = []
        for p in fits:
            b = parse_backend(p.backend) if p.backend else None
            if b is None:
                loose.append(p)  # no backend: torch from the default indexes, any build
            elif b.kind not in facts.kinds:
                rejected.append(f"{p.name}: backend {b.name}, {_describe_kinds(facts)}")
            elif b.kind == "cuda" and facts.cuda and b.version != ".".join(facts.cuda.split(".")[:2]):
                rejected.append(f"{p.name}: backend {b.name}, the live torch is built for CUDA {facts.cuda}")
            elif b.kind == "rocm" and facts.hip and not facts.hip.startswith(str(b.version)):
                rejected.append(f"{p.name}: backend {b.name}, the live torch is built for ROCm {facts.hip}")
            else:
                ranked.append((facts.kinds.index(b.kind), p))
        best = min((rank for rank, _ in ranked), default=None)
        exact = [p for rank, p in ranked if rank == best]
        by_backend = bool(exact)
        fits = exact or loose
    what = f"{among} platform" if among else "platform"
    if len(fits) == 1:
        chosen = fits[0]
        why = f"matches {facts.where()}"
        if by_backend and backend_kind(chosen.backend) != "cpu":
            kind = backend_kind(chosen.backend)
            live = facts.kinds_from == "live-torch"
            why += f" and the live torch ({kind} build)" if live else f" and its {kind} devices"
        if len(every) > 1:
            why += (
                f" (pass --platform to choose another: {', '.join(p.name for p in every if p is not chosen)})"
            )
        return PlatformChoice(chosen, why)
    if not fits:
        raise UsageError(
            f"no {what} in the manifest matches {facts.where()}",
            context=rejected,
            hint=f"pass --platform (one of {names}), or add a [[platform]] for this machine",
        )
    raise UsageError(
        f"several {what}s match {facts.where()}: {', '.join(p.name for p in fits)}",
        hint="pass --platform to choose one",
    )
