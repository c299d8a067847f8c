"""The probe's reader of installed METADATA headers agrees with `importlib.metadata` (the
reference) on the fields Kernodeck uses, where the two could part: folded fields with blank
continuation lines (a License text), CRLF line ends, a body that looks like headers."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from kernodeck.probe import script

LICENSE = "License: Copyright (c) 2015\n        All rights reserved.\n        \n        Redistribution ...\n"
BODY = "Requires-Dist: not-a-header-in-the-body\n"


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("blank", ["        ", "\t"])
def test_requirements_after_a_folded_license_with_blank_lines(
    tmp_path: Path, newline: str, blank: str
) -> None:
    text = (
        "Metadata-Version: 2.1\nName: Demo\nVersion: 1.0\n"
        + LICENSE.replace("        \n", blank + "\n")
        + "Requires-Dist: numpy>=1.20\nRequires-Dist: rich ; extra == 'fancy'\n"
        + "Requires-Python: >=3.9\nProvides-Extra: fancy\n\n"
        + BODY
    )
    meta = tmp_path / "demo-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_bytes(text.replace("\n", newline).encode())
    reference = importlib.metadata.PathDistribution(meta)

    (entry,) = [d for d in _probe_distributions(tmp_path) if d["name"] == "Demo"]

    assert entry["requires"] == reference.requires == ["numpy>=1.20", "rich ; extra == 'fancy'"]
    assert entry["version"] == reference.version == "1.0"
    assert entry["requires_python"] == reference.metadata["Requires-Python"] == ">=3.9"
    assert entry["extras"] == reference.metadata.get_all("Provides-Extra") == ["fancy"]


def _probe_distributions(site: Path) -> list[dict[str, object]]:
    import sys

    saved = list(sys.path)
    sys.path[:] = [str(site)]
    try:
        return script.distributions()
    finally:
        sys.path[:] = saved
