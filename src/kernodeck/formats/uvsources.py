"""uv's torch routing in pyproject.toml: `[tool.uv.sources]` sending torch (or another project of
the PyTorch family) to a `[[tool.uv.index]]` whose URL is a PyTorch per-backend index, by extra
or by marker:

    [tool.uv.sources]
    torch = [{ index = "pytorch-cpu", extra = "cpu" }, { index = "pytorch-cu128", extra = "cu128" }]
    [[tool.uv.index]]
    name = "pytorch-cu128"
    url = "https://<pytorch index>/whl/cu128"
    explicit = true

    routes = torch_routes(data)    # [Route("cpu", extra="cpu", ...), Route("cu128", extra="cu128", ...)]

Read, never resolved: what it says is only evidence for `init`'s proposed platforms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernodeck.backends import backend_of_index, routes_to_backend


@dataclass(frozen=True)
class Route:
    backend: str  # "cu128"
    base: str  # the PyTorch index base its URL is under (`<base>/cu128`)
    project: str  # "torch"
    index: str  # the uv index's name
    extra: str | None = None
    marker: str | None = None

    @property
    def evidence(self) -> str:
        by = f" for extra {self.extra!r}" if self.extra else f" where {self.marker}" if self.marker else ""
        return f"pyproject.toml [tool.uv.sources] {self.project} -> index {self.index!r}{by}"


def _indexes(uv: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """uv index name -> (base, backend) of its URL, for the PyTorch per-backend indexes."""
    out: dict[str, tuple[str, str]] = {}
    items = uv.get("index")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("url"), str):
            found = backend_of_index(item["url"])
            if found is not None:
                out[item["name"]] = found
    return out


def torch_routes(data: dict[str, Any]) -> list[Route]:
    """Every route of a PyTorch-family project to a per-backend index, in the order written."""
    tool = data.get("tool")
    uv = tool.get("uv") if isinstance(tool, dict) else None
    sources = uv.get("sources") if isinstance(uv, dict) else None
    if not isinstance(uv, dict) or not isinstance(sources, dict):
        return []
    indexes = _indexes(uv)
    out: list[Route] = []
    for project, spec in sources.items():
        if not isinstance(project, str) or not routes_to_backend(project):
            continue
        for item in spec if isinstance(spec, list) else [spec]:
            index = item.get("index") if isinstance(item, dict) else None
            if not isinstance(index, str) or index not in indexes:
                continue
            extra, marker = item.get("extra"), item.get("marker")
            out.append(
                Route(
                    indexes[index][1],
                    indexes[index][0],
                    project,
                    index,
                    extra if isinstance(extra, str) else None,
                    marker if isinstance(marker, str) else None,
                )
            )
    return out
