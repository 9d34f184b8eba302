"""8-bit softmax over the last axis (QLinearSoftmax), either rule, equal to the reference.

A row's values enter only through their distance below the row's maximum, one of 256, so the
float exponentials of the onnx rule (onnxruntime's table) and TFLite Micro's fixed-point
exponentials and their Q12.19 terms are tables computed at compile time by the reference's own
functions. At run time a row takes its maximum, sums its terms (in order, in float32, for the
onnx rule), and divides: the onnx rule in float64 with ties to even, the tflite rule through
gemmlowp's Newton reciprocal and a rounding shift, as compiler/qmath/tflite_softmax.py does.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.errors import UnsupportedError
from compiler.ops.qtables import _table as onnx_exp_table
from compiler.ops.qtables import output_multiplier
from compiler.qmath import gemmlowp
from compiler.qmath.requant import INT32_MAX, INT32_MIN, RANGES, rounding_divide_by_pot
from compiler.qmath.requant import saturating_rounding_doubling_high_mul as srdhm
from compiler.qmath.tflite_softmax import softmax_params

F32 = ir.FloatType()
F64 = ir.DoubleType()
I8 = ir.IntType(8)
_EXPS, _TERMS, _FLOATS = 9, 10, 11  # weight slots of the compile-time tables


def _first(k: Kernel, slot: int):
    data = constant_input(k, slot, "scale and zero point")
    return 0 if data is None else np.asarray(data).reshape(-1)[0]


def _geometry(node) -> tuple[int, int]:
    """(rows, length): how many softmaxes, over how many elements each."""
    rows, length, _ = _layout(node)
    return rows, length


def _layout(node) -> tuple[int, int, int]:
    """(rows, length, inner): the normalized axis has `length` elements `inner` apart."""
    shape = node.inputs[0].type.shape
    axis = int(node.attrs.get("axis", -1)) % len(shape)
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return int(np.prod(shape, dtype=np.int64)) // shape[axis], shape[axis], inner


def _at(k: Kernel, r, c):
    """The flat index of element c of row r (rows run over every axis but the normalized)."""
    _, length, inner = _layout(k.node)
    if inner == 1:
        return k.index((r, length), (c, 1))
    b = k.b
    outer, within = b.udiv(r, I32(inner)), b.urem(r, I32(inner))
    return b.add(k.index((outer, length * inner), (c, inner)), within)


def qsoftmax_tables(node) -> dict[int, np.ndarray]:
    """The compile-time tables of the node's rule.

    Per distance d below the row maximum: exp(-d) (Q0.31) and its Q12.19 term (tflite), or
    onnxruntime's float32 table (onnx).
    """
    x_scale = float(np.float32(np.asarray(node.inputs[1].data).reshape(-1)[0]))
    _, length = _geometry(node)
    if node.attrs.get("requant", "onnx") == "tflite":
        multiplier, shift, diff_min = softmax_params(node.attrs["beta"], x_scale)
        diff = -np.arange(256, dtype=np.int64)
        used = diff >= diff_min
        scaled = srdhm(np.where(used, diff, 0) * (1 << shift), multiplier)
        exps = np.where(used, gemmlowp.exp_on_negative_values(scaled, 5), 0)
        terms = np.where(used, rounding_divide_by_pot(exps, 12), 0)
        return {_EXPS: exps.astype(np.int32), _TERMS: terms.astype(np.int32)}
    signed = node.inputs[0].type.dtype == "int8"
    return {_FLOATS: onnx_exp_table(x_scale, length, signed)}


def emit_qsoftmax(k: Kernel) -> None:
    """Row by row: the maximum, the sum of the row's table terms, each output."""
    node, b = k.node, k.b
    rows, length = _geometry(node)
    dtype = node.inputs[0].type.dtype
    widen = b.sext if dtype == "int8" else b.zext
    low, high = RANGES[dtype]
    top_slot, sum_slot = k.alloca(I32), k.alloca(I32)
    fsum_slot = k.alloca(F32)
    tflite = node.attrs.get("requant", "onnx") == "tflite"
    with k.loop(rows) as r:
        b.store(I32(low), top_slot)
        with k.loop(length) as c:
            x = widen(k.load(k.args[0], _at(k, r, c)), I32)
            top = b.load(top_slot)
            b.store(b.select(b.icmp_signed(">", x, top), x, top), top_slot)
        top = b.load(top_slot)
        if tflite:
            _row_tflite(k, r, length, top, widen, sum_slot, low, high)
        else:
            _row_onnx(k, r, length, top, widen, fsum_slot, dtype)


