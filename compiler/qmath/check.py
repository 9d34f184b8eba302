"""Checks of a quantized graph's parameters that no single operator can see.

An int32 bias only makes sense at scale input_scale x weight_scale (per output channel): the
integer kernel adds it to the accumulator as it is. A file whose bias DequantizeLinear says
otherwise would compute something else than it declares, so it is refused at load.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.ir.graph import Constant, Graph, Node, Value

# float32 products of two float32 scales agree to about one ulp; a few allow for exporters that
# computed the bias scale in double.
RELATIVE_TOLERANCE = 4 * float(np.finfo(np.float32).eps)


def _dequantize_scale(value: Value | None, dtype: str | None = None) -> np.ndarray | None:
    """The constant scale of the DequantizeLinear producing `value` (of integers of `dtype`)."""
    node = value.producer if value is not None else None
    if node is None or node.op != "DequantizeLinear" or not isinstance(node.inputs[1], Constant):
        return None
    if dtype is not None and node.inputs[0].type.dtype != dtype:
        return None
    return node.inputs[1].data.astype(np.float64).reshape(-1)


def _check_bias(layer: Node, x: Value, w: Value, bias: Value) -> None:
    bias_scale = _dequantize_scale(bias, "int32")
    x_scale, w_scale = _dequantize_scale(x), _dequantize_scale(w)
    if bias_scale is None or x_scale is None or w_scale is None or x_scale.size != 1:
        return
    expected = np.float32(x_scale[0]) * w_scale.astype(np.float32)
    if bias_scale.size not in (1, expected.size) and expected.size != 1:
        return  # a shape problem, which inference reports
    bias_scale, expected = np.broadcast_arrays(bias_scale, expected)
    with np.errstate(divide="ignore", invalid="ignore"):  # a product that underflows to 0
        error = np.abs(bias_scale - expected) / np.abs(expected)
    bad = np.flatnonzero(~(error <= RELATIVE_TOLERANCE))
    if bad.size:
        k = int(bad[0])
        raise ModelError(f"its int32 bias has scale {bias_scale[k]:.9g}, but input scale x "
                         f"weight scale is {expected[k]:.9g}: an integer kernel adds the bias "
                         "to the accumulator, so the two must be equal",
                         node=f"{layer.name} ({layer.op})")


def check_quantization(graph: Graph) -> None:
    """Raise ModelError naming the first layer whose int32 bias scale is inconsistent."""
    readers: dict[int, list[Node]] = {}
    for node in graph.nodes:
        for value in node.inputs:
            if value is not None:
                readers.setdefault(id(value), []).append(node)
    for node in graph.nodes:
        if node.op in ("Conv", "Gemm") and len(node.inputs) > 2 and node.inputs[2] is not None:
            _check_bias(node, node.inputs[0], node.inputs[1], node.inputs[2])
        elif node.op == "MatMul":
            for add in readers.get(id(node.output), []):
                if add.op == "Add":
                    other = add.inputs[1] if add.inputs[0] is node.output else add.inputs[0]
                    _check_bias(node, node.inputs[0], node.inputs[1], other)
