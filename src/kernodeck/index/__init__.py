"""Reading package indexes: pages, files and core metadata (see client.py), and judging files (evaluate.py)."""

from __future__ import annotations

from kernodeck.index.client import ClientStats, IndexClient
from kernodeck.index.evaluate import Accepted, Rejected, evaluate
from kernodeck.index.models import (
    CoreMetadata,
    IndexFile,
    IndexSource,
    MetadataError,
    NotFound,
    ProjectPage,
)
from kernodeck.index.sources import MissingCredential, default_index_url, redact

__all__ = [
    "Accepted",
    "ClientStats",
    "CoreMetadata",
    "IndexClient",
    "IndexFile",
    "IndexSource",
    "MetadataError",
    "MissingCredential",
    "NotFound",
    "ProjectPage",
    "Rejected",
    "default_index_url",
    "evaluate",
    "redact",
]
