"""The backend table: which index each torch backend uses, which packages it routes, minimum drivers.

Data only, in one place. Driver minimums come from NVIDIA's CUDA toolkit release notes (table 3,
"CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version Compatibility", and table 2
for the per-release minimums). Minor-version compatibility means any 12.x build runs on a driver of
at least 525.60.13 on Linux (with PTX JIT limits), and any 13.x build on at least 580.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import Version

#: The default base of the PyTorch wheel indexes; overridable with `[packages] pytorch-index`.
PYTORCH_INDEX_BASE = "https://download.pytorch.org/whl"

BACKEND_FORMS = "cpu, cuNNN (e.g. cu126), rocmX.Y (e.g. rocm6.2), xpu or mps"

_CUDA_RE = re.compile(r"^cu(\d{2,3})$")
_ROCM_RE = re.compile(r"^rocm(\d+)\.(\d+)(?:\.(\d+))?$")

#: Packages the PyTorch indexes publish per backend. Only these are routed to a backend index;
#: everything else comes from the default indexes (dependency-confusion protection).
TORCH_FAMILY: frozenset[str] = frozenset(
    canonicalize_name(n)
    for n in (
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "torchdata",
        "torchrec",
        "torchao",
        "fbgemm-gpu",
        "triton",
        "pytorch-triton",
        "pytorch-triton-rocm",
        "pytorch-triton-xpu",
        "intel-cmplr-lib-rt",
        "intel-cmplr-lib-ur",
        "intel-cmplr-lic-rt",
        "intel-sycl-rt",
        "intel-pti",
        "tcmlib",
        "umf",
        "intel-openmp",
    )
)

#: Minimum Linux driver per CUDA toolkit release (NVIDIA CUDA release notes, table 2, "Toolkit
#: Driver Version" column), keyed by (major, minor).
CUDA_MIN_DRIVER_LINUX: dict[tuple[int, int], str] = {
    (11, 0): "450.36.06",
    (11, 1): "455.23",
    (11, 2): "460.27.03",
    (11, 3): "465.19.01",
    (11, 4): "470.42.01",
    (11, 5): "495.29.05",
    (11, 6): "510.39.01",
    (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    (13, 1): "590.44.01",
}

#: Minimum Linux driver for a CUDA major version under minor-version compatibility (table 3).
CUDA_MINOR_COMPAT_DRIVER_LINUX: dict[int, str] = {
    11: "450.80.02",
    12: "525.60.13",
    13: "580",
}


@dataclass(frozen=True)
class Backend:
    """A torch compute backend, parsed from its manifest name."""

    name: str
    kind: str  # "cpu" | "cuda" | "rocm" | "xpu" | "mps"
    version: str | None = None  # "12.6" for cu126, "6.2" for rocm6.2

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("cuda", "rocm", "xpu", "mps")

    @property
    def uses_pytorch_index(self) -> bool:
        """mps and "no backend" take torch from the default indexes."""
        return self.kind in ("cpu", "cuda", "rocm", "xpu")

    def index_url(self, base: str = PYTORCH_INDEX_BASE) -> str | None:
        if not self.uses_pytorch_index:
            return None
        return f"{base.rstrip('/')}/{self.name}"

    @property
    def local_label(self) -> str | None:
        """The local version label the PyTorch index gives this backend's torch builds."""
        return self.name if self.uses_pytorch_index else None


def parse_backend(name: str) -> Backend | None:
    """Parse a backend name; None when it is not one of the known forms."""
    if name in ("cpu", "xpu", "mps"):
        return Backend(name=name, kind=name)
    m = _CUDA_RE.match(name)
    if m:
        digits = m.group(1)
        return Backend(name=name, kind="cuda", version=f"{digits[:-1]}.{digits[-1]}")
    m = _ROCM_RE.match(name)
    if m:
        version = ".".join(g for g in m.groups() if g is not None)
        return Backend(name=name, kind="rocm", version=version)
    return None


#: A PyTorch-style per-backend index URL: `<base>/whl/<backend>` (cpu, cu128, rocm6.2, xpu).
_PYTORCH_INDEX_URL = re.compile(r"^(?P<base>.+/whl)/(?P<backend>[a-z0-9.]+)/?$")


def backend_of_index(url: str) -> tuple[str, str] | None:
    """(base, backend) of a PyTorch per-backend index URL (`<base>/whl/cu117` -> (`<base>/whl`,
    cu117)); None for any other URL (a plain index names no backend)."""
    m = _PYTORCH_INDEX_URL.match(url.strip())
    if m is None:
        return None
    backend = parse_backend(m.group("backend"))
    if backend is None or not backend.uses_pytorch_index:
        return None
    return m.group("base"), backend.name


def routes_to_backend(project: str) -> bool:
    """Whether a project is published per backend on the PyTorch indexes."""
    return canonicalize_name(project) in TORCH_FAMILY


def min_driver_for_cuda(cuda: str) -> tuple[str, str]:
    """The minimum Linux driver for a CUDA version (e.g. torch.version.cuda "12.6").

    Returns (driver, why): the minor-version-compatibility floor for the major version, which is
    what a torch wheel that bundles its CUDA runtime needs, and a short explanation.
    """
    v = Version(cuda)
    major, minor = v.release[0], (v.release[1] if len(v.release) > 1 else 0)
    floor = CUDA_MINOR_COMPAT_DRIVER_LINUX.get(major)
    exact = CUDA_MIN_DRIVER_LINUX.get((major, minor))
    if floor is not None:
        return floor, (
            f"CUDA {major}.x runs on driver >= {floor} through minor-version compatibility"
            + (f" (CUDA {major}.{minor} itself shipped with {exact})" if exact else "")
        )
    if exact is not None:
        return exact, f"CUDA {major}.{minor} needs driver >= {exact}"
    # Newer than the table: the newest known floor is a lower bound, not a proof.
    newest = max(CUDA_MINOR_COMPAT_DRIVER_LINUX)
    return CUDA_MINOR_COMPAT_DRIVER_LINUX[newest], f"CUDA {cuda} is newer than the known table"
