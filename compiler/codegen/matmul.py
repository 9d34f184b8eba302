"""MatMul that the pipeline could not turn into FullyConnected (both operands computed)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import FAST, Kernel, llvm_type


def _batch_strides(shape: tuple[int, ...], batch: tuple[int, ...], matrix: int) -> list[int]:
    """Element strides of the batch axes of an operand seen as `batch` (0 where broadcast)."""
    lead = (1,) * (len(batch) - len(shape)) + tuple(shape)
    strides, step = [], matrix
    for d in reversed(lead):
        strides.append(step if d != 1 else 0)
        step *= d
    return list(reversed(strides))


def emit_matmul(k: Kernel) -> None:
    """numpy.matmul semantics (1-D promotion, broadcast batch axes), in m, k, n loop order.

    Each output row starts at zero and takes a[m, d] * b[d, :] per d: the innermost loop runs
    along contiguous rows of b and y and vectorizes without reassociating a reduction.
    """
    node = k.node
    a_shape, b_shape = node.inputs[0].type.shape, node.inputs[1].type.shape
    a2 = (1, *a_shape) if len(a_shape) == 1 else tuple(a_shape)
    b2 = (*b_shape, 1) if len(b_shape) == 1 else tuple(b_shape)
    rows, depth, cols = a2[-2], a2[-1], b2[-1]
    batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    ty = llvm_type(node.output.type.dtype)
    a_strides = _batch_strides(a2[:-2], batch, rows * depth)
    b_strides = _batch_strides(b2[:-2], batch, depth * cols)
    b = k.b
    out_batch = int(np.prod(batch, dtype=np.int64))
    with k.loop(out_batch) as flat:
        # Split the flat batch index into per-axis indices (constant divisors).
        idx, rest = [], flat
        for d in reversed(batch):
            idx.append(b.urem(rest, ir.Constant(rest.type, d)))
            rest = b.udiv(rest, ir.Constant(rest.type, d))
        idx.reverse()
        a_base = k.index(*zip(idx, a_strides))
        b_base = k.index(*zip(idx, b_strides))
        with k.loop(rows) as m:
            y_row = k.index((flat, rows * cols), (m, cols))
            with k.loop(cols) as n:
                k.store(ir.Constant(ty, 0.0), k.outs[0], b.add(y_row, n))
            with k.loop(depth) as d:
                x = k.load(k.args[0], b.add(a_base, k.index((m, depth), (d, 1))))
                with k.loop(cols) as n:
                    yi = b.add(y_row, n)
                    w = k.load(k.args[1], b.add(b_base, k.index((d, cols), (n, 1))))
                    k.store(b.fadd(k.load(k.outs[0], yi), b.fmul(x, w, flags=FAST),
                                   flags=FAST), k.outs[0], yi)
