"""Fully connected layers: y = act(x W^T + b), output channels in vector registers.

The weights are stored transposed, [K, N], so one input value times one contiguous row of
weights updates many outputs at once: on a vector target the outputs are taken in blocks of
`unroll` vectors whose accumulators stay in registers over the whole reduction (one broadcast
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
from compiler.ir.graph import Constant, Node


def unroll(target) -> int:
    """Vectors of outputs per block: independent accumulators hide the FMA latency.

    Eight on hosts (sixteen or more registers): with four, AVX2's FMAs wait on their latency
    (the AD autoencoder at x86-64-v3: 16 % slower); four on microcontrollers, whose vector
    registers (Helium's eight) would spill.
    """
    return 8 if target is not None and not target.mcu and target.registers >= 16 else 4


def fc_weights(node: Node) -> np.ndarray:
    """[N, K] weights as [K, N]: the row of x[k]'s weights over all outputs is contiguous."""
    return np.ascontiguousarray(node.inputs[1].data.T)


def _block(node: Node, target) -> int:
    """Outputs per vector block on `target` (0 without vectors)."""
    lanes = target.vector_bits // 32 if target is not None else 0
    return lanes * unroll(target) if lanes > 1 and node.output.type.dtype == "float32" else 0


def blocked_eligible(node: Node, target) -> bool:
    """Whether a host's outputs split into whole vector blocks, so weights are stored by block.

    Microcontrollers keep the [K, N] layout their instruction counts were measured with.
    """
    block = _block(node, target)
    return bool(block) and not target.mcu and node.output.type.shape[-1] % block == 0


def fc_blocked_weights(node: Node, target=None) -> dict[int, np.ndarray]:
    """The weights as [N / B, K, B] for blocks of B outputs, and the other constants.

    A block reads its K x B weights front to back: one stream, where the [K, N] layout has it
    jump a row of N at every step of K (the AD autoencoder's 1 MB of weights, read once per
    inference, is bound by that stream).
    """
    block = _block(node, target)
    w = np.asarray(node.inputs[1].data)  # [N, K]
    outs, depth = w.shape
    arranged = w.reshape(outs // block, block, depth).transpose(0, 2, 1)
    constants = {i: v.data for i, v in enumerate(node.inputs) if isinstance(v, Constant)}
    return {**constants, 1: np.ascontiguousarray(arranged)}


def emit_fully_connected(k: Kernel) -> None:
    """y[m, n] = act(b[n] + sum_k x[m, k] * w[k, n]) with w already transposed to [K, N]."""
    x = k.node.inputs[0].type
    rows, depth, outs = x.numel // x.shape[-1], x.shape[-1], k.node.output.type.shape[-1]
    lanes = (k.target.vector_bits // 32) if k.target is not None else 0
    block = lanes * unroll(k.target) if lanes > 1 else 0
    blocks = outs // block if block else 0
    with k.loop(rows) as m:
        if blocks:
            with k.loop(blocks) as nb:
                _vector_block(k, m, k.index((nb, block)), depth, outs, lanes)
        _scalar_outputs(k, m, blocks * block, depth, outs)


def _vector_block(k: Kernel, m, n0, depth: int, outs: int, lanes: int) -> None:
    """Outputs n0 .. n0 + unroll * lanes of row m, accumulated in registers."""
    b = k.b
    ty = llvm_type(k.node.output.type.dtype)
    vec = ir.VectorType(ty, lanes)
    has_bias = len(k.node.inputs) > 2 and k.node.inputs[2] is not None
    slots = [k.alloca(vec) for _ in range(unroll(k.target))]
    for u, slot in enumerate(slots):
        nu = b.add(n0, I32(u * lanes))
        init = b.load(vector_ptr(k, k.args[2], nu, vec), align=4) if has_bias else \
            ir.Constant(vec, [0.0] * lanes)
        b.store(init, slot)
    blocked = blocked_eligible(k.node, k.target)
    block = lanes * len(slots)
    with k.loop(depth) as d:
        xs = splat(k, k.load(k.args[0], k.index((m, depth), (d, 1))), vec)
        if blocked:  # [N / B, K, B]: block n0 / B, row d
            row = b.add(b.mul(n0, I32(depth)), k.index((d, block)))
        else:
            row = b.add(k.index((d, outs)), n0)
        for u, slot in enumerate(slots):
            w = b.load(vector_ptr(k, k.args[1], b.add(row, I32(u * lanes)), vec), align=4)
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
