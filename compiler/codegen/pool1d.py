"""1-D pooling ([N, L, C], channels last) run by the 2-D kernel as an image of height 1.

The pipeline lowers a ReduceMean over one axis of a 3-D tensor (and 1-D models pool) to a
1-D AveragePool. Its memory layout is exactly that of [N, 1, L, C], so the 2-D NHWC kernel
serves it unchanged once it sees the node with a unit height.
"""

from __future__ import annotations

import numpy as np

from compiler.codegen.kernels import Kernel, avg_divisors, emit_pool
from compiler.ir.graph import Node, Value
from compiler.ir.types import TensorType


def _taller(value: Value) -> Value:
    t = value.type
    return Value(value.name, TensorType((t.shape[0], 1, *t.shape[1:]), t.dtype, t.quant))


def as_2d(node: Node) -> Node:
    """`node` itself when it is 2-D, else a stand-in of height 1 with 2-D attributes."""
    if len(node.inputs[0].type.shape) != 3 or node.attrs.get("layout") != "NHWC":
        return node
    attrs = dict(node.attrs)
    attrs["kernel_shape"] = (1, *attrs["kernel_shape"])
    attrs["strides"] = (1, *(attrs.get("strides") or (1,)))
    attrs["dilations"] = (1, *(attrs.get("dilations") or (1,)))
    begin, end = attrs.get("pads") or (0, 0)
    attrs["pads"] = (0, begin, 0, end)
    return Node(node.id, node.op, node.name, [_taller(v) for v in node.inputs],
                [_taller(v) for v in node.outputs], attrs, node.provenance)


def emit_pool_any(k: Kernel) -> None:
    """MaxPool / AveragePool of 1-D or 2-D NHWC tensors."""
    node = k.node
    k.node = as_2d(node)
    try:
        emit_pool(k)
    finally:
        k.node = node


def avg_divisors_any(node: Node) -> dict[int, np.ndarray]:
    """The average pool's per-pixel divisors (slot 1), for 1-D or 2-D NHWC."""
    return {1: avg_divisors(as_2d(node))}
