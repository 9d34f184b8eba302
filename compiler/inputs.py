"""Seeded inputs for running a model when the user gives none."""

from __future__ import annotations

import numpy as np

from compiler.ir.graph import Graph


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """One reproducible random tensor per graph input, in a range natural for its type.

    Floats are standard normal; small integer types span their whole range (quantized inputs);
    wider integers stay in 0..9 so that index-like inputs stay valid.
    """
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph.inputs:
        t = value.type
        if t.dtype.startswith("float"):
            feeds[value.name] = rng.standard_normal(t.shape).astype(t.dtype)
        elif t.dtype == "bool":
            feeds[value.name] = rng.integers(0, 2, t.shape).astype(bool)
        elif t.dtype in ("int8", "uint8", "int16", "uint16"):
            info = np.iinfo(t.dtype)
            feeds[value.name] = rng.integers(info.min, int(info.max) + 1, t.shape, dtype=t.dtype)
        else:
            feeds[value.name] = rng.integers(0, 10, t.shape).astype(t.dtype)
    return feeds
