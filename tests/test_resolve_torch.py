"""The PyTorch imitation: backends route only the torch family, local versions, per-platform hashes."""

from __future__ import annotations

from pathlib import Path

from packaging.utils import parse_wheel_filename

from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.targets import Target
from tests.fixtures.index_factory import IndexFactory
from tests.fixtures.lock_project import hashes, pins, read_lock, write_manifest

pytest_plugins = ["tests.fixtures.index_fixtures"]

PLATFORMS = [
    {"name": "linux-cu126", "os": "linux", "arch": "x86_64", "backend": "cu126"},
    {"name": "linux-cpu", "os": "linux", "arch": "x86_64", "backend": "cpu"},
    {"name": "macos-arm64", "os": "macos", "arch": "arm64"},
    {"name": "windows", "os": "windows", "arch": "x86_64", "backend": "cu126"},
    {"name": "linux-rocm", "os": "linux", "arch": "x86_64", "backend": "rocm6.2"},
    {"name": "linux-pypi", "os": "linux", "arch": "x86_64"},
]


def _artifacts_by_sha(f: IndexFactory) -> dict[str, str]:
    out: dict[str, str] = {}
    for ix in f.indexes:
        for project in list(f._index(ix).artifacts):
            for a in f.artifacts(project, index=ix):
                out[a.sha256] = a.filename
    return out


def test_torch_family_per_backend(index_factory: IndexFactory, tmp_path: Path) -> None:
    f = index_factory
    f.pytorch()
    f.add_wheel(
        "torch", "2.7.0", tags="cp311-cp311-manylinux_2_28_x86_64"
    )  # higher, on the default index only
    with f.serve() as srv:
        path = write_manifest(
            tmp_path / "p",
            requirements=["torch==2.6.*", "jinja2"],
            default_url=srv.url(),
            platforms=PLATFORMS,
            pytorch_index=srv.pytorch_base,
        )
        lock_manifest(path, cache_dir=tmp_path / "cache")
        texts = {p["name"]: read_lock(path, str(p["name"])) for p in PLATFORMS}
        assert srv.count(contains="/whl/cu126/jinja2") == 0  # only the torch family goes to a backend index

    expect = {
        "linux-cu126": "2.6.0+cu126",
        "linux-cpu": "2.6.0+cpu",
        "macos-arm64": "2.6.0",
        "windows": "2.6.0+cu126",
        "linux-rocm": "2.6.0+rocm6.2",
        "linux-pypi": "2.6.0",
    }
    by_sha = _artifacts_by_sha(f)
    for plat in PLATFORMS:
        name = str(plat["name"])
        text = texts[name]
        p = pins(text)
        assert p["torch"] == expect[name], name
        nvidia = {n for n in p if n.startswith("nvidia-")}
        if name in ("linux-cu126", "linux-pypi"):
            assert len(nvidia) == 7 and p["triton"] == "3.2.0"
        else:
            assert not nvidia, name
        assert ("pytorch-triton-rocm" in p) == (name == "linux-rocm")
        target = Target.build(
            name=name, os=str(plat["os"]), arch=str(plat["arch"]), python="3.11", backend=plat.get("backend")
        )
        for h in hashes(text):
            fn = by_sha[h]
            assert fn.endswith(".whl"), fn
            assert target.supports(parse_wheel_filename(fn)[3]), (name, fn)
        if "backend" in plat and plat["backend"] != "mps":
            assert f"--extra-index-url {srv.pytorch_base}/{plat['backend']}\n" in text
        else:
            assert "--extra-index-url" not in text


def test_backend_routing_ignores_torch_on_the_default_index(
    index_factory: IndexFactory, tmp_path: Path
) -> None:
    """A cpu platform may not take the default index's torch, even when it is the only 2.7."""
    f = index_factory
    f.pytorch(backends=("cpu",))
    f.add_wheel("torch", "2.7.0", tags="py3-none-any")
    with f.serve() as srv:
        path = write_manifest(
            tmp_path / "p",
            requirements=["torch>=2.6"],
            default_url=srv.url(),
            platforms=[PLATFORMS[1]],
            pytorch_index=srv.pytorch_base,
        )
        lock_manifest(path, cache_dir=tmp_path / "cache")
        assert pins(read_lock(path, "linux-cpu"))["torch"] == "2.6.0+cpu"
        assert srv.count(contains="/default/simple/torch") == 0
