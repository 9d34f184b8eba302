"""The kernel table: (operator, element type) -> emitter and weight preparer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.codegen.elementwise import SCALAR_OPS, emit_elementwise, emit_softmax
from compiler.codegen.kernels import (
    Kernel,
    avg_divisors,
    conv_weights,
    emit_concat,
    emit_conv,
    emit_fully_connected,
    emit_pool,
    emit_transpose,
)
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node

# (operator, element type) -> (emitter, weight preparer). The preparer turns the node's
# constant inputs into the arrays the kernel reads, by input slot; slots it adds beyond the
# node's inputs hold compile-time tables.
Prepare = Callable[[Node], dict[int, np.ndarray]]


def _constants(node: Node) -> dict[int, np.ndarray]:
    return {i: v.data for i, v in enumerate(node.inputs) if isinstance(v, Constant)}


EMITTERS: dict[tuple[str, str], tuple[Callable[[Kernel], None], Prepare]] = {
    ("FullyConnected", "float32"): (emit_fully_connected, _constants),
    ("Conv", "float32"): (emit_conv, lambda n: {**_constants(n), 1: conv_weights(n)}),
    ("MaxPool", "float32"): (emit_pool, _constants),
    ("AveragePool", "float32"): (emit_pool, lambda n: {1: avg_divisors(n)}),
    ("Transpose", "float32"): (emit_transpose, _constants),
    ("Concat", "float32"): (emit_concat, _constants),
    ("FusedElementwise", "float32"): (emit_elementwise, _constants),
    ("Softmax", "float32"): (emit_softmax, _constants),
    **{(op, "float32"): (emit_elementwise, _constants) for op in SCALAR_OPS},
}


def lookup(node: Node) -> tuple[Callable[[Kernel], None], Prepare]:
    """The emitter of `node`, or a KilnError naming the operator and element type."""
    dtype = node.output.type.dtype
    try:
        return EMITTERS[(node.op, dtype)]
    except KeyError:
        raise KilnError(f"cannot generate {node.op} for {dtype} (node {node.name})") from None
