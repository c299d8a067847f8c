"""Reading package indexes: pages, files and core metadata (see client.py), and judging files (evaluate.py).

The HTTP client (client.py) is imported on first use, so that the light modules (the cache, the
models) can be used without pulling in httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernodeck.index.evaluate import Accepted, Rejected, evaluate
from kernodeck.index.models import (
    CoreMetadata,
    IndexFile,
    IndexSource,
    MetadataError,
    NotFound,
    ProjectPage,
)
from kernodeck.index.sources import MissingCredential, default_index_url
from kernodeck.support.urls import redact

if TYPE_CHECKING:
    from kernodeck.index.client import ClientStats, IndexClient

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


def __getattr__(name: str) -> Any:
    if name in ("ClientStats", "IndexClient"):
        from kernodeck.index import client

        value = getattr(client, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
