"""IntLogSoftmax: TFLite Micro's 8-bit LOG_SOFTMAX, one row at a time.

As for the softmax, a value enters only through its distance below the row's maximum, so each
distance's Q5.26 difference and Q12.19 exponential are compile-time tables of the reference's
own functions (compiler.qmath.tflite_log_softmax). Per row the kernel sums the exponentials,
takes gemmlowp's log of the sum in scalar fixed point (this module mirrors log_of_sum step for
step), and per element subtracts and rounds.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.codetables import table
from compiler.codegen.kernel import I32, Kernel
from compiler.codegen.qsoftmax import one_over_one_plus_x
from compiler.ops.qlogsoftmax import PARAMS
from compiler.qmath import tflite_log_softmax as lsm
from compiler.qmath.requant import INT32_MAX, INT32_MIN

I8 = ir.IntType(8)


def _times_pot(k: Kernel, x: ir.Value, exponent: ir.Value) -> ir.Value:
    """SaturatingRoundingMultiplyByPOTParam for a run-time exponent in [0, 31]."""
    b = k.b
    top = b.sub(b.shl(I32(1), b.sub(I32(31), exponent)), I32(1))
    shifted = b.select(b.icmp_signed(">", x, top), I32(INT32_MAX),
                       b.select(b.icmp_signed("<", x, b.sub(I32(0), top)), I32(INT32_MIN),
                                b.shl(x, exponent)))
    return b.select(b.icmp_signed("==", exponent, I32(0)), x, shifted)


def _saturating(k: Kernel, a: ir.Value, b_: ir.Value, subtract: bool) -> ir.Value:
    name = "llvm.ssub.sat.i32" if subtract else "llvm.sadd.sat.i32"
    module = k.fn.module
    fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(I32, [I32, I32]), name)
    return k.b.call(fn, [a, b_])


def log_of_sum(k: Kernel, total: ir.Value) -> ir.Value:
    """log_x_for_x_greater_than_or_equal_to_1<5> of a Q12.19 sum: a Q5.26 raw."""
    b = k.b
    mul = requant.srdhm
    accum = lsm.ACCUM_BITS
    quarter = I32(lsm.quarter_in_accumulator())
    a_headroom = requant.ctlz(k, total)
    r_a = _times_pot(k, mul(k, _times_pot(k, total, b.sub(a_headroom, I32(1))),
                            I32(lsm.SQRT_HALF)), I32(1))
    a_adjust = _saturating(k, _times_pot(k, b.sub(I32(lsm.SUM_BITS), a_headroom),
                                         I32(31 - accum)), quarter, False)
    z_b = mul(k, total, I32(lsm.SQRT_HALF))
    b_headroom = b.sub(requant.ctlz(k, z_b), I32(1))
    r_b = _times_pot(k, total, b_headroom)
    b_adjust = _saturating(k, _times_pot(k, b.sub(I32(lsm.SUM_BITS), b_headroom),
                                         I32(31 - accum)), quarter, True)
    r = b.select(b.icmp_signed("<", r_a, r_b), r_a, r_b)
    adjust = b.select(b.icmp_signed(">", a_adjust, b_adjust), a_adjust, b_adjust)
    i64 = ir.IntType(64)
    half_sum = b.add(b.sext(r, i64), i64(lsm.SQRT_SQRT_HALF))
    nudged = b.add(half_sum, b.select(b.icmp_signed(">=", half_sum, i64(0)), i64(1), i64(-1)))
    p = b.trunc(b.sdiv(nudged, i64(2)), I32)
    q = b.sub(r, I32(lsm.SQRT_SQRT_HALF))
    q = b.add(q, q)
    square = mul(k, q, q)
    num = b.add(mul(k, q, r), mul(k, mul(k, q, square), I32(lsm.ALPHA_N)))
    inner = b.add(b.add(I32(lsm.ALPHA_I), q), mul(k, I32(lsm.ALPHA_D), square))
    denominator = b.add(mul(k, p, inner), mul(k, I32(lsm.ALPHA_F), q))
    reciprocal = one_over_one_plus_x(k, denominator)
    scaled = requant.rounding_divide_by_pot(k, num, I32(accum))
    total_log = b.add(mul(k, adjust, I32(lsm.LOG_2)), mul(k, scaled, reciprocal))
    return _times_pot(k, total_log, I32(accum - lsm.INPUT_BITS))


def emit_int_log_softmax(k: Kernel) -> None:
    """Every row of the last axis: its maximum, the log of its exponentials' sum, the outputs."""
    node, b = k.node, k.b
    p = {name: node.attrs[name] for name in PARAMS}
    distances = np.arange(256)
    q5 = table(k, "q5", lsm.diffs_in_q5(distances, p).astype(np.int32))
    terms = table(k, "terms", lsm.exp_terms(distances, p).astype(np.int32))
    depth = node.output.type.shape[-1]
    rows = node.output.type.numel // max(depth, 1)
    top, total = k.alloca(I32), k.alloca(I32)
    with k.loop(rows) as r:
        base = b.mul(r, I32(depth))
        b.store(I32(-128), top)
        with k.loop(depth) as i:
            v = b.sext(k.load(k.args[0], b.add(base, i)), I32)
            m = b.load(top)
            b.store(b.select(b.icmp_signed(">", v, m), v, m), top)
        m = b.load(top)
        b.store(I32(0), total)
        with k.loop(depth) as i:
            d = b.sub(m, b.sext(k.load(k.args[0], b.add(base, i)), I32))
            b.store(b.add(b.load(total), k.load(terms, d)), total)
        log = log_of_sum(k, b.load(total))
        reach = requant.mbqm(k, b.add(log, I32(INT32_MIN)), I32(p["reverse_multiplier"]),
                             I32(p["reverse_shift"]))
        floor = I32(p["diff_min"] - 1)
        cut = b.select(b.icmp_signed(">", reach, floor), reach, floor)
        with k.loop(depth) as i:
            at = b.add(base, i)
            d = b.sub(m, b.sext(k.load(k.args[0], at), I32))
            out = requant.rounding_divide_by_pot(
                k, b.sub(k.load(q5, d), log), I32(31 - lsm.INPUT_BITS - lsm.OUTPUT_BITS))
            out = requant.clamp(k, b.add(out, I32(lsm.OUTPUT_ZERO_POINT)), -128, 127)
            keep = b.icmp_signed(">", b.sub(I32(0), d), cut)
            k.store(b.trunc(b.select(keep, out, I32(-128)), I8), k.outs[0], at)
