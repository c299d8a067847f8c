"""The reproduction manifest: schema (declared models), loading with located errors, editing with tomlkit."""

from __future__ import annotations

from kernodeck.manifest.load import load_manifest, loads_manifest
from kernodeck.manifest.schema import Manifest

__all__ = ["Manifest", "load_manifest", "loads_manifest"]
