"""8-bit fully connected layers (QGemm, 2-D QLinearMatMul) on x86's VPDPBUSD.

The same arrangement as the VNNI convolution (`qconv_vnni`) for one pixel and one tap: output
units in lanes, weights stored [N/L, K/4, L, 4], four input bytes broadcast to every lane with
their sign bits flipped (unsigned), and the flip's 128 * sum(w) folded with the input zero
point into the bias at compile time. A depth that is not a multiple of four gets zero weights
for the missing bytes of its last word, which is assembled from the bytes that exist.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen.int8dot import WEIGHTS, load_vector, requant_arrays, store_vector
from compiler.codegen.kernel import I32, Kernel, constant_input, first, splat
from compiler.codegen.qconv_vnni import vpdpbusd
from compiler.codegen.qfully_connected import weight_rows
from compiler.codegen.targets import DotProduct, Target
from compiler.ir.graph import Node

_BIAS = 9  # the folded bias, after the node's inputs
_VECTORS = 4  # vectors of outputs one row keeps in registers
_SLOTS = {"QGemm": (7, 8, 6), "QLinearMatMul": (6, 7, None)}  # y scale, y zero point, bias



def _lanes(outs: int) -> int:
    return 16 if outs % 16 == 0 else 8


def fc_vnni_eligible(node: Node, target: Target | None) -> bool:
    """Whether this fully connected layer runs on VPDPBUSD on `target`."""
    if target is None or target.int8_dot is not DotProduct.VNNI or node.op not in _SLOTS:
        return False
    x, w = node.inputs[0].type, node.inputs[3].type
    if x.dtype != "int8" or w.dtype != "int8" or x.rank != 2 or w.rank != 2:
        return False
    if len(node.inputs) > 5 and node.inputs[5] is not None and np.asarray(
            node.inputs[5].data).any():
        return False
    return node.output.type.shape[1] % 8 == 0



def qgemm_vnni_weights(node: Node, target: Target | None = None) -> dict[int, np.ndarray]:
    """Weights [N/L, K/4, L, 4] (zero-padded depth), the folded bias, the rule's data."""
    rows = weight_rows(node)
    outs, depth = rows.shape
    lanes = _lanes(outs)
    padded = np.zeros((outs, -(-depth // 4) * 4), np.int64)
    padded[:, :depth] = rows
    arranged = padded.reshape(outs // lanes, lanes, -1, 4).transpose(0, 2, 1, 3)
    y_scale, y_zero, bias_slot = _SLOTS[node.op]
    zx = int(first(node.inputs[2].data))
    bias = 0 if bias_slot is None or len(node.inputs) <= bias_slot or node.inputs[
        bias_slot] is None else np.asarray(node.inputs[bias_slot].data, np.int64)
    folded = np.broadcast_to(np.asarray(bias, np.int64), (outs,)) - (zx + 128) * rows.sum(1)
    arrays = {WEIGHTS: np.ascontiguousarray(arranged).astype(np.int8),
              _BIAS: folded.astype(np.int32)}
    arrays.update(requant_arrays(
        node, np.float32(first(node.inputs[1].data)), node.inputs[4].data,
        np.float32(first(node.inputs[y_scale].data)), outs,
        int(first(node.inputs[y_zero].data)), fully_connected=True, target=target))
    return arrays


def _word(k: Kernel, row_at, g: int | ir.Value, depth: int, tail: bool) -> ir.Value:
    """Input bytes 4g..4g+3 of a row as one word; the last, partial word from single bytes."""
    b = k.b
    if not tail:
        words = b.bitcast(b.gep(k.args[0], [row_at], inbounds=True), ir.PointerType(I32))
        return b.load(b.gep(words, [g], inbounds=True), align=1)
    word = I32(0)
    for i in range(depth % 4):
        byte = b.zext(k.load(k.args[0], b.add(row_at, I32(4 * g + i))), I32)
        word = b.or_(word, b.shl(byte, I32(8 * i)))
    return word


def emit_qgemm_vnni(k: Kernel) -> None:
    """Per input row and group of output vectors: folded bias, the row's dot products."""
    node, b = k.node, k.b
    rows, depth = node.inputs[0].type.shape
    outs = node.output.type.shape[1]
    lanes = _lanes(outs)
    vec = ir.VectorType(I32, lanes)
    blocks = outs // lanes
    group = max(g for g in range(1, _VECTORS + 1) if blocks % g == 0)
    words = -(-depth // 4)
    zp = int(first(constant_input(k, _SLOTS[node.op][1], "output zero point")))
    accs = [k.alloca(vec) for _ in range(group)]
    block_bytes = words * 4 * lanes
    with k.loop(rows) as m, k.loop(blocks // group) as gb:
        n0 = k.index((gb, group * lanes))
        for j, slot in enumerate(accs):
            b.store(load_vector(k, k.args[_BIAS], b.add(n0, I32(j * lanes)), lanes, I32), slot)
        row_at = k.index((m, depth))

        def step(g, tail: bool, gb=gb):
            x = splat(k, b.xor(_word(k, row_at, g, depth, tail), I32(-0x7F7F7F80)), vec)
            for j, slot in enumerate(accs):
                w_at = k.index((gb, group * block_bytes), base=j * block_bytes)
                w_at = b.add(w_at, k.index((g, 4 * lanes)) if not tail
                             else I32(g * 4 * lanes))
                w = b.bitcast(load_vector(k, k.args[WEIGHTS], w_at, 4 * lanes), vec)
                b.store(vpdpbusd(k, b.load(slot), x, w), slot)

        with k.loop(depth // 4) as g:
            step(g, False)
        if depth % 4:
            step(depth // 4, True)
        for j, slot in enumerate(accs):
            first_out = b.add(n0, I32(j * lanes))
            store_vector(k, b.load(slot), first_out, b.add(k.index((m, outs)), first_out), zp)
