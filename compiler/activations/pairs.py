"""Pairs the int8 tensors of a quantized model's integer graph with the float values they stand for.

Quantizing a float graph puts a QuantizeLinear after each value it quantizes (the QDQ graph);
compiling that graph fuses each such node into the integer operator that makes the value, and
the fused node keeps the QuantizeLinear's id in its provenance. So an int8 value of the integer
graph answers for the float value its QuantizeLinear read. The integer graph computes in NHWC:
a paired tensor is transposed back to the float value's layout (and reshaped when only axes of
one differ), so both are compared element for element.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.activations.layout import derived_layouts, to_layout
from compiler.ir.graph import Graph, Value
from compiler.ir.types import QuantParams


@dataclass(frozen=True)
class Int8Value:
    """A float value's int8 counterpart, arranged as the float value.

    Attributes:
        name: The value's name in the integer graph.
        codes: Its integers (the bytes the int8 bundle computes).
        dequantized: scale * (codes - zero point), float64.
        quant: Its scale and zero point.
    """

    name: str
    codes: np.ndarray
    dequantized: np.ndarray
    quant: QuantParams


def dequantize(array: np.ndarray, quant: QuantParams) -> np.ndarray:
    """The real values of `array`: scale * (array - zero point) in float64, per tensor or axis."""
    scale = np.asarray(quant.scale, np.float64)
    zero = np.asarray(quant.zero_point, np.float64)
    array = np.asarray(array)
    if scale.size > 1 and quant.axis is not None:
        shape = [1] * array.ndim
        shape[quant.axis] = scale.size
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    else:
        scale, zero = scale.reshape(-1)[0], zero.reshape(-1)[0]
    return (array.astype(np.float64) - zero) * scale


def quantized_names(graph: Graph, quantized: Graph) -> dict[int, str]:
    """QuantizeLinear node id of the QDQ graph -> the name of the value of `graph` it quantizes.

    The QDQ graph keeps the float graph's node ids; it may rename a model output (the float
    result gets a suffix, the output name goes to the final DequantizeLinear), so the float
    value is found through its producer's id, not its name.
    """
    ids = {n.id: n for n in graph.nodes}
    inputs = {v.name for v in graph.inputs}
    names: dict[int, str] = {}
    for node in quantized.nodes:
        if node.op != "QuantizeLinear" or not node.inputs or node.inputs[0] is None:
            continue
        source = node.inputs[0]
        if source.producer is None:
            if source.name in inputs:
                names[node.id] = source.name
            continue
        float_node = ids.get(source.producer.id)
        if float_node is not None and source.index < len(float_node.outputs) and \
                float_node.op == source.producer.op:
            names[node.id] = float_node.outputs[source.index].name
    return names


def pair_int8(graph: Graph, quantized: Graph, integer: Graph, int_values: dict[str, np.ndarray],
              layouts: dict[str, str]) -> dict[str, Int8Value]:
    """Float value name -> its int8 counterpart among `int_values` (the integer graph's run).

    `layouts` are the float graph's derived layouts. The first integer value (in the integer
    graph's order) that fits a float value's shape wins: the operator's result, before any
    layout Transpose or Reshape made from the same QuantizeLinear.
    """
    q_names = quantized_names(graph, quantized)
    int_layouts = derived_layouts(integer)
    pairs: dict[str, Int8Value] = {}
    for node in integer.nodes:
        targets = sorted({q_names[i] for i in node.provenance if i in q_names} - set(pairs))
        for value in node.outputs:
            quant = value.type.quant
            if quant is None or value.type.dtype not in ("int8", "uint8") or \
                    value.name not in int_values:
                continue
            for name in targets:
                if name in pairs:
                    continue
                fitted = _arrange(int_values[value.name], quant, int_layouts.get(value.name, ""),
                                  graph.value(name), layouts.get(name, ""))
                if fitted is not None:
                    pairs[name] = Int8Value(value.name, fitted[0], fitted[1], quant)
    return pairs


def _arrange(codes: np.ndarray, quant: QuantParams, layout: str, target: Value,
             target_layout: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(codes, dequantized) laid out as `target`, or None when they cannot stand for it."""
    real = dequantize(codes, quant)  # before any transpose: the quantization axis is codes'
    codes, real = to_layout(codes, layout, target_layout), to_layout(real, layout, target_layout)
    shape = target.type.shape
    if tuple(codes.shape) == shape:
        return codes, real
    squeezed = tuple(d for d in shape if d != 1)
    if tuple(d for d in codes.shape if d != 1) == squeezed:
        return codes.reshape(shape), real.reshape(shape)
    return None
