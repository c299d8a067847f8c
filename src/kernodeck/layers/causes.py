"""What a step's `details["cause"]` may say, declared once: the verify layers, the application
checks and the hand-over stages name a cause from here (rebuild's installer failures are
`kernodeck.handover.installer_errors`'s kinds). `StepCause` is a `str` enum: a report's JSON
carries the plain value, and `step.details.get("cause") == StepCause.MISSING` holds for reports
read back from JSON. `tests/test_layers_causes.py` fails on a cause literal not declared here.

`StepKind` is what a step is, for the readers that pick steps out (`Step.kind`, with what it is
about in `details["package"]` or `details["metric"]`): renderers read it through `Step.what()` and
`Step.subject`, never the step's name (`tests/test_render_kinds.py` fails on a name pattern there).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any


class StepCause(str, Enum):
    """Why a step failed, warned or was skipped (its `details["cause"]`)."""

    ARCH_MISSING = "arch-missing"
    BAD_LOCKFILE = "bad-lockfile"
    BAD_SIGNATURE = "bad-signature"
    BROKEN_REQUIREMENT = "broken-requirement"
    BUNDLE_MODIFIED = "bundle-modified"
    BUNDLE_UNREADABLE = "bundle-unreadable"
    BUNDLED_DIRTY = "bundled-dirty"
    CAPABILITY = "capability"
    CODE_NOT_INCLUDED = "code-not-included"
    COMPUTE_FAILED = "compute-failed"
    CPU_FALLBACK = "cpu-fallback"
    CPU_ONLY_BUILD = "cpu-only-build"
    DETERMINISM_ENV = "determinism-env"
    DETERMINISM_TORCH = "determinism-torch"
    DEVICES_HIDDEN = "devices-hidden"
    DIRTY = "dirty"
    DRIVER_SPEC = "driver-spec"
    DRIVER_TOO_OLD = "driver-too-old"
    DUPLICATE = "duplicate"
    EARLIER_FAILURE = "earlier-failure"
    GPU_COUNT = "gpu-count"
    GPU_NAME = "gpu-name"
    HASH_MISMATCH = "hash-mismatch"
    INCOMPATIBLE_PLATFORM = "incompatible-platform"
    INTERRUPTED_LOCK = "interrupted-lock"
    TOOL_BESIDE_THE_LOCK = "kernodeck-beside-the-lock"
    MEMORY = "memory"
    MISSING = "missing"
    NO_CODE_REFERENCE = "no-code-reference"
    NO_COMPUTE = "no-compute"
    NO_DEVICE = "no-device"
    NO_DRIVER = "no-driver"
    NO_FACTS = "no-facts"
    NO_FINGERPRINT = "no-fingerprint"
    NO_GIT = "no-git"
    NO_LOCKFILE = "no-lockfile"
    NO_MPS = "no-mps"
    NO_PLATFORM = "no-platform"
    NO_RECORD = "no-record"
    NOT_A_REPOSITORY = "not-a-repository"
    NOT_IN_LOCK = "not-in-lock"
    NOT_RUN = "not-run"
    NOT_THE_APPLICATION_PROCESS = "not-the-application-process"
    NOT_THE_PROJECT_ENVIRONMENT = "not-the-project-environment"
    OLD_LIBC = "old-libc"
    OUTSIDE_PROJECT = "outside-project"
    PIN_MISMATCH = "pin-mismatch"
    PRERELEASE = "prerelease"
    PROBE_FAILED = "probe-failed"
    RECORD_MISMATCH = "record-mismatch"
    RECORD_MISSING_FILES = "record-missing-files"
    RECORD_UNHASHED = "record-unhashed"
    RECORD_UNREADABLE = "record-unreadable"
    SIZE_MISMATCH = "size-mismatch"
    SOURCE_UNREADABLE = "source-unreadable"
    STALE_LOCK = "stale-lock"
    THE_PROJECT_ITSELF = "the-project-itself"
    TORCH_BUILD_UNKNOWN = "torch-build-unknown"
    TORCH_IMPORT_CRASHED = "torch-import-crashed"
    TORCH_IMPORT_FAILED = "torch-import-failed"
    TORCH_IMPORT_HUNG = "torch-import-hung"
    TORCH_MISSING = "torch-missing"
    UNLISTED_FILES = "unlisted-files"
    UNREADABLE = "unreadable"
    WRONG_ARCH = "wrong-arch"
    WRONG_BUILD = "wrong-build"
    WRONG_CUDA = "wrong-cuda"
    WRONG_ENVIRONMENT = "wrong-environment"
    WRONG_IMPLEMENTATION = "wrong-implementation"
    WRONG_LOCAL_LABEL = "wrong-local-label"
    WRONG_OS = "wrong-os"
    WRONG_PYTHON = "wrong-python"
    WRONG_RESULT = "wrong-result"
    WRONG_REVISION = "wrong-revision"
    WRONG_ROCM = "wrong-rocm"
    WRONG_SOURCE = "wrong-source"
    WRONG_VERSION = "wrong-version"

    def __str__(self) -> str:
        return self.value


class StepKind(str, Enum):
    """What a step is, for the readers that pick steps out (renderers): its `kind`, set by the
    layer that makes the step (`Step.tagged`). Most steps have none."""

    PIN = "pin"
    """One lock pin that is not installed as locked; `details["package"]` is its normalised name."""
    RECORD = "record"
    """One distribution whose installed files differ from its RECORD; `details["package"]`."""
    RECORDS = "records"
    """Every distribution's installed files checked against its RECORD."""
    RECORDS_MISSING = "records-missing"
    """The distributions without a readable RECORD (`observed` lists them)."""
    TRAJECTORY = "trajectory"
    """The resume run's trajectory against the reference; `details["metric"]` names its metric."""
    DATA_FILE = "data-file"
    """One `[[data]]` entry; its name (`data:samples`) already says its layer."""


