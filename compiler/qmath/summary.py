"""Which tensors of a graph are quantized, and how: what `kiln inspect` reports.

A tensor is quantized when its type says so (the output of a QuantizeLinear or of an integer
operator), when a DequantizeLinear with constant parameters reads it (a QDQ model's int8
weights and activations), or when it is the constant weights of an integer operator (a
TFLite model's): then those parameters are its quantization.
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
        if node.op in _WEIGHTS:
            _weights(node, found)
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


# Integer operators whose weights, scale and zero point are inputs 3, 4 and 5.
_WEIGHTS = ("QLinearConv", "QLinearMatMul", "QGemm")


def _weights(node, found: dict[str, QuantParams]) -> None:
    """The quantization of an integer operator's constant weights, from its inputs."""
    w, scale, zp = node.inputs[3:6]
    if not all(isinstance(v, Constant) for v in (w, scale)) or w.type.rank == 0:
        return
    if node.op == "QLinearConv" or (node.op == "QGemm" and node.attrs.get("transB")):
        axis = 0
    else:
        axis = w.type.rank - 1
    zero = None if not isinstance(zp, Constant) else zp.data
    found.setdefault(w.name, QuantParams.from_arrays(scale.data, zero, axis))


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
