"""Facts: what the probes observed about an environment, as typed models.

The probe scripts print raw observations (the text of /proc/driver/nvidia/version, the CSV of
`nvidia-smi`); the parsing lives here so that recorded fixtures exercise it too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from packaging.utils import NormalizedName, canonicalize_name

from kernodeck.manifest.model import Model


class _M(Model):
    model_config = {"extra": "forbid"}


class Interpreter(_M):
    executable: str = ""
    version: str
    implementation: str = "cpython"
    implementation_version: str = ""
    prefix: str = ""
    base_prefix: str = ""
    in_venv: bool = False
    cache_tag: str | None = None
    soabi: str | None = None
    ext_suffix: str | None = None
    sysconfig_platform: str = ""
    pointer_bits: int = 64
    byteorder: str = "little"
    gil_disabled: bool = False
    path: list[str] = []


class PlatformFacts(_M):
    system: str
    os: str
    machine: str
    release: str = ""
    glibc: str | None = None
    musl: str | None = None
    macos: str | None = None
    os_release: dict[str, str] = {}
    cpu_count: int | None = None


class RecordProblem(_M):
    path: str
    problem: Literal["missing", "size", "hash", "unreadable", "unhashed", "not-a-file"]
    expected: Any = None
    observed: Any = None


class Distribution(_M):
    name: str
    version: str
    installer: str | None = None
    location: str = ""
    metadata_dir: str = ""
    requires: list[str] = []
    extras: list[str] = []
    requires_python: str | None = None
    record: str | None = None
    direct_url: dict[str, Any] | None = None
    requested: bool = False
    shadowed: bool = False
    record_problems: list[RecordProblem] = []
    record_files: int = 0

    @property
    def key(self) -> NormalizedName:
        return canonicalize_name(self.name)

    @property
    def editable(self) -> bool:
        return bool(((self.direct_url or {}).get("dir_info") or {}).get("editable"))

    @property
    def direct_url_path(self) -> str | None:
        """The local directory it was installed from (PEP 610 `dir_info`: `pip install [-e] DIR`),
        else None (an index, an archive, a VCS checkout)."""
        info = self.direct_url or {}
        url = info.get("url")
        if "dir_info" not in info or not isinstance(url, str) or not url.startswith("file:"):
            return None
        from urllib.parse import urlsplit
        from urllib.request import url2pathname

        return url2pathname(urlsplit(url).path)


class UnlistedFile(_M):
    """A file no RECORD lists, where RECORD-installed code lives (probe/script.py unlisted_files)."""

    location: str
    path: str
    kind: Literal["pth", "module", "package-file"]


class Records(_M):
    checked: bool = False
    unlisted: list[UnlistedFile] = []
    unlisted_more: int = 0
    files: int = 0
    hashed: int = 0
    bytes_hashed: int = 0
    cache_hits: int = 0
    #: written by probes before the records cache (kept so that their recorded facts still load)
    new_hashes: dict[str, list[Any]] = {}


class TorchFiles(_M):
    """torch/version.py, read without importing torch."""

    installed: bool = False
    #: whether `import torch` would find a module (importlib.util.find_spec), without importing it
    importable: bool | None = None
    distribution_version: str | None = None
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    xpu: str | None = None
    git_version: str | None = None
    debug: bool | None = None
    error: str | None = None


class Located(_M):
    package: str
    path: str
    found: bool
    file: str | None = None
    size: int | None = None
    error: str | None = None


class Smi(_M):
    fields: list[str] = []
    csv: str = ""
    ok: bool = False
    error: str | None = None


class Nvml(_M):
    ok: bool = False
    error: str | None = None
    driver_version: str | None = None
    cuda_driver_version: int | None = None
    gpus: list[dict[str, Any]] = []


class SmiGpu(_M):
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    driver_version: str | None = None
    memory_total_mib: int | None = None
    compute_cap: str | None = None
    pci_bus_id: str | None = None


_NVRM = re.compile(r"NVRM version:.*?\s(\d{3,}\.\d+(?:\.\d+)?)\s")


class NvidiaFacts(_M):
    proc_version: str | None = None
    sys_module_version: str | None = None
    smi: Smi | None = None
    nvml: Nvml | None = None

    def smi_gpus(self) -> list[SmiGpu]:
        if self.smi is None or not self.smi.ok:
            return []
        out: list[SmiGpu] = []
        for line in self.smi.csv.splitlines():
            if not line.strip():
                continue
            cells = [c.strip() for c in line.split(",")]
            row: dict[str, Any] = {}
            for fname, cell in zip(self.smi.fields, cells, strict=False):
                key = fname.replace(".", "_")
                if key == "memory_total":
                    key = "memory_total_mib"
                if cell in ("[N/A]", "[Not Supported]", ""):
                    continue
                row[key] = int(cell) if key in ("index", "memory_total_mib") and cell.isdigit() else cell
            out.append(SmiGpu.model_validate(row))
        return out

    def driver(self) -> tuple[str, str] | None:
        """(version, source) of the NVIDIA kernel driver, from the first source that has one."""
        if self.proc_version:
            m = _NVRM.search(self.proc_version + " ")
            if m:
                return m.group(1), "/proc/driver/nvidia/version"
        if self.sys_module_version:
            return self.sys_module_version.strip(), "/sys/module/nvidia/version"
        for gpu in self.smi_gpus():
            if gpu.driver_version:
                return gpu.driver_version, "nvidia-smi"
        if self.nvml is not None and self.nvml.ok and self.nvml.driver_version:
            return self.nvml.driver_version, "NVML (nvidia-ml-py)"
        return None

    def gpu_names(self) -> list[str]:
        names = [g.name for g in self.smi_gpus() if g.name]
        if not names and self.nvml is not None and self.nvml.ok:
            names = [str(g.get("name")) for g in self.nvml.gpus]
        return names


class RocmFacts(_M):
    info_version: str | None = None
    amdgpu_module: bool = False
    amdgpu_version: str | None = None
    kfd: bool = False

    @property
    def driver_present(self) -> bool:
        return self.kfd or self.amdgpu_module


class TorchDevice(_M):
    index: int
    name: str | None = None
    capability: list[int] | None = None
    total_memory: int | None = None
    multi_processor_count: int | None = None
    gcn_arch: str | None = None
    error: str | None = None

    @property
    def capability_str(self) -> str | None:
        return f"{self.capability[0]}.{self.capability[1]}" if self.capability else None


class TorchCompute(_M):
    status: Literal["ok", "mismatch", "failed", "skipped", "not-run"] = "not-run"
    device: str | None = None
    n: int | None = None
    dtype: str | None = None
    tolerance: float | None = None
    seconds: float | None = None
    rel_err: float | None = None
    max_abs_err: float | None = None
    finite: bool | None = None
    error: str | None = None
    #: in-process only: the verdict of an earlier run, reused for the same verified torch files
    #: (RECORD digest), the same devices and the same request (kernodeck.probe.runner)
    reused: bool = False


TorchStatus = Literal["ok", "import-failed", "crashed", "timeout", "not-installed", "not-run", "error"]


#: How the torch facts were gathered: in the interpreter being checked, on the torch it imports
#: anyway ("in-process"), or by the torch probe in a process of its own ("isolated").
TorchMode = Literal["in-process", "isolated"]


class TorchFacts(_M):
    status: TorchStatus = "not-run"
    mode: TorchMode | None = None
    error: str | None = None
    stderr_tail: str | None = None
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    xpu: str | None = None
    git_version: str | None = None
    debug: bool | None = None
    build_kind: Literal["cpu", "cuda", "rocm", "mps", "xpu"] | None = None
    file: str | None = None
    num_threads: int | None = None
    import_seconds: float | None = None
    cuda_available: bool = False
    device_count: int = 0
    devices: list[TorchDevice] = []
    arch_list: list[str] = []
    arch_list_error: str | None = None
    cudnn: int | None = None
    mps_built: bool = False
    mps_available: bool = False
    xpu_available: bool = False
    xpu_device_count: int = 0
    warnings: list[str] = []
    devices_error: str | None = None
    compute: TorchCompute = TorchCompute()

    @property
    def imported(self) -> bool:
        return self.status == "ok"


class Facts(_M):
    """Everything the probes saw. `probe_error` is set when the environment probe itself failed."""

    probe_version: int = 1
    interpreter: Interpreter
    platform: PlatformFacts
    markers: dict[str, str]
    env: dict[str, str | None] = {}
    env_present: dict[str, bool] = {}
    distributions: list[Distribution] = []
    records: Records = Records()
    torch_files: TorchFiles = TorchFiles()
    located: list[Located] = []
    nvidia: NvidiaFacts = NvidiaFacts()
    rocm: RocmFacts = RocmFacts()
    hf_hub_cache: str | None = None
    seconds: float | None = None
    torch: TorchFacts = TorchFacts()

    def dists(self) -> dict[NormalizedName, Distribution]:
        """Installed distributions by normalized name; the first on sys.path wins, as for import."""
        out: dict[NormalizedName, Distribution] = {}
        for d in self.distributions:
            out.setdefault(d.key, d)
        return out

    def duplicated(self) -> list[str]:
        """Names with more than one copy on sys.path (the first wins), sorted. Not a copy: the
        `.egg-info` that setuptools' editable build leaves inside the project's own folder (a
        src layout puts that folder on sys.path), beside the editable install of that project."""
        first = self.dists()
        out: set[str] = set()
        for d in self.distributions:
            if not d.shadowed:
                continue
            owner = first.get(d.key)
            folder = owner.direct_url_path if owner is not None and owner.editable else None
            if (
                folder is not None
                and d.metadata_dir.endswith(".egg-info")
                and Path(os.path.realpath(d.metadata_dir)).is_relative_to(os.path.realpath(folder))
            ):
                continue
            out.add(d.name)
        return sorted(out)

    def torch_cuda(self) -> str | None:
        """torch.version.cuda, from the import when it worked, else from torch/version.py."""
        if self.torch.imported:
            return self.torch.cuda
        return self.torch_files.cuda if self.torch_files.installed else None

    def torch_hip(self) -> str | None:
        if self.torch.imported:
            return self.torch.hip
        return self.torch_files.hip if self.torch_files.installed else None

    def torch_build_kind(self) -> str | None:
        """cpu / cuda / rocm / mps / xpu; from the import, else torch/version.py; None: no torch."""
        if self.torch.imported and self.torch.build_kind:
            return self.torch.build_kind
        tf = self.torch_files
        if not tf.installed:
            return None
        if tf.hip:
            return "rocm"
        if tf.cuda:
            return "cuda"
        if tf.xpu:
            return "xpu"
        return "mps" if self.platform.os == "macos" else "cpu"
