"""Which tensors of a graph are quantized, and how: what `kiln inspect` reports.

A tensor is quantized when its type says so (the output of a QuantizeLinear or of an integer
operator), or when a DequantizeLinear with constant parameters reads it (a QDQ model's int8
weights and activations): then those parameters are its quantization.
"""

from __future__ import annotations

from collections import Counter

from compiler.ir.graph import Constant, Graph, Value
from compiler.ir.types import QuantParams


def quantization_of(graph: Graph) -> dict[str, QuantParams]:
    """Quantization parameters by value name, for every quantized value of `graph`."""
    found: dict[str, QuantParams] = {}
    for value in graph.values():
        if value.type.quant is not None:
            found[value.name] = value.type.quant
    for node in graph.nodes:
        if node.op != "DequantizeLinear" or node.inputs[0] is None:
            continue
        scale = node.inputs[1]
        zp = node.inputs[2] if len(node.inputs) > 2 else None
        if not isinstance(scale, Constant) or (zp is not None and not isinstance(zp, Constant)):
            continue
        if node.attrs.get("block_size"):
            continue
        axis = node.attrs.get("axis", 1) % max(node.inputs[0].type.rank, 1)
        found.setdefault(node.inputs[0].name, QuantParams.from_arrays(
            scale.data, None if zp is None else zp.data, axis))
    return found


def quant_json(quant: QuantParams) -> dict:
    """A quantization as `kiln inspect --json` writes it."""
    return {"scale": list(quant.scale), "zero_point": list(quant.zero_point),
            "axis": quant.axis}


def summary(graph: Graph) -> dict:
    """Element types of all tensors; counts of per-tensor and per-channel quantized ones."""
    values: list[Value] = list(graph.values())
    quantized = quantization_of(graph)
    per_channel = sum(1 for q in quantized.values() if len(q.scale) > 1)
    return {"dtypes": dict(Counter(v.type.dtype for v in values).most_common()),
            "quantized": {"per_tensor": len(quantized) - per_channel,
                          "per_channel": per_channel},
            "values": {name: quant_json(q) for name, q in quantized.items()}}
