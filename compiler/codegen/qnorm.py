"""IntL2Normalize: each row's sum of squares, 1 / sqrt of it in fixed point, then the row scaled.

The inverse square root mirrors GetInvSqrtQuantizedMultiplierExp
(compiler.qmath.tflite_tables.inv_sqrt_multiplier) step for step: the sum brought into
[2^27, 2^29) by pairs of bits, five Newton steps in Q3.28, times sqrt(2) / 2, and the shift that
undoes the normalization. It runs once per row, so it is plain scalar code.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel
from compiler.codegen.qsoftmax import shift_left_saturating
from compiler.ops.qnorm import OUTPUT_SHIFT
from compiler.qmath.requant import INT32_MAX

_HALF_THREE = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
_SQRT_HALF = 1518500250  # sqrt(2) / 2 in Q0.31


def inv_sqrt(k: Kernel, total: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(Q31 multiplier, shift) of 1 / sqrt(total) for an int32 total >= 0."""
    b = k.b
    high = b.icmp_unsigned(">=", total, I32(1 << 29))  # one pair of bits off the top
    value = b.select(high, b.lshr(total, I32(2)), total)
    shift = b.select(high, I32(12), I32(11))
    pairs = b.sub(b.sdiv(b.sub(requant.ctlz(k, value), I32(1)), I32(2)), I32(1))
    shift = b.sub(shift, pairs)
    value = b.shl(value, b.mul(pairs, I32(2)))
    half_in = requant.rounding_divide_by_pot(k, b.ashr(value, I32(1)), I32(1))
    x = I32(1 << 28)
    for _ in range(5):
        cube = shift_left_saturating(k, requant.srdhm(k, requant.srdhm(k, x, x), x), 6)
        diff = b.sub(requant.srdhm(k, I32(_HALF_THREE), x), requant.srdhm(k, half_in, cube))
        x = shift_left_saturating(k, diff, 3)
    x = requant.srdhm(k, x, I32(_SQRT_HALF))
    negative = b.icmp_signed("<", shift, I32(0))
    x = b.select(negative, b.shl(x, b.sub(I32(0), shift)), x)
    shift = b.select(negative, I32(0), shift)
    small = b.icmp_signed("<=", total, I32(1))
    return b.select(small, I32(INT32_MAX), x), b.select(small, I32(0), b.sub(I32(0), shift))


def emit_int_l2_normalize(k: Kernel) -> None:
    """Every row of the last axis: sum the squares, then requantize each element by 1/norm."""
    node, b = k.node, k.b
    shape = node.output.type.shape
    depth = shape[-1]
    rows = node.output.type.numel // max(depth, 1)
    zero_point = I32(node.attrs["x_zero_point"])
    with k.loop(rows) as r:
        base = b.mul(r, I32(depth))
        total = k.alloca(I32)
        b.store(I32(0), total)
        with k.loop(depth) as i:
            v = b.sub(b.sext(k.load(k.args[0], b.add(base, i)), I32), zero_point)
            b.store(b.add(b.load(total), b.mul(v, v)), total)
        multiplier, shift = inv_sqrt(k, b.load(total))
        shift = b.add(shift, I32(OUTPUT_SHIFT))
        with k.loop(depth) as i:
            at = b.add(base, i)
            v = b.sub(b.sext(k.load(k.args[0], at), I32), zero_point)
            y = requant.clamp(k, requant.mbqm(k, v, multiplier, shift), -128, 127)
            k.store(b.trunc(y, ir.IntType(8)), k.outs[0], at)