def _row_tflite(k: Kernel, r, length: int, top, widen, sum_slot, low: int, high: int) -> None:
    node, b = k.node, k.b
    _, _, diff_min = softmax_params(node.attrs["beta"], float(np.float32(_first(k, 1))))
    b.store(I32(0), sum_slot)

    def distance(c):
        return b.sub(top, widen(k.load(k.args[0], _at(k, r, c)), I32))

    with k.loop(length) as c:
        b.store(b.add(b.load(sum_slot), k.load(k.args[_TERMS], distance(c))), sum_slot)
    total = b.load(sum_slot)
    ctlz = k.fn.module.declare_intrinsic("llvm.ctlz", [I32],
                                         ir.FunctionType(I32, [I32, ir.IntType(1)]))
    leading = b.call(ctlz, [total, ir.Constant(ir.IntType(1), 0)])
    shifted = b.sub(b.shl(total, leading), I32(INT32_MIN))  # wraps into [0, 2**31)
    reciprocal = one_over_one_plus_x(k, shifted)
    exponent = b.add(b.sub(I32(12), leading), I32(31 - 8))
    with k.loop(length) as c:
        d = distance(c)
        out = requant.rounding_divide_by_pot(
            k, requant.srdhm(k, reciprocal, k.load(k.args[_EXPS], d)), exponent)
        out = requant.clamp(k, b.add(out, I32(low)), low, high)
        used = b.icmp_signed("<=", d, I32(-diff_min))
        k.store(b.trunc(b.select(used, out, I32(low)), I8), k.outs[0],
                _at(k, r, c))


def shift_left_saturating(k: Kernel, x, bits: int):
    """SaturatingRoundingMultiplyByPOT of an int32 by a positive power of two."""
    b = k.b
    big = b.icmp_signed(">", x, I32(INT32_MAX >> bits))
    small = b.icmp_signed("<", x, I32(INT32_MIN >> bits))
    return b.select(big, I32(INT32_MAX), b.select(small, I32(INT32_MIN), b.shl(x, I32(bits))))


def one_over_one_plus_x(k: Kernel, a):
    """One over one plus a Q0.31 value in [0, 1), by gemmlowp's Newton-Raphson steps."""
    b = k.b
    i64 = ir.IntType(64)
    half = b.trunc(b.lshr(b.add(b.zext(a, i64), i64(1 << 31)), i64(1)), I32)
    x = b.add(I32(1515870810), requant.srdhm(k, half, I32(-1010580540)))
    for _ in range(3):
        product = requant.srdhm(k, half, x)
        x = b.add(x, shift_left_saturating(k, requant.srdhm(k, x, b.sub(I32(1 << 29),
                                                                         product)), 2))
    return shift_left_saturating(k, x, 1)


