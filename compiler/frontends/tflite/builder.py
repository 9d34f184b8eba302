"""The loader's workbench: tensors of the flatbuffer become Kiln values, nodes are typed at once.

Constants are made on first use (weights converted to Kiln's layouts by the builtins), every node
is inferred as it is added, and the result of each builtin must have the shape the file states
for its output tensor, so a converter mistake or a lying file is caught at the operator.
"""

from __future__ import annotations

import numpy as np

from compiler import ops
from compiler.errors import KilnError, ModelError
from compiler.frontends.tflite.flatbuffer import Model, Operator, Tensor
from compiler.ir.graph import Graph, Value
from compiler.ir.types import QuantParams, TensorType
from compiler.ops.infer import infer_node

_PENDING = TensorType((), "float32")


def tensor_type(t: Tensor) -> TensorType:
    """The Kiln type of a tensor, with its quantization."""
    quant = None
    if t.quantized and t.dtype in ("int8", "uint8"):
        quant = QuantParams.from_arrays(t.scale, t.zero_point, t.axis)
    return TensorType(t.shape, t.dtype, quant)


class Builder:
    """Builds the graph of one model, operator by operator."""

    def __init__(self, model: Model, graph: Graph):
        self.model = model
        self.graph = graph
        self.values: dict[int, Value] = {}
        self.known: dict[int, np.ndarray] = {}
        self.op: Operator | None = None  # the operator being converted
        # Node id -> the TFLite operator it comes from (shown on the canvas and in Properties).
        self.sources: dict[str, dict] = {}
        # Resource variables (frontends/tflite/variables.py): by name, and handle tensor -> name.
        self.variables: dict[str, object] = {}
        self.handles: dict[int, str] = {}
        # (builder, operator) -> None: converts one operator (set by the loader; subgraphs that
        # IF and WHILE inline convert theirs through it too).
        self.convert = None

    def tensor(self, index: int) -> Tensor:
        """The record of tensor `index` (an omitted input is an error of the caller's op)."""
        if index < 0:
            raise ModelError("a required input is omitted (-1)")
        return self.model.tensors[index]

    def value(self, index: int) -> Value:
        """Tensor `index` as a value: an activation already produced, or its constant data."""
        if index in self.values:
            return self.values[index]
        t = self.tensor(index)
        if t.data is None:
            raise ModelError(f"input tensor {index} ({t.name}) is neither a graph input, a "
                             "constant nor the output of an earlier operator")
        return self.constant(t.name, t.data)

    def constant(self, hint: str, array: np.ndarray) -> Value:
        """A new constant holding `array`."""
        value = self.graph.add_constant(hint, np.require(array, requirements="C"))  # keeps 0-d
        self.known[id(value)] = value.data
        return value

    def scale_and_zero_point(self, t: Tensor, dtype: str | None = None) -> tuple[Value, Value]:
        """Constants of a per-tensor quantization (the first element of each array)."""
        if not t.quantized:
            raise ModelError(f"tensor {t.index} ({t.name}) is {t.dtype} without quantization "
                             "parameters")
        zp = np.array(int(t.zero_point[0]), dtype or t.dtype)
        return (self.constant(f"{t.name}_scale", np.array(t.scale[0], np.float32)),
                self.constant(f"{t.name}_zero_point", zp))

    def add(self, op: str, inputs: list[Value | None], attrs: dict | None = None, *,
            out: int | None = None) -> Value:
        """A node of `op`; with `out` its result is that tensor, whose shape must match."""
        out_name = None if out is None else self.model.tensors[out].name
        node, types, values = self._node(op, inputs, attrs, 1, out_name)
        if values and values[0] is not None:
            self.known[id(node.outputs[0])] = values[0]
        if out is not None:
            want = self.model.tensors[out].shape
            if tuple(types[0].shape) != tuple(want):
                raise ModelError(f"its output {self.model.tensors[out].name} is stated as "
                                 f"{list(want)} but the operator gives {list(types[0].shape)}")
            self.values[out] = node.outputs[0]
        return node.outputs[0]

    def add_many(self, op: str, inputs: list[Value | None], attrs: dict | None,
                 count: int) -> list[Value]:
        """A node of `op` with `count` results (intermediate values, not file tensors)."""
        node, _, _ = self._node(op, inputs, attrs, count, None)
        return list(node.outputs)

    def _node(self, op: str, inputs, attrs, count: int, out_name: str | None):
        """Add and type a node of `op` with `count` outputs, recording its TFLite source."""
        opdef = ops.lookup(op)
        full = {k: a.default for k, a in opdef.attrs.items() if a.default is not ops.REQUIRED}
        full.update({k: tuple(v) if isinstance(v, list) else v for k, v in (attrs or {}).items()})
        name = self.graph.unique_node_name(f"{self.op.builtin}_{self.op.index}" if self.op
                                           else op)
        node = self.graph.add_node(op, inputs, [_PENDING] * count, full, name=name,
                                   output_names=None if out_name is None
                                   else [self.graph.unique_name(out_name)])
        try:
            types, values = infer_node(node, self.known)
        except ModelError:
            raise
        except KilnError as exc:  # a shape or type the operator refuses
            raise ModelError(str(exc)) from None
        for value, t in zip(node.outputs, types):
            value.type = t
        if self.op is not None:
            self.sources[str(node.id)] = {"op": self.op.label,
                                          "options": self.op.option_values()}
        return node, types, values
