"""QLinearMatMul with B computed at run time: integer sums requantized by the onnx rule.

The tuned integer kernels arrange B at compile time; this one reads both operands as they are,
broadcasting their batch axes numpy's way: sum (a - za)(b - zb) in int32, then
float32(acc) * (a_scale b_scale / y_scale), rounded half to even, plus y's zero point,
saturated (MlasRequantizeOutput, compiler/codegen/requant.onnx). Per-tensor parameters only.
"""

from __future__ import annotations

from contextlib import ExitStack

from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import I32, Kernel, strides
from compiler.errors import KilnError
from compiler.ir.graph import Constant
from compiler.ops.qlinear import requant_rule
from compiler.qmath.requant import RANGES, onnx_scale


def runtime_b(node) -> bool:
    """A QLinearMatMul (onnx rule) whose B is computed at run time."""
    return (node.op == "QLinearMatMul" and not isinstance(node.inputs[3], Constant)
            and requant_rule(node) == "onnx")


def _scalar(node, slot: int, what: str):
    value = node.inputs[slot]
    if not isinstance(value, Constant) or value.data.size != 1:
        raise KilnError(f"cannot generate {node.op} {node.name}: its {what} must be one "
                        "constant")
    return value.data.reshape(-1)[0]


def emit_qlinear_matmul_general(k: Kernel) -> None:
    """Y = requantize(A B) over the broadcast batch."""
    node, b = k.node, k.b
    a_shape, b_shape = list(node.inputs[0].type.shape), list(node.inputs[3].type.shape)
    out = list(node.output.type.shape)
    # ONNX's MatMul: a 1-D A is one row and a 1-D B one column, each axis dropped from the
    # output; put them back (size 1, so every flat index stays the same).
    if len(b_shape) == 1:
        b_shape, out = [b_shape[0], 1], [*out, 1]
    if len(a_shape) == 1:
        a_shape, out = [1, a_shape[0]], [*out[:-1], 1, out[-1]]
    rows, depth, cols = a_shape[-2], a_shape[-1], b_shape[-1]
    scale = ir.Constant(ir.FloatType(), float(onnx_scale(
        _scalar(node, 1, "A scale"), _scalar(node, 4, "B scale"),
        _scalar(node, 6, "output scale")).reshape(-1)[0]))
    za, zb = int(_scalar(node, 2, "A zero point")), int(_scalar(node, 5, "B zero point"))
    zy = int(_scalar(node, 7, "output zero point"))
    low, high = RANGES[node.output.type.dtype]
    batch = out[:-2]
    a_steps = broadcast_strides(a_shape[:-2], batch) if batch else []
    b_steps = broadcast_strides(b_shape[:-2], batch) if batch else []
    total = k.alloca(I32)

    def widen(value, dtype):
        return b.zext(value, I32) if dtype == "uint8" else b.sext(value, I32)

    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in batch]
        m = stack.enter_context(k.loop(rows))
        n = stack.enter_context(k.loop(cols))
        b.store(I32(0), total)
        with k.loop(depth) as d:
            a_at = k.index(*zip(idx, [s * rows * depth for s in a_steps]), (m, depth), (d, 1))
            b_at = k.index(*zip(idx, [s * depth * cols for s in b_steps]), (d, cols), (n, 1))
            x = b.sub(widen(k.load(k.args[0], a_at), node.inputs[0].type.dtype), I32(za))
            y = b.sub(widen(k.load(k.args[3], b_at), node.inputs[3].type.dtype), I32(zb))
            b.store(b.add(b.load(total), b.mul(x, y)), total)
        value = requant.onnx(k, b.load(total), scale, zy, low, high)
        out_steps = strides(out)
        at = k.index(*zip([*idx, m, n], out_steps))
        k.store(b.trunc(value, ir.IntType(8)), k.outs[0], at)
