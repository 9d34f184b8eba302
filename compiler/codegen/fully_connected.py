"""Fully connected layers: y = act(x W^T + b), output channels in vector registers.

The weights are stored transposed, [K, N], so one input value times one contiguous row of
weights updates many outputs at once: on a vector target the outputs are taken in blocks of
`UNROLL` vectors whose accumulators stay in registers over the whole reduction (one broadcast
of x[k] feeds every multiply-add of the block, and the weights stream once, in the order they
are stored). Without vectors, or for the last outputs of a block, the same order runs one
output at a time, accumulating in the output itself.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.kernel import (
    FAST,
    I32,
    Kernel,
    activate,
    add_residual,
    bias_or_zero,
    llvm_type,
    splat,
    vector_ptr,
)
from compiler.ir.graph import Node

UNROLL = 4  # vectors of outputs per block: independent accumulators hide the FMA latency


def fc_weights(node: Node) -> np.ndarray:
    """[N, K] weights as [K, N]: the row of x[k]'s weights over all outputs is contiguous."""
    return np.ascontiguousarray(node.inputs[1].data.T)


def emit_fully_connected(k: Kernel) -> None:
    """y[m, n] = act(b[n] + sum_k x[m, k] * w[k, n]) with w already transposed to [K, N]."""
    x = k.node.inputs[0].type
    rows, depth, outs = x.numel // x.shape[-1], x.shape[-1], k.node.output.type.shape[-1]
    lanes = (k.target.vector_bits // 32) if k.target is not None else 0
    block = lanes * UNROLL if lanes > 1 else 0
    blocks = outs // block if block else 0
    with k.loop(rows) as m:
        if blocks:
            with k.loop(blocks) as nb:
                _vector_block(k, m, k.index((nb, block)), depth, outs, lanes)
        _scalar_outputs(k, m, blocks * block, depth, outs)


def _vector_block(k: Kernel, m, n0, depth: int, outs: int, lanes: int) -> None:
    """Outputs n0 .. n0 + UNROLL * lanes of row m, accumulated in registers."""
    b = k.b
    ty = llvm_type(k.node.output.type.dtype)
    vec = ir.VectorType(ty, lanes)
    has_bias = len(k.node.inputs) > 2 and k.node.inputs[2] is not None
    slots = [k.alloca(vec) for _ in range(UNROLL)]
    for u, slot in enumerate(slots):
        nu = b.add(n0, I32(u * lanes))
        init = b.load(vector_ptr(k, k.args[2], nu, vec), align=4) if has_bias else \
            ir.Constant(vec, [0.0] * lanes)
        b.store(init, slot)
    with k.loop(depth) as d:
        xs = splat(k, k.load(k.args[0], k.index((m, depth), (d, 1))), vec)
        row = k.index((d, outs))
        for u, slot in enumerate(slots):
            w = b.load(vector_ptr(k, k.args[1], b.add(row, b.add(n0, I32(u * lanes))), vec),
                       align=4)
            b.store(b.fadd(b.load(slot), b.fmul(xs, w, flags=FAST), flags=FAST), slot)
    for u, slot in enumerate(slots):
        yi = b.add(k.index((m, outs)), b.add(n0, I32(u * lanes)))
        y = b.load(slot)
        if k.residual is not None:
            y = b.fadd(y, b.load(vector_ptr(k, k.residual, yi, vec), align=4))
        b.store(activate(k, y), vector_ptr(k, k.outs[0], yi, vec), align=4)


def _scalar_outputs(k: Kernel, m, first: int, depth: int, outs: int) -> None:
    """Outputs first .. outs of row m, one at a time: y = bias (+ residual), then x[k] * w[k]."""
    count = outs - first
    if count <= 0:
        return
    b = k.b
    ty = llvm_type(k.node.output.type.dtype)
    with k.loop(count) as j:
        n = b.add(j, I32(first))
        yi = k.index((m, outs), (n, 1))
        k.store(add_residual(k, bias_or_zero(k, 2, n, ty), yi), k.outs[0], yi)
    with k.loop(depth) as d:
        xd = k.load(k.args[0], k.index((m, depth), (d, 1)))
        with k.loop(count) as j:
            n = b.add(j, I32(first))
            yi = k.index((m, outs), (n, 1))
            w = k.load(k.args[1], k.index((d, outs), (n, 1)))
            k.store(b.fadd(k.load(k.outs[0], yi), b.fmul(xd, w, flags=FAST), flags=FAST),
                    k.outs[0], yi)
    with k.loop(count) as j:
        yi = k.index((m, outs), (b.add(j, I32(first)), 1))
        k.store(activate(k, k.load(k.outs[0], yi)), k.outs[0], yi)