def _row_onnx(k: Kernel, r, length: int, top, widen, fsum_slot, dtype: str) -> None:
    """One row as onnxruntime writes it: the float32 sum, then each quotient in float64.

    A microcontroller whose FPU has no float64 (Cortex-M4, M7 and M33 as Kiln builds them,
    RISC-V with F) would call library helpers for it; there the same rounding is found exactly
    in float32 (`_rounded_quotient_f32`).
    """
    b = k.b
    low, high = RANGES[dtype]
    multiplier = output_multiplier(_first(k, 3))
    in_float32 = requant.no_float64(k)
    if in_float32 and multiplier >= _F32_MULTIPLIER_LIMIT:
        raise UnsupportedError(
            f"{k.node.name} (QLinearSoftmax): output scale {float(_first(k, 3)):g} is below "
            f"2**-17; {k.target.name}'s float32 arithmetic cannot reproduce onnxruntime's "
            "float64 quotient for it")
    ty = F32 if in_float32 else F64

    def entry(c):
        x = widen(k.load(k.args[0], _at(k, r, c)), I32)
        index = b.and_(b.add(x, b.sub(I32(high), top)), I32(0xFF))
        return k.load(k.args[_FLOATS], index), x

    b.store(ir.Constant(F32, 0.0), fsum_slot)
    with k.loop(length) as c:
        b.store(b.fadd(b.load(fsum_slot), entry(c)[0]), fsum_slot)  # in order, float32
    total = b.load(fsum_slot)
    wide_total = total if in_float32 else b.fpext(total, F64)
    with k.loop(length) as c:
        value, x = entry(c)
        if in_float32:
            q = _rounded_quotient_f32(k, value, multiplier, total)
        else:
            quotient = b.fdiv(b.fmul(b.fpext(value, F64), ir.Constant(F64, multiplier)),
                              wide_total)
            cap = ir.Constant(F64, 2.0 ** 31)  # beyond it (infinity too) everything saturates
            q = requant.rint_inline(k, b.select(b.fcmp_ordered("<", quotient, cap), quotient, cap))
        q = b.fadd(q, ir.Constant(ty, float(_first(k, 4))))
        q = b.select(b.fcmp_ordered(">", q, ir.Constant(ty, float(high))),
                     ir.Constant(ty, float(high)), q)
        q = b.select(b.fcmp_ordered("<", q, ir.Constant(ty, float(low))),
                     ir.Constant(ty, float(low)), q)
        q = b.select(b.fcmp_ordered("==", total, ir.Constant(F32, 0.0)), x, b.fptosi(q, I32))
        k.store(b.trunc(q, I8), k.outs[0], _at(k, r, c))


_F32_MULTIPLIER_LIMIT = 2.0 ** 17  # floor(1 / y_scale) of the float32 path stays below
_F32_QUOTIENT_LIMIT = 2.0 ** 22  # and its quotients are capped here (they saturate anyway)


def _rounded_quotient_f32(k: Kernel, value: ir.Value, multiplier: float, total: ir.Value):
    """round_half_even(value * multiplier / total) of the exact real quotient, in float32.

    That is float64's rounding too for a multiplier below 2**17 and a quotient below 512 (a
    quotient that is not a half step stays further from one than float64 rounds). Both
    operands are first scaled by 2**-32 (exactly: the sum is at least 1) so the product cannot
    overflow; the product is
    then hi + lo exactly (a fused multiply-add gives lo), the float32 quotient's nearest
    integer n is at most one step off, and the sign of product - (n +- 1/2) * total, exact
    from one more fused multiply-add, says which way to step and where a tie lies.
    """
    b = k.b
    module = k.fn.module
    fma = module.globals.get("llvm.fma.f32") or ir.Function(
        module, ir.FunctionType(F32, [F32, F32, F32]), "llvm.fma.f32")

    def f32(v: float) -> ir.Constant:
        return ir.Constant(F32, v)

    a = b.fmul(value, f32(2.0 ** -32))
    s = b.fmul(total, f32(2.0 ** -32))
    y = f32(multiplier)
    hi = b.fmul(a, y)
    lo = b.call(fma, [a, y, b.fneg(hi)])
    q = b.fdiv(hi, s)
    q = b.select(b.fcmp_ordered("<", q, f32(_F32_QUOTIENT_LIMIT)), q, f32(_F32_QUOTIENT_LIMIT))
    n = requant.rint(k, q)

    def beyond(half: ir.Value) -> ir.Value:
        """Product - half * total, with the exact sign."""
        return b.fadd(b.call(fma, [b.fneg(half), s, hi]), lo)

    above = beyond(b.fadd(n, f32(0.5)))
    below = beyond(b.fsub(n, f32(0.5)))
    odd = b.icmp_unsigned("!=", b.and_(b.fptosi(n, I32), I32(1)), I32(0))
    zero = f32(0.0)
    up = b.or_(b.fcmp_ordered(">", above, zero), b.and_(b.fcmp_ordered("==", above, zero), odd))
    down = b.or_(b.fcmp_ordered("<", below, zero),
                 b.and_(b.fcmp_ordered("==", below, zero), odd))
    return b.select(up, b.fadd(n, f32(1.0)), b.select(down, b.fsub(n, f32(1.0)), n))
