"""Pausing Python's cycle collector while a big graph is built: its passes grow with the heap.

The collector runs after every few hundred allocations and, in its oldest generation, walks
every live object; building a 50,000-node graph allocates millions of objects and so pays for
many full walks over a heap that is all still in use. Loading and laying out pause it and let
it run once at the end (reference counting still frees everything acyclic meanwhile).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cycle collector off, then restore it as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def settle() -> None:
    """Once a model is open and the previous one dropped: collect, then keep what lives.

    Everything alive is moved out of the collector's sight (`gc.freeze`), so its later passes
    stop walking the whole model: each full pass cost 150 ms on a 50,000-node graph, felt as a
    stall when a group opened. What the previous call froze is handed back and collected
    first, so the model closed since is freed now.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
