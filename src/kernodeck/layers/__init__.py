"""The layers of a report, as one typed enum: the order verify checks them, what each depends
on, and which kind of cause a difference in it points to (inputs, software, execution
conditions, results). Every module that names a layer imports it from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from kernodeck.errors import UsageError


class Layer(str, Enum):
    """A layer of a verify, check or rebuild report."""

    CODE = "code"
    DATA = "data"
    INTERPRETER = "interpreter"
    PACKAGES = "packages"
    CONTRACT = "contract"
    REBUILD = "rebuild"
    SYSTEM = "system"
    BACKEND = "backend"
    DEVICE = "device"
    APPLICATION = "application"
    RESUME = "resume"

    def __str__(self) -> str:  # f"{layer}" is its name, on every Python version
        return self.value


class Cause(str, Enum):
    """Where a difference in a layer comes from (the brief's three, plus the results)."""

    INPUTS = "inputs"
    SOFTWARE = "software"
    EXECUTION = "execution conditions"
    RESULTS = "results"

    def __str__(self) -> str:
        return self.value


#: The layers `kernodeck verify` runs, in order.
VERIFY_LAYERS: tuple[Layer, ...] = (
    Layer.CODE,
    Layer.DATA,
    Layer.INTERPRETER,
    Layer.PACKAGES,
    Layer.CONTRACT,
    Layer.SYSTEM,
    Layer.BACKEND,
    Layer.DEVICE,
    Layer.APPLICATION,
    Layer.RESUME,
)

#: Every layer in report order (rebuild's own stages sit with the software layers).
ORDER: tuple[Layer, ...] = (
    Layer.CODE,
    Layer.DATA,
    Layer.INTERPRETER,
    Layer.PACKAGES,
    Layer.CONTRACT,
    Layer.REBUILD,
    Layer.SYSTEM,
    Layer.BACKEND,
    Layer.DEVICE,
    Layer.APPLICATION,
    Layer.RESUME,
)

CAUSE: dict[Layer, Cause] = {
    Layer.CODE: Cause.INPUTS,
    Layer.DATA: Cause.INPUTS,
    Layer.INTERPRETER: Cause.SOFTWARE,
    Layer.PACKAGES: Cause.SOFTWARE,
    Layer.CONTRACT: Cause.SOFTWARE,
    Layer.REBUILD: Cause.SOFTWARE,
    Layer.SYSTEM: Cause.EXECUTION,
    Layer.BACKEND: Cause.EXECUTION,
    Layer.DEVICE: Cause.EXECUTION,
    Layer.APPLICATION: Cause.RESULTS,
    Layer.RESUME: Cause.RESULTS,
}

#: Layers whose checks need facts from the environment probe.
FACT_LAYERS: frozenset[Layer] = frozenset(
    {
        Layer.INTERPRETER,
        Layer.PACKAGES,
        Layer.CONTRACT,
        Layer.SYSTEM,
        Layer.BACKEND,
        Layer.DEVICE,
        Layer.APPLICATION,
        Layer.RESUME,
    }
)


#: What a layer needs, as data: a required failure in any of these layers skips it (with the
#: reason). The application checks and the resume check run only on an environment every
#: earlier layer passed; the other layers run whatever failed before them, so that one run lists
#: every problem. Layers needing the probe's facts are FACT_LAYERS (a failed probe skips them).
NEEDS: dict[Layer, frozenset[Layer]] = {
    layer: frozenset(VERIFY_LAYERS[: VERIFY_LAYERS.index(layer)])
    if layer in (Layer.APPLICATION, Layer.RESUME)
    else frozenset()
    for layer in VERIFY_LAYERS
}


def rank(layer: Layer | str) -> int:
    """Position of a layer in report order (unknown names last)."""
    try:
        return ORDER.index(Layer(layer))
    except ValueError:
        return len(ORDER)


def parse_layers(values: Iterable[str], *, option: str = "--only") -> list[Layer]:
    """Layer names from the command line: repeated and/or comma-separated; UsageError naming the
    unknown one."""
    out: list[Layer] = []
    for value in values:
        for part in str(value).split(","):
            name = part.strip().lower()
            if not name:
                continue
            try:
                layer = Layer(name)
            except ValueError:
                raise UsageError(
                    f"{option}: unknown layer {name!r}",
                    hint="layers: " + ", ".join(layer.value for layer in VERIFY_LAYERS),
                ) from None
            if layer not in out:
                out.append(layer)
    return out


def selected(only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[Layer]:
    """The verify layers that `--only` / `--skip` leave, in order."""
    only_l = parse_layers(only, option="--only")
    skip_l = parse_layers(skip, option="--skip")
    return [layer for layer in VERIFY_LAYERS if (not only_l or layer in only_l) and layer not in skip_l]


# The table `kernodeck diff` and the renderers group layers and step kinds by.
#: Layers in the order verify checks them; a difference is reported against the first.
LAYER_ORDER: tuple[str, ...] = (
    "code",
    "config",
    "data",
    "weights",
    "interpreter",
    "packages",
    "contract",
    "rebuild",
    "system",
    "backend",
    "device",
    "application",
    "resume",
)

#: layer -> (group, cause)
_LAYERS: dict[str, tuple[str, str]] = {
    "code": ("code", "inputs"),
    "config": ("code", "inputs"),
    "data": ("data", "inputs"),
    "weights": ("data", "inputs"),
    "interpreter": ("packages", "software"),
    "python": ("packages", "software"),
    "packages": ("packages", "software"),
    "contract": ("packages", "software"),
    "rebuild": ("packages", "software"),
    "system": ("system and backend", "execution conditions"),
    "platform": ("system and backend", "execution conditions"),
    "backend": ("system and backend", "execution conditions"),
    "device": ("system and backend", "execution conditions"),
    "compute": ("system and backend", "execution conditions"),
    "application": ("results", "results"),
    "checks": ("results", "results"),
    "resume": ("results", "results"),
}


def layer_info(layer: str) -> tuple[str, str]:
    """(group, cause) of a layer; unknown layers are grouped under "other"."""
    return _LAYERS.get(layer, ("other", "other"))
