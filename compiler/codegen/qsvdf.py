"""IntSVDF: one inference of TFLite Micro's 8-bit SVDF, per batch row and filter.

The frame's feature for each filter is an int8 dot product (the input's zero point folded into
a per-filter constant), requantized and clamped to the state's type; the new state is the old
one shifted by one along each filter's memory with the feature appended; each unit then sums
its filters' time-weighted memory with the bias and requantizes into int8 (compiler.ops.qsvdf).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.codetables import table
from compiler.codegen.kernel import I32, Kernel

I8 = ir.IntType(8)


def _sum(k: Kernel, n: int, start: ir.Value, term) -> ir.Value:
    """Start + sum of term(i) over i < n, in int32."""
    b = k.b
    total = k.alloca(I32)
    b.store(start, total)
    with k.loop(n) as i:
        b.store(b.add(b.load(total), term(i)), total)
    return b.load(total)


def emit_int_svdf(k: Kernel) -> None:
    """The new state, then the output, of every batch row."""
    node, b = k.node, k.b
    a = node.attrs
    batch, width = node.inputs[0].type.shape
    filters, memory = node.inputs[2].type.shape
    rank = a["rank"]
    state_type = node.inputs[4].type.dtype
    info = np.iinfo(state_type)
    narrow = ir.IntType(info.bits)
    sums = node.inputs[1].data.astype(np.int64).sum(axis=1)
    offsets = table(k, "feature_offsets", (-a["x_zero_point"] * sums).astype(np.int32))
    x, features, times, bias, state = k.args[:5]
    y, new = k.outs
    szp = I32(a["state_zero_point"])
    with k.loop(batch) as row:
        with k.loop(filters) as f:
            dot = _sum(k, width, k.load(offsets, f), lambda i: b.mul(
                b.sext(k.load(x, k.index((row, width), (i, 1))), I32),
                b.sext(k.load(features, k.index((f, width), (i, 1))), I32)))
            fresh = requant.clamp(k, requant.mbqm(k, dot, I32(a["multiplier_1"]),
                                                  I32(a["shift_1"])), int(info.min),
                                  int(info.max))
            base = k.index((row, filters * memory), (f, memory))
            with k.loop(memory - 1) as j:
                k.store(k.load(state, b.add(base, b.add(j, I32(1)))), new, b.add(base, j))
            k.store(b.trunc(b.add(fresh, szp), narrow), new, b.add(base, I32(memory - 1)))
        with k.loop(filters // rank) as u:
            def unit_filter(r):
                f = b.add(b.mul(u, I32(rank)), r)
                base = k.index((row, filters * memory), (f, memory))
                return _sum(k, memory, I32(0), lambda j: b.mul(
                    b.sext(k.load(times, k.index((f, memory), (j, 1))), I32),
                    b.sub(b.sext(k.load(new, b.add(base, j)), I32), szp)))
            total = _sum(k, rank, k.load(bias, u), unit_filter)
            out = requant.tflite(k, total, I32(a["multiplier_2"]), I32(a["shift_2"]),
                                 a["y_zero_point"], -128, 127)
            k.store(b.trunc(out, I8), y, k.index((row, filters // rank), (u, 1)))
