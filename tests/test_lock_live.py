"""Lock a small real stack against the default index (pip's own default: the public index) with a
fixed exclude-newer, and compare with tests/data/lock-live-expected.txt.

Marked `live`: it needs the network and is not part of `make test` (run `make test-live`).
Regenerate the expected file with KERNODECK_UPDATE_LIVE=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from kernodeck.index.sources import builtin_index_url
from kernodeck.lock.orchestrate import lock_manifest
from kernodeck.lockfile.names import requirements_filename
from kernodeck.lockfile.read import read_lockfile
from kernodeck.lockfile.write import strip_credentials

pytestmark = pytest.mark.live

EXPECTED = Path(__file__).parent / "data" / "lock-live-expected.txt"
PLATFORMS = ("linux-x86_64", "windows-x86_64")
MANIFEST = """\
schema-version = 1

[reference]
name = "live-lock"
id = "1"

[python]
version = "3.11"

[packages]
requirements = ["requests==2.32.3"]
exclude-newer = 2025-01-01T00:00:00Z

[[packages.index]]
name = "default"
default = true

[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"

[[platform]]
name = "windows-x86_64"
os = "windows"
arch = "x86_64"
"""


def test_live_lock_matches_expected(tmp_path: Path) -> None:
    # pip's own built-in default (the public index), whatever the locker's pip configuration says.
    default = strip_credentials(builtin_index_url())
    path = tmp_path / "repro.toml"
    path.write_text(MANIFEST, encoding="utf-8")
    lock_manifest(path, cache_dir=tmp_path / "cache")
    parts = []
    for name in PLATFORMS:
        text = (tmp_path / requirements_filename(name)).read_text(encoding="utf-8")
        parts.append(f"=== {requirements_filename(name)} ===\n{text.replace(default, '<default-index>')}")
    got = "".join(parts)
    if os.environ.get("KERNODECK_UPDATE_LIVE"):
        EXPECTED.write_text(got, encoding="utf-8")
    assert got == EXPECTED.read_text(encoding="utf-8")


JOINT = """\
schema-version = 1

[reference]
name = "live-joint"
id = "1"

[python]
version = "3.11"

[packages]
requirements = ["numpy", "pandas"]
exclude-newer = 2025-12-01T00:00:00Z

[[platform]]
name = "linux-old"
os = "linux"
arch = "x86_64"
glibc = "2.17"

[[platform]]
name = "linux-x86_64"
os = "linux"
arch = "x86_64"

[[platform]]
name = "macos-arm64"
os = "macos"
arch = "arm64"
macos = "14.0"
"""


def test_live_joint_resolution_gives_one_version_everywhere(tmp_path: Path) -> None:
    """An old glibc platform would take older numpy/pandas on its own; jointly, every platform
    gets the same public version (or the difference is reported)."""
    path = tmp_path / "repro.toml"
    path.write_text(JOINT, encoding="utf-8")
    result = lock_manifest(path, cache_dir=tmp_path / "cache")
    assert result.ok
    locks = {
        n: read_lockfile(tmp_path / requirements_filename(n)).by_name()
        for n in ("linux-old", "linux-x86_64", "macos-arm64")
    }
    differing = {d.name for d in result.differences}
    for project in ("numpy", "pandas"):
        versions = {Version(str(lk[canonicalize_name(project)].version)).public for lk in locks.values()}
        assert len(versions) == 1 or project in differing, (project, versions)
