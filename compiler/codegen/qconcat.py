"""QLinearConcat: 8-bit inputs joined on an axis, each requantized by a table if it must be.

An input whose scale and zero point equal the output's is copied; any other goes through the
256-entry table the reference builds (onnxruntime's float32 dequantize-quantize, rounded half
to even), prepared at compile time and stored after the node's inputs, one per such input.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from compiler.codegen.kernel import I32, Kernel, strides
from compiler.errors import KilnError
from compiler.ir.graph import Constant, Node
from compiler.qmath.tables import onnx_table


def _first(value) -> np.ndarray:
    return np.asarray(value.data).reshape(-1)[0]


def _tables(node: Node) -> list[np.ndarray | None]:
    """Per input triple, its requantization table, or None when it is copied as it is."""
    if not all(isinstance(v, Constant) for i, v in enumerate(node.inputs) if i % 3 != 2):
        raise KilnError(f"cannot generate {node.op} {node.name}: its scales and zero points "
                        "must be constants")
    ys, yz = np.float32(_first(node.inputs[0])), int(_first(node.inputs[1]))
    tables = []
    for i in range(2, len(node.inputs), 3):
        x, xs, xz = node.inputs[i:i + 3]
        xs, xz = np.float32(_first(xs)), int(_first(xz))
        same = xs == ys and xz == yz
        tables.append(None if same else np.asarray(
            onnx_table(lambda v: v, x.type.dtype, xs, xz, ys, yz)).astype(x.type.dtype))
    return tables


def qconcat_tables(node: Node) -> dict[int, np.ndarray]:
    """The tables of the inputs that are requantized, in the slots after the node's inputs."""
    return {len(node.inputs) + k: table for k, table in enumerate(_tables(node))
            if table is not None}


def emit_qconcat(k: Kernel) -> None:
    """Each input into its slice of the output, through its table where it has one."""
    node, b = k.node, k.b
    out = node.output.type.shape
    axis = int(node.attrs["axis"]) % len(out)
    out_strides = strides(out)
    start = 0
    for j, table in enumerate(_tables(node)):
        shape = node.inputs[2 + 3 * j].type.shape
        with ExitStack() as stack:
            idx = [stack.enter_context(k.loop(n)) for n in shape]
            x = k.load(k.args[2 + 3 * j], k.index(*zip(idx, strides(shape))))
            if table is not None:
                x = k.load(k.args[len(node.inputs) + j], b.zext(x, I32))
            k.store(x, k.outs[0], k.index(*zip(idx, out_strides),
                                          base=start * out_strides[axis]))
        start += shape[axis]
