"""The `kernodeck` process loads no pydantic plugins.

pydantic asks its plugin loader once, when the first model is built: the loader imports
importlib.metadata (and with it the email package) and reads the entry points of every installed
distribution, looking for the `pydantic` group (observability tools such as logfire register
there). The kernodeck process builds only its own models (the manifest, reports): no plugin of the
user's is meant for them. Measured: 20 ms of every command in a venv of 90 distributions, more in a
project venv of a few hundred. Only the `kernodeck` process itself does this (`kernodeck.cli.run`),
never a program that imports kernodeck (`require()` runs in the user's own process, with its
plugins)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from typing import Any

#: pydantic's plugin loader: `pydantic.plugin._schema_validator` imports `get_plugins` from it.
LOADER = "pydantic.plugin._loader"


def _no_plugins(*_args: Any, **_kwargs: Any) -> Iterable[Any]:
    return ()


def load_none() -> None:
    """Answer pydantic's plugin loader with "no plugins", before pydantic is imported (a loader
    already imported, or pydantic already in use, is left as it is)."""
    if LOADER in sys.modules or "pydantic" in sys.modules:
        return
    loader = types.ModuleType(
        LOADER, "kernodeck.pydanticplugins: the kernodeck process loads no pydantic plugins"
    )
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
