"""What changed between two matched layers: operator, attributes, types, quantization, weights.

A layer is compared as its unit (`match.Units`): the types and quantization of a QDQ-wrapped
layer are those of the QuantizeLinear after it, its weights those its DequantizeLinear inputs
read, so a float layer and its integer form compare like for like.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.graphdiff.match import Units
from compiler.ir.graph import Constant, Node, Value
from compiler.ir.types import QuantParams, TensorType


@dataclass(frozen=True)
class Change:
    """One difference of a pair: `what` ("op", "attribute", "type", "quantization", "weights")."""

    what: str
    name: str  # the attribute, output index or weight input it concerns ("" for the op)
    before: str
    after: str

    def to_json(self) -> dict:
        """{"what", "name", "before", "after"}."""
        return {"what": self.what, "name": self.name, "before": self.before, "after": self.after}

    def __str__(self) -> str:
        label = f"{self.what} {self.name}".strip()
        return f"{label}: {self.before} → {self.after}"


def unit_outputs(units: Units, anchor: int) -> list[TensorType]:
    """Types of a layer's outputs, each as its QuantizeLinear makes it when one is in the unit."""
    node = units.nodes[anchor]
    members = [units.nodes[m] for m in units.members[anchor]]
    quantized = {id(m.inputs[0]): _quantized_type(m) for m in members
                 if m.op == "QuantizeLinear" and m.inputs and m.inputs[0] is not None}
    return [quantized.get(id(v), v.type) for v in node.outputs]


def _quantized_type(q: Node) -> TensorType:
    """A QuantizeLinear's output type, with the scale and zero point its inputs hold."""
    out = q.output.type
    scale = q.inputs[1] if len(q.inputs) > 1 else None
    if out.quant is not None or not isinstance(scale, Constant):
        return out
    zero = q.inputs[2] if len(q.inputs) > 2 and isinstance(q.inputs[2], Constant) else None
    params = QuantParams.from_arrays(scale.data, None if zero is None else zero.data,
                                     q.attrs.get("axis"))
    return TensorType(out.shape, out.dtype, params)


def unit_weights(units: Units, anchor: int) -> list[Constant | None]:
    """The constant each input of the layer reads (through a DequantizeLinear of the unit)."""
    inside = {id(units.nodes[m].output): units.nodes[m] for m in units.members[anchor]
              if units.nodes[m].op == "DequantizeLinear"}
    out: list[Constant | None] = []
    for value in units.nodes[anchor].inputs:
        dq = inside.get(id(value)) if value is not None else None
        if dq is not None:
            value = dq.inputs[0]
        out.append(value if isinstance(value, Constant) else None)
    return out


def weight_bytes(units: Units, anchor: int) -> int:
    """Bytes of the distinct constants a layer's nodes read (as stored: int8 weights at 1 B)."""
    seen: dict[int, Value] = {}
    for m in units.members[anchor]:
        node = units.nodes[m]
        if node.op == "DequantizeLinear" and m != anchor:
            reads = node.inputs[:1]  # its scale and zero point are quantization, not weights
        elif node.op == "QuantizeLinear" and m != anchor:
            reads = []  # the layer's output quantized: a scale and a zero point, no weights
        else:
            reads = node.inputs
        for value in reads:
            if isinstance(value, Constant):
                seen[id(value)] = value
    return int(sum(v.data.nbytes for v in seen.values()))


def _same(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                and x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y))
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    return type(x) is type(y) and x == y or (
        isinstance(x, (int, float)) and isinstance(y, (int, float)) and x == y)


def _text(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, np.ndarray):
        shown = value.reshape(-1).tolist() if value.size <= 4 else ""
        return f"tensor {value.dtype.name}{list(value.shape)} {shown}".strip()
    if isinstance(value, tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _quant_text(t: TensorType) -> str:
    return str(t.quant) if t.quant is not None else "none"


def pair_changes(ua: Units, x: int, ub: Units, y: int) -> list[Change]:
    """The differences between layer `x` of A and layer `y` of B.

    When the operators differ (Conv and QLinearConv), only attributes both have are compared
    and weights are compared by their type, since their inputs do not line up.
    """
    a, b = ua.nodes[x], ub.nodes[y]
    changes: list[Change] = []
    if a.op != b.op:
        changes.append(Change("op", "", a.op, b.op))
    names = (sorted(set(a.attrs) | set(b.attrs)) if a.op == b.op
             else sorted(set(a.attrs) & set(b.attrs)))
    for name in names:
        p, q = a.attrs.get(name), b.attrs.get(name)
        if not _same(p, q):
            changes.append(Change("attribute", name, _text(p), _text(q)))
    for i, (p, q) in enumerate(zip(unit_outputs(ua, x), unit_outputs(ub, y))):
        label = _output_label(a, b, i)
        if (p.dtype, p.shape) != (q.dtype, q.shape):
            changes.append(Change("type", label, f"{p.dtype}{list(p.shape)}",
                                  f"{q.dtype}{list(q.shape)}"))
        if p.quant != q.quant:
            changes.append(Change("quantization", label, _quant_text(p), _quant_text(q)))
    changes += _weight_changes(ua, x, ub, y, a.op == b.op)
    return changes


def _output_label(a: Node, b: Node, i: int) -> str:
    return f"output {i}" if len(a.outputs) > 1 or len(b.outputs) > 1 else "output"


def _weight_changes(ua: Units, x: int, ub: Units, y: int, aligned: bool) -> list[Change]:
    wa, wb = unit_weights(ua, x), unit_weights(ub, y)
    if not aligned:
        p, q = _largest(wa), _largest(wb)
        if p is not None and q is not None and (p.type.dtype, p.type.shape) != (
                q.type.dtype, q.type.shape):
            return [Change("weights", "", _weight_text(p), _weight_text(q))]
        return []
    changes = []
    for i, (p, q) in enumerate(zip(wa, wb)):
        if p is None or q is None:
            if (p is None) != (q is None):
                changes.append(Change("weights", f"input {i}", _weight_text(p), _weight_text(q)))
            continue
        if (p.type.dtype, p.type.shape) != (q.type.dtype, q.type.shape):
            changes.append(Change("weights", f"input {i}", _weight_text(p), _weight_text(q)))
        elif p.type.quant != q.type.quant:
            changes.append(Change("quantization", f"input {i}", _quant_text(p.type),
                                  _quant_text(q.type)))
        elif p.data is not q.data and not np.array_equal(p.data, q.data):
            differ = int(np.count_nonzero(p.data != q.data))
            changes.append(Change("weights", f"input {i}", "values",
                                  f"{differ:,} of {p.data.size:,} elements differ"))
    return changes


def _largest(weights: list[Constant | None]) -> Constant | None:
    known = [w for w in weights if w is not None]
    return max(known, key=lambda w: w.data.size) if known else None


def _weight_text(value: Constant | None) -> str:
    return "none" if value is None else f"{value.type.dtype}{list(value.type.shape)}"
