"""IntReduce: TFLite's 8-bit SUM and MEAN, an int32 sum per output and one requantization.

The outputs are walked in order (the kept axes outermost), each summing its reduced positions
into one register, so no accumulator buffer is needed; the requantization is the tflite rule
(compiler.codegen.requant) with the node's multiplier (adjusted for a mean at compile time).
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, strides
from compiler.ops.qreduce import mean_multiplier
from compiler.qmath.requant import RANGES


def emit_int_reduce(k: Kernel) -> None:
    """Each output: sum of (x - zp) over its reduced positions, requantized, clamped."""
    node = k.node
    shape = node.inputs[0].type.shape
    rank = len(shape)
    axes = sorted({int(a) % rank for a in node.attrs["axes"]})
    kept = [a for a in range(rank) if a not in axes]
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    multiplier, shift = node.attrs["multiplier"], node.attrs["shift"]
    if node.attrs["mean"]:
        multiplier, shift = mean_multiplier(multiplier, shift, count)
    x_strides = strides(shape)
    out_strides = strides([shape[a] for a in kept])
    signed = node.inputs[0].type.dtype == "int8"
    low, high = RANGES[node.output.type.dtype]
    b = k.b
    total = k.alloca(I32)
    with ExitStack() as outer:
        out_idx = [outer.enter_context(k.loop(shape[a])) for a in kept]
        b.store(I32(-node.attrs["x_zero_point"] * count), total)
        with ExitStack() as inner:
            red_idx = [inner.enter_context(k.loop(shape[a])) for a in axes]
            terms = [(i, x_strides[a]) for i, a in zip(out_idx, kept)]
            terms += [(i, x_strides[a]) for i, a in zip(red_idx, axes)]
            x = k.load(k.args[0], k.index(*terms))
            wide = b.sext(x, I32) if signed else b.zext(x, I32)
            b.store(b.add(b.load(total), wide), total)
        value = requant.tflite(k, b.load(total), I32(multiplier), I32(shift),
                               node.attrs["y_zero_point"], low, high)
        k.store(b.trunc(value, k.outs[0].type.pointee), k.outs[0],
                k.index(*zip(out_idx, out_strides)))
