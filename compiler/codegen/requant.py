"""Requantization in generated code: an int32 accumulator to an 8-bit output, either rule.

The same arithmetic as compiler/quant/requant.py, emitted as LLVM integer and float operations:
`tflite` multiplies by a Q31 multiplier with TFLite Micro's double rounding (a 64-bit product,
a nudge, a truncating division by 2**31, then a rounding right shift, ties away from zero);
`onnx` multiplies the accumulator converted to float32 by a float32 scale, clamps and rounds
half to even (llvm.rint in the default rounding mode). The per-channel parameters arrive as
weight arrays, so one kernel serves every layer of one shape.
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen.kernel import I32, Kernel

I64 = ir.IntType(64)
F32 = ir.FloatType()


def _rint(k: Kernel, x: ir.Value) -> ir.Value:
    fn = k.fn.module.declare_intrinsic("llvm.rint", [F32], ir.FunctionType(F32, [F32]))
    return k.b.call(fn, [x])


def _select_min(k: Kernel, a: ir.Value, b: ir.Value) -> ir.Value:
    return k.b.select(k.b.icmp_signed("<", a, b), a, b)


def _select_max(k: Kernel, a: ir.Value, b: ir.Value) -> ir.Value:
    return k.b.select(k.b.icmp_signed(">", a, b), a, b)


def srdhm(k: Kernel, a: ir.Value, multiplier: ir.Value) -> ir.Value:
    """SaturatingRoundingDoublingHighMul of two int32 values."""
    b = k.b
    product = b.mul(b.sext(a, I64), b.sext(multiplier, I64))
    nudge = b.select(b.icmp_signed(">=", product, I64(0)), I64(1 << 30), I64(1 - (1 << 30)))
    total = b.add(product, nudge)
    # C's division by 2**31 truncates toward zero: a shift after adding 2**31 - 1 if negative
    # (no 64-bit division call on a 32-bit core).
    bias = b.select(b.icmp_signed("<", total, I64(0)), I64((1 << 31) - 1), I64(0))
    high = b.trunc(b.ashr(b.add(total, bias), I64(31)), I32)
    overflow = b.and_(b.icmp_signed("==", a, I32(-(1 << 31))),
                      b.icmp_signed("==", multiplier, I32(-(1 << 31))))
    return b.select(overflow, I32((1 << 31) - 1), high)


def rounding_divide_by_pot(k: Kernel, x: ir.Value, exponent: ir.Value) -> ir.Value:
    """The int32 quotient x / 2**exponent rounded half away from zero (RoundingDivideByPOT)."""
    b = k.b
    mask = b.sub(b.shl(I32(1), exponent), I32(1))
    remainder = b.and_(x, mask)
    threshold = b.add(b.ashr(mask, I32(1)), b.zext(b.icmp_signed("<", x, I32(0)), I32))
    return b.add(b.ashr(x, exponent), b.zext(b.icmp_signed(">", remainder, threshold), I32))


def mbqm(k: Kernel, x: ir.Value, multiplier: ir.Value, shift: ir.Value) -> ir.Value:
    """MultiplyByQuantizedMultiplier: x * 2**max(shift, 0), SRDHM, rounding right shift."""
    b = k.b
    zero = I32(0)
    left = _select_max(k, shift, zero)
    right = _select_max(k, b.sub(zero, shift), zero)
    return rounding_divide_by_pot(k, srdhm(k, b.shl(x, left), multiplier), right)


def clamp(k: Kernel, value: ir.Value, low: int, high: int) -> ir.Value:
    """An int32 clamped to [low, high]."""
    return _select_min(k, _select_max(k, value, I32(low)), I32(high))


def tflite(k: Kernel, acc: ir.Value, multiplier: ir.Value, shift: ir.Value, zero_point: int,
           low: int, high: int) -> ir.Value:
    """MultiplyByQuantizedMultiplier(acc) + zero point, clamped: an int32 in [low, high]."""
    value = k.b.add(mbqm(k, acc, multiplier, shift), I32(zero_point))
    return clamp(k, value, low, high)


def onnx(k: Kernel, acc: ir.Value, scale: ir.Value, zero_point: int, low: int, high: int
         ) -> ir.Value:
    """As MlasRequantizeOutput: float32(acc) * scale, clamped, rounded half to even, + zp."""
    b = k.b
    value = b.fmul(b.sitofp(acc, F32), scale)
    lo, hi = ir.Constant(F32, float(low - zero_point)), ir.Constant(F32, float(high - zero_point))
    value = b.select(b.fcmp_ordered("<", value, lo), lo, value)
    value = b.select(b.fcmp_ordered(">", value, hi), hi, value)
    value = b.add(b.fptosi(_rint(k, value), I32), I32(zero_point))
    return _select_min(k, _select_max(k, value, I32(low)), I32(high))