#: The kinds whose step name already says its layer (`data:samples`), so a label names it once.
NAMED_WITH_LAYER = frozenset({StepKind.DATA_FILE})

#: Reports written before `Step.kind`: the kind a step's name implied, by layer and name
#: prefix. The only place a step name is read as a pattern; new steps carry their kind.
_KIND_BEFORE_DETAILS = (
    ("packages", "pin:", StepKind.PIN),
    ("packages", "record:", StepKind.RECORD),
    ("resume", "trajectory ", StepKind.TRAJECTORY),
    ("data", "data:", StepKind.DATA_FILE),
)
_NAME_BEFORE_DETAILS = {"records": StepKind.RECORDS, "records-missing": StepKind.RECORDS_MISSING}


def step_kind(layer: str, name: str, kind: StepKind | None) -> StepKind | None:
    """A step's declared kind; without one (a report written before kinds), the kind its name
    implied; None for a step of no kind."""
    if kind is not None:
        return kind
    if layer == "packages" and name in _NAME_BEFORE_DETAILS:
        return _NAME_BEFORE_DETAILS[name]
    return next(
        (k for la, prefix, k in _KIND_BEFORE_DETAILS if la == layer and name.startswith(prefix)), None
    )


def step_subject(name: str, details: Mapping[str, Any], kind: StepKind | None, *, from_name: bool) -> str:
    """What a step of a kind is about: the package of a pin or a RECORD step, the metric of a
    trajectory; `from_name` (a report written before kinds) takes it from the name; '' when
    undeclared or for other kinds."""
    if kind in (StepKind.PIN, StepKind.RECORD):
        return str(details.get("package") or (name.partition(":")[2] if from_name else ""))
    if kind is StepKind.TRAJECTORY:
        return str(details.get("metric") or (name.removeprefix("trajectory ").strip() if from_name else ""))
    return ""
