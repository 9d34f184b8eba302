"""The operator registry: everything Kiln knows about an operator, in one definition.

An `OpDef` holds the attribute schema, shape/type inference, a numpy reference implementation
(the oracle every later stage is checked against), the MAC count, and the hooks that translate
between the ONNX encodings of past opsets and Kiln's canonical form (the newest ONNX semantics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.errors import ShapeError
from compiler.ir.graph import Node
from compiler.ir.types import TensorType

REQUIRED = object()  # marks an attribute without a default

# Attribute kinds, as ONNX spells them. List-valued attributes are stored as tuples so that
# node attributes can be shared between snapshots without defensive copies.
ATTR_KINDS = ("int", "float", "string", "tensor", "ints", "floats", "strings")

# Categories group operators for the GUI's colours and the docs.
CATEGORIES = ("conv", "matmul", "pool", "norm", "activation", "elementwise", "reduce", "shape",
              "quant", "constant", "misc")

LAYOUTS = ("NCHW", "NHWC")


@dataclass(frozen=True)
class Attr:
    """One attribute of an operator's schema."""

    kind: str
    default: Any = REQUIRED
    doc: str = ""
    onnx: bool = True  # False for Kiln's own attributes, which a model file may not set

    def __post_init__(self):
        assert self.kind in ATTR_KINDS, self.kind


# Signatures of the per-operator functions (see OpDef).
InferFn = Callable[[Node, list[TensorType | None], list[np.ndarray | None]], list[TensorType]]
ReferenceFn = Callable[..., Any]
MacsFn = Callable[[Node], int]


@dataclass
class OpDef:
    """Everything about one operator.

    Attributes:
        name: The operator type, as in ONNX (`Conv`, `Relu`, ...).
        category: One of CATEGORIES.
        infer: `infer(node, input_types, input_values) -> output types`. `input_values[i]` is the
            array when input i is known at compile time (a constant, or computed from constants
            and static shapes), else None; Reshape's shape input, for example, needs it.
        reference: `reference(node, *arrays) -> array or tuple of arrays`: the numpy oracle.
            Omitted optional inputs arrive as None.
        attrs: Attribute schema. Loaded nodes hold every attribute, defaults filled in.
        inputs: (min, max) input count; max -1 means variadic.
        outputs: (min, max) output count.
        macs: Multiply-accumulates of one node (default 0), from its input and output types.
        spatial: True for operators with a `layout` attribute (NCHW as loaded, NHWC later).
        since: Oldest ONNX opset version of the operator that Kiln can read.
        from_onnx: Optional hook turning an older ONNX encoding into the canonical one.
        to_onnx: Optional hook turning the canonical form into the encoding of a target opset.
        value_from_types: Optional: the output values computable from input types alone (Shape).
        doc: One line for docs/operators.md.
        onnx: False for Kiln's own operators (produced by passes), which a model file may not
            contain.
        domain: The ONNX domain a model file writes it in ("" for the default domain,
            "com.microsoft" for onnxruntime's contrib operators).
    """

    name: str
    category: str
    infer: InferFn
    reference: ReferenceFn
    attrs: dict[str, Attr] = field(default_factory=dict)
    inputs: tuple[int, int] = (1, 1)
    outputs: tuple[int, int] = (1, 1)
    macs: MacsFn | None = None
    spatial: bool = False
    since: int = 1
    from_onnx: Callable | None = None
    to_onnx: Callable | None = None
    value_from_types: Callable | None = None
    doc: str = ""
    onnx: bool = True
    domain: str = ""

    def __post_init__(self):
        assert self.category in CATEGORIES, (self.name, self.category)
        if self.spatial and "layout" not in self.attrs:
            self.attrs = {**self.attrs, "layout": Attr("string", "NCHW",
                                                        "Kiln only: NCHW as loaded, NHWC after the"
                                                        " layout pass", onnx=False)}

    def count_macs(self, node: Node) -> int:
        """MACs of `node` (0 for operators without arithmetic worth counting)."""
        return int(self.macs(node)) if self.macs else 0

    def run(self, node: Node, arrays: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        """Run the reference implementation, normalizing its result to a list of arrays.

        Outputs without elements need no arithmetic, so the implementations never see that case.
        """
        if node.outputs and all(v.type.numel == 0 for v in node.outputs):
            return [np.zeros(v.type.shape, v.type.dtype) for v in node.outputs]
        result = self.reference(node, *arrays)
        if not isinstance(result, (tuple, list)):
            result = [result]
        return [np.asarray(r) for r in result]


_REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    """Add an operator to the registry (once per name)."""
    if opdef.name in _REGISTRY:
        raise ValueError(f"operator {opdef.name} registered twice")
    _REGISTRY[opdef.name] = opdef
    return opdef


def get(name: str) -> OpDef | None:
    """The definition of `name`, or None when Kiln does not support it."""
    return _REGISTRY.get(name)


def lookup(name: str) -> OpDef:
    """The definition of `name`; KeyError when unsupported."""
    return _REGISTRY[name]


def all_ops() -> list[OpDef]:
    """Every registered operator, sorted by name."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def fail(reason: str) -> None:
    """Raise the error that inference uses to reject a node's inputs or attributes."""
    raise ShapeError(reason)
