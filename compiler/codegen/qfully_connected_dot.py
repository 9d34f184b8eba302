"""8-bit fully connected layers (QGemm) as dot products, for cores with int8 dot products.

Each output is the dot product of the input row with that output's weight row, both
contiguous, so `int8dot` does the sums (Helium VMLADAVA, or DSP SMLAD on prepared int16
pairs). The input zero point is folded into the bias at compile time (bias - x_zp * sum_k
w[n, k]), a block of outputs shares each input load, and the block is requantized as one
vector. Used for symmetric int8 weights and a depth that is a multiple of the core's step;
other layers take `qfully_connected`'s kernels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.int8dot import (
    BLOCK,
    DEPTH_STEP,
    WEIGHTS,
    dots,
    dsp_weights,
    requant_arrays,
    store_block,
)
from compiler.codegen.kernel import I32, Kernel, constant_input, first
from compiler.codegen.qfully_connected import weight_rows
from compiler.codegen.targets import Target
from compiler.ir.graph import Node

_BIAS = 9  # the folded bias, after QGemm's own inputs


def fc_dot_eligible(node: Node, target: Target | None) -> bool:
    """Whether this QGemm runs as dot products on `target`."""
    if target is None or target.int8_dot not in DEPTH_STEP or node.op != "QGemm":
        return False
    x, w = node.inputs[0].type, node.inputs[3].type
    if x.dtype != "int8" or w.dtype != "int8" or x.rank != 2:
        return False
    if node.inputs[5] is not None and np.asarray(node.inputs[5].data).any():
        return False
    return x.shape[1] % DEPTH_STEP[target.int8_dot] == 0


def qgemm_dot_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """Weight rows [N, K] (int16 pairs on DSP cores unless lean), the bias, the rule's data."""
    rows = weight_rows(node)
    outs = rows.shape[0]
    zx = int(first(node.inputs[2].data))
    bias = node.inputs[6].data if len(node.inputs) > 6 and node.inputs[6] is not None else 0
    folded = np.broadcast_to(np.asarray(bias, np.int64), (outs,)) - zx * rows.sum(axis=1)
    stored = np.ascontiguousarray(rows).astype(np.int8)
    stored = dsp_weights(stored, target)
    arrays = {WEIGHTS: stored, _BIAS: folded.astype(np.int32)}
    arrays.update(requant_arrays(
        node, np.float32(first(node.inputs[1].data)), node.inputs[4].data,
        np.float32(first(node.inputs[7].data)), outs, int(first(node.inputs[8].data)),
        fully_connected=True, target=target))
    return arrays


def emit_qgemm_dot(k: Kernel) -> None:
    """Per input row and block of outputs: the folded bias plus the rows' dot products."""
    node, b = k.node, k.b
    rows, depth = node.inputs[0].type.shape
    outs = node.output.type.shape[1]
    zp = int(first(constant_input(k, 8, "output zero point")))
    accs = [k.alloca(I32) for _ in range(BLOCK)]
    rest = outs % BLOCK  # a last, narrower block (ResNet-8's 10 classes, VWW's 2)

    def block(m: ir.Value, n0: ir.Value, width: int) -> None:
        for j, slot in enumerate(accs[:width]):
            b.store(k.load(k.args[_BIAS], b.add(n0, I32(j))), slot)
        w_bases = [b.add(b.mul(n0, I32(depth)), I32(j * depth)) for j in range(width)]
        dots(k, k.index((m, depth)), w_bases, accs[:width], depth)
        at = b.add(k.index((m, outs)), n0)
        if width == BLOCK:
            store_block(k, [b.load(slot) for slot in accs], n0, at, zp)
            return
        # One by one: Helium would widen a vector of two or three lanes to 64-bit ones,
        # whose float conversion is a library call.
        for j, slot in enumerate(accs[:width]):
            store_block(k, [b.load(slot)], b.add(n0, I32(j)), b.add(at, I32(j)), zp)

    with k.loop(rows) as m:
        if outs // BLOCK:
            with k.loop(outs // BLOCK) as ob:
                block(m, k.index((ob, BLOCK)), BLOCK)
        if rest:
            block(m, I32(outs - rest), rest)
