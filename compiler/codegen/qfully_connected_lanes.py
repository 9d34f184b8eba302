"""8-bit fully connected layers (QGemm, 2-D QLinearMatMul) on the hosts' lane dot products.

The same arrangement as the lane convolution (`qconv_lanes`) for one pixel and one tap: output
units in lanes, weights stored [N/L, K/S, L, S] (S input channels per word, `lanedot`), a word
of input bytes broadcast to every lane, and the input zero point (with VPDPBUSD's sign flip)
folded into the bias at compile time. A depth that is not a multiple of S gets zero weights
for the missing bytes of its last word, which is assembled from the bytes that exist.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.int8dot import WEIGHTS, load_vector, requant_arrays, store_vector
from compiler.codegen.kernel import I32, Kernel, constant_input, first
from compiler.codegen.lanedot import (
    LANE_DOTS,
    input_word,
    lane_dot,
    lanes_for,
    sign_shift,
    step,
    stored_weights,
    vectors_and_chains,
)
from compiler.codegen.qfully_connected import weight_rows
from compiler.codegen.targets import Target
from compiler.ir.graph import Node

_BIAS = 9  # the folded bias, after the node's inputs
_SLOTS = {"QGemm": (7, 8, 6), "QLinearMatMul": (6, 7, None)}  # y scale, y zero point, bias


def fc_lanes_eligible(node: Node, target: Target | None) -> bool:
    """Whether this fully connected layer runs on `target`'s lane dot products."""
    if target is None or target.int8_dot not in LANE_DOTS or node.op not in _SLOTS:
        return False
    x, w = node.inputs[0].type, node.inputs[3].type
    if x.dtype != "int8" or w.dtype != "int8" or x.rank != 2 or w.rank != 2:
        return False
    if len(node.inputs) > 5 and node.inputs[5] is not None and np.asarray(
            node.inputs[5].data).any():
        return False
    return node.output.type.shape[1] % 8 == 0


def qgemm_lanes_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """Weights [N/L, K/S, L, S] (zero-padded depth), the folded bias, the rule's data."""
    rows = weight_rows(node)
    outs, depth = rows.shape
    lanes, size = lanes_for(outs, target), step(target)
    padded = np.zeros((outs, -(-depth // size) * size), np.int64)
    padded[:, :depth] = rows
    arranged = padded.reshape(outs // lanes, lanes, -1, size).transpose(0, 2, 1, 3)
    y_scale, y_zero, bias_slot = _SLOTS[node.op]
    zx = int(first(node.inputs[2].data))
    bias = 0 if bias_slot is None or len(node.inputs) <= bias_slot or node.inputs[
        bias_slot] is None else np.asarray(node.inputs[bias_slot].data, np.int64)
    folded = np.broadcast_to(np.asarray(bias, np.int64), (outs,)) - (
        zx + sign_shift(target)) * rows.sum(1)
    arrays = {WEIGHTS: stored_weights(arranged, target), _BIAS: folded.astype(np.int32)}
    arrays.update(requant_arrays(
        node, np.float32(first(node.inputs[1].data)), node.inputs[4].data,
        np.float32(first(node.inputs[y_scale].data)), outs,
        int(first(node.inputs[y_zero].data)), fully_connected=True, target=target))
    return arrays


def emit_qgemm_lanes(k: Kernel) -> None:
    """Per input row and group of output vectors: folded bias, the row's dot products."""
    node, b = k.node, k.b
    rows, depth = node.inputs[0].type.shape
    outs = node.output.type.shape[1]
    lanes, size = lanes_for(outs, k.target), step(k.target)
    vec = ir.VectorType(I32, lanes)
    blocks = outs // lanes
    group = max(g for g in range(1, vectors_and_chains(k.target)[0] + 1) if blocks % g == 0)
    words = -(-depth // size)
    zp = int(first(constant_input(k, _SLOTS[node.op][1], "output zero point")))
    accs = [k.alloca(vec) for _ in range(group)]
    block_elements = words * size * lanes
    with k.loop(rows) as m, k.loop(blocks // group) as gb:
        n0 = k.index((gb, group * lanes))
        for j, slot in enumerate(accs):
            b.store(load_vector(k, k.args[_BIAS], b.add(n0, I32(j * lanes)), lanes, I32), slot)
        row_at = k.index((m, depth))

        def word(g, available: int = 0, gb=gb):
            at = b.add(row_at, k.index((g, size)) if not available else I32(g * size))
            x = input_word(k, k.args[0], at, lanes, available)
            for j, slot in enumerate(accs):
                w_at = k.index((gb, group * block_elements), base=j * block_elements)
                w_at = b.add(w_at, k.index((g, size * lanes)) if not available
                             else I32(g * size * lanes))
                b.store(lane_dot(k, b.load(slot), x, w_at, lanes), slot)

        with k.loop(depth // size) as g:
            word(g)
        if depth % size:
            word(depth // size, depth % size)
        for j, slot in enumerate(accs):
            first_out = b.add(n0, I32(j * lanes))
            store_vector(k, b.load(slot), first_out, b.add(k.index((m, outs)), first_out), zp)
