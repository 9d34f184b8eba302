"""IntDiv: TFLite Micro's 8-bit DIV with the divisor's reciprocal looked up, not computed.

Everything that depends on one code alone is a compile-time table: per divisor code its sign,
GetReciprocal's reciprocal and shift (compiler.qmath.tflite_div, the reference's own function);
per centred dividend (-255..255) its normalized value and leading sign bits. A kernel then does
two doubling high multiplies and the final rounding shift per element, that shift computed as
compiled C computes it past 31 bits (rounding_divide_by_pot_int32).
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
from llvmlite import ir

from compiler.codegen import requant
from compiler.codegen.codetables import table
from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import I32, Kernel
from compiler.qmath.tables import codes
from compiler.qmath.tflite_div import count_leading_sign_bits, get_reciprocal

_SPAN = 255  # a centred int8 value lies in [-255, 255]


def _divisor_tables(attrs: dict) -> dict[str, np.ndarray]:
    """Per divisor code (in bit-pattern order): flip, reciprocal, exponent base, zero."""
    b = codes("int8").astype(np.int64) - attrs["b_zero_point"]
    divisor = np.abs(b)
    inverse, recip_shift = get_reciprocal(np.maximum(divisor, 1), 31)
    return {"flip": (b < 0).astype(np.int32), "inverse": inverse.astype(np.int32),
            "base": (recip_shift - attrs["shift"]).astype(np.int32),
            "zero": (divisor == 0).astype(np.int32)}


def _dividend_tables() -> dict[str, np.ndarray]:
    """Per centred dividend a + 255: a normalized by its leading sign bits, and their count."""
    a = np.arange(-_SPAN, _SPAN + 1, dtype=np.int64)
    headroom = count_leading_sign_bits(a)
    normalized = ((a << headroom) + (1 << 31)) % (1 << 32) - (1 << 31)
    return {"normalized": normalized.astype(np.int32), "headroom": headroom.astype(np.int32)}


def _rounding_shift(k: Kernel, x: ir.Value, exponent: ir.Value) -> ir.Value:
    """RoundingDivideByPOT on int32 for exponents 0..62, as x86 C computes it."""
    b = k.b
    count = b.and_(exponent, I32(31))
    wide = b.icmp_signed(">=", exponent, I32(32))
    mask = b.select(wide, I32(-1), b.sub(b.shl(I32(1), count), I32(1)))
    remainder = b.and_(x, mask)
    threshold = b.add(b.ashr(mask, I32(1)), b.zext(b.icmp_signed("<", x, I32(0)), I32))
    up = b.zext(b.icmp_signed(">", remainder, threshold), I32)
    return b.add(b.ashr(x, count), up)


def emit_int_div(k: Kernel) -> None:
    """Quotients of every element pair, broadcasting numpy's way."""
    node, b = k.node, k.b
    attrs = node.attrs
    by_divisor = {name: table(k, name, values)
                  for name, values in _divisor_tables(attrs).items()}
    by_dividend = {name: table(k, name, values) for name, values in _dividend_tables().items()}
    low, high, zp = attrs["low"], attrs["high"], attrs["y_zero_point"]
    out = tuple(node.output.type.shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        loads = []
        for slot in range(2):
            steps = broadcast_strides(node.inputs[slot].type.shape, out)
            loads.append(k.load(k.args[slot], k.index(*zip(idx, steps))))
        code = b.zext(loads[1], I32)  # the divisor's bit pattern indexes its tables
        a = b.sub(b.sext(loads[0], I32), I32(attrs["a_zero_point"]))
        flip = b.trunc(k.load(by_divisor["flip"], code), ir.IntType(1))
        a = b.select(flip, b.sub(I32(0), a), a)
        at = b.add(a, I32(_SPAN))
        quotient = requant.srdhm(k, k.load(by_dividend["normalized"], at),
                                 k.load(by_divisor["inverse"], code))
        scaled = requant.srdhm(k, quotient, I32(attrs["multiplier"]))
        exponent = b.add(k.load(by_divisor["base"], code), k.load(by_dividend["headroom"], at))
        exponent = b.select(b.icmp_signed("<", exponent, I32(0)), I32(0), exponent)
        y = b.add(_rounding_shift(k, scaled, exponent), I32(zp))
        saturated = b.select(b.icmp_signed(">", a, I32(0)), I32(high),
                             b.select(b.icmp_signed("<", a, I32(0)), I32(low), I32(zp)))
        zero = b.trunc(k.load(by_divisor["zero"], code), ir.IntType(1))
        y = requant.clamp(k, b.select(zero, saturated, y), low, high)
        k.store(b.trunc(y, ir.IntType(8)), k.outs[0],
                k.index(*zip(idx, broadcast_strides(out, out))))
