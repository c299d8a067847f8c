"""Fewer cyclic garbage collections while a command builds many long-lived objects.

A cold lock decodes tens of megabytes of index JSON into objects that live until the end of the
run; with the interpreter's default thresholds, the collector keeps walking all of them (measured on
a cold 50-dependency lock: 1.8 of 7 CPU-s in 1,400 collections, 1.2 s in 9 full ones). Kernodeck's
own data has no reference cycles to reclaim, so the thresholds are raised for the duration of the
work and restored after: memory held by short-lived cycles elsewhere is still reclaimed, later.
(Moving the survivors to the oldest generation at the end, `gc.freeze()` then `gc.unfreeze()`,
bought under 1 % of a cold 50-dependency lock's instructions, 0.2 % of a warm resolution:
`benchmarks/internals.py`, issue #39; removed.)
`verify()` and `require()` run in the same way: in a training script torch is imported first, and
each full collection then walks torch's objects too (90 ms each on this machine), several of them
set off by Kernodeck's own imports.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# A young collection every 50,000 allocations (default 700); older generations rarely.
THRESHOLDS = (50_000, 50, 1_000)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's thresholds inside the block; restore the previous ones after."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
