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
