"""Gemm in general: alpha * A' B' + beta * C, either operand transposed, C broadcast.

The passes turn a Gemm with constant weights into FullyConnected; this kernel takes the rest
(weights computed at run time, alpha, beta, a transposed A, a C broadcast from a row, a column
or a scalar). Integer Gemm (int32, int64) accumulates in its own type, wrapping as numpy does.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import Kernel, llvm_type


def emit_gemm(k: Kernel) -> None:
    """Y[m, n] = alpha * sum_k A'[m, k] B'[k, n] + beta * C[m, n]."""
    node, b = k.node, k.b
    a_shape, b_shape = node.inputs[0].type.shape, node.inputs[1].type.shape
    trans_a, trans_b = node.attrs["transA"], node.attrs["transB"]
    rows, depth = (a_shape[1], a_shape[0]) if trans_a else a_shape
    cols = b_shape[0] if trans_b else b_shape[1]
    ty = llvm_type(node.output.type.dtype)
    is_float = isinstance(ty, ir.FloatType)
    alpha, beta = node.attrs["alpha"], node.attrs["beta"]
    c = k.args[2] if len(node.inputs) > 2 and node.inputs[2] is not None and beta != 0 else None
    c_steps = broadcast_strides(node.inputs[2].type.shape, (rows, cols)) if c is not None else None
    total = k.alloca(ty)

    def mul(x, y):
        return b.fmul(x, y) if is_float else b.mul(x, y)

    def add(x, y):
        return b.fadd(x, y) if is_float else b.add(x, y)

    def const(value):
        return ir.Constant(ty, float(value) if is_float else int(value))

    with k.loop(rows) as m, k.loop(cols) as n:
        b.store(const(0), total)
        with k.loop(depth) as d:
            x = k.load(k.args[0], k.index((d, rows), (m, 1)) if trans_a
                       else k.index((m, depth), (d, 1)))
            y = k.load(k.args[1], k.index((n, depth), (d, 1)) if trans_b
                       else k.index((d, cols), (n, 1)))
            b.store(add(b.load(total), mul(x, y)), total)
        value = b.load(total)
        if alpha != 1.0:
            value = mul(value, const(alpha))
        if c is not None:
            term = k.load(c, k.index(*zip((m, n), c_steps)))
            value = add(value, mul(const(beta), term) if beta != 1.0 else term)
        k.store(value, k.outs[0], k.index((m, cols), (n, 1)))
