"""8-bit softmax over the last axis (QLinearSoftmax), either rule, equal to the reference.

A row's values enter only through their distance below the row's maximum, one of 256, so the
float exponentials of the onnx rule (onnxruntime's table) and TFLite Micro's fixed-point
exponentials and their Q12.19 terms are tables computed at compile time by the reference's own
functions. At run time a row takes its maximum, sums its terms (in order, in float32, for the
onnx rule), and divides: the onnx rule in float32 with ties to even, the tflite rule through
gemmlowp's Newton reciprocal and a rounding shift, as compiler/qmath/tflite_softmax.py does.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.kernel import I32, Kernel, constant_input
from compiler.ops.qtables import _table as onnx_exp_table
from compiler.qmath import gemmlowp
from compiler.qmath.requant import INT32_MAX, INT32_MIN, RANGES, rounding_divide_by_pot
from compiler.qmath.requant import saturating_rounding_doubling_high_mul as srdhm
from compiler.qmath.tflite_softmax import softmax_params

F32 = ir.FloatType()
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
    b = k.b
    signed = dtype == "int8"
    high = 127 if signed else 255
    y_scale = float(np.float32(math.floor(np.float32(1.0) / np.float32(_first(k, 3)))))
    zp = int(_first(k, 4))

    def entry(c):
        x = widen(k.load(k.args[0], _at(k, r, c)), I32)
        index = b.and_(b.add(x, b.sub(I32(high), top)), I32(0xFF))
        return k.load(k.args[_FLOATS], index), x

    b.store(ir.Constant(F32, 0.0), fsum_slot)
    with k.loop(length) as c:
        b.store(b.fadd(b.load(fsum_slot), entry(c)[0]), fsum_slot)  # in order, float32
    total = b.load(fsum_slot)
    with k.loop(length) as c:
        value, x = entry(c)
        q = b.fdiv(b.fmul(value, ir.Constant(F32, y_scale)), total)
        q = b.add(b.fptosi(requant.rint(k, q), I32), I32(zp))
        q = b.select(b.icmp_signed(">", q, I32(high)), I32(high), q)
        q = b.select(b.fcmp_ordered("==", total, ir.Constant(F32, 0.0)), x, q)
        k.store(b.trunc(q, I8), k.outs[0], _at(k, r, c))
