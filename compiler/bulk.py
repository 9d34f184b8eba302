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
def collector_paused(keep: bool = False) -> Iterator[None]:
    """Run the body with the cycle collector off, then restore it as it was.

    With `keep`, what the body built is meant to live (a loaded graph, its layout): everything
    alive at the end is moved out of the collector's sight (`gc.freeze`), so its later passes
    stop walking the whole model (each full pass cost 150 ms on a 50,000-node graph, felt as
    a stall when a group opened). What an earlier `keep` froze is handed back first, so a
    model closed since is collected as usual.
    """
    was_enabled = gc.isenabled()
    if keep:
        gc.unfreeze()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
        if was_enabled:
            gc.enable()
