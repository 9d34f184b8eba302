"""Gather with constant indices, on any axis (channel shuffles lower to it)."""

from __future__ import annotations

import numpy as np

from compiler.codegen.codetables import table
from compiler.codegen.kernel import Kernel
from compiler.errors import KilnError
from compiler.ir.graph import Constant


def gather_indices(k: Kernel) -> tuple[int, np.ndarray]:
    """(axis, flat indices made non-negative) of a Gather whose indices are a constant."""
    node = k.node
    data, indices = node.inputs[0].type, node.inputs[1]
    if not isinstance(indices, Constant):
        raise KilnError(f"cannot generate Gather {node.name}: its indices must be constants")
    axis = int(node.attrs.get("axis", 0)) % len(data.shape)
    dim = data.shape[axis]
    flat = indices.data.astype(np.int64).reshape(-1)
    if flat.size and (flat.min() < -dim or flat.max() >= dim):
        raise KilnError(f"cannot generate Gather {node.name}: an index lies outside "
                        f"[{-dim}, {dim - 1}]")
    return axis, flat % max(dim, 1)


def emit_gather(k: Kernel) -> None:
    """y[o, j, i] = x[o, idx[j], i], with o the axes before `axis` and i those after it.

    The rows of `inner` elements copied per index are contiguous in x and y; for the channel
    axis of NHWC (inner = 1) it is a table-driven shuffle of each pixel.
    """
    node = k.node
    shape = node.inputs[0].type.shape
    axis, flat = gather_indices(k)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    dim, count = shape[axis], len(flat)
    if count == 0 or outer * inner == 0:
        return
    idx = table(k, "idx", flat)
    with k.loop(outer) as o, k.loop(count) as j:
        src = k.load(idx, j)
        with k.loop(inner) as i:
            x = k.load(k.args[0], k.index((o, dim * inner), (src, inner), (i, 1)))
            k.store(x, k.outs[0], k.index((o, count * inner), (j, inner), (i, 1)))
