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


def _real_loader() -> types.ModuleType:
    """pydantic's own loader module, loaded beside the stand-in (not put in sys.modules)."""
    import importlib.machinery
    import importlib.util

    import pydantic.plugin

    spec = importlib.machinery.PathFinder.find_spec(LOADER, list(pydantic.plugin.__path__))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot find {LOADER}", name=LOADER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _from_the_real_loader(name: str) -> Any:
    # Anything else a later pydantic asks of its loader comes from the real one: the stand-in
    # answers only `get_plugins`, and never breaks an import.
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_real_loader(), name)


def load_none() -> None:
    """Answer pydantic's plugin loader with "no plugins", before pydantic is imported (a loader
    already imported, or pydantic already in use, is left as it is)."""
    if LOADER in sys.modules or "pydantic" in sys.modules:
        return
    loader = types.ModuleType(
        LOADER, "kernodeck.support.pydanticplugins: the kernodeck process loads no pydantic plugins"
    )
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    loader.__getattr__ = _from_the_real_loader  # type: ignore[method-assign]
    sys.modules[LOADER] = loader
