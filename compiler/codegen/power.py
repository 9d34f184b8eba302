"""Pow of integer bases, or of float bases with integer exponents (the output has the base's type).

The reference computes integer bases in float64 and truncates; an exponent that is a whole
number from 0 up is computed here by squaring in 64-bit integers (exact, wrapping where the
float64 result would be out of range anyway), any other in float32 through the inline pow and
truncated. A float base takes its integer exponent converted to float32.
"""

from __future__ import annotations

from contextlib import ExitStack

from llvmlite import ir

from compiler.codegen.elementwise import broadcast_strides, intrinsic
from compiler.codegen.kernel import Kernel

F32 = ir.FloatType()
I64 = ir.IntType(64)


def _integer_power(k: Kernel, base: ir.Value, exponent: ir.Value) -> ir.Value:
    """Base ** exponent for exponent >= 0, by squaring (at most 64 rounds)."""
    b = k.b
    result, square, rest = k.alloca(I64), k.alloca(I64), k.alloca(I64)
    b.store(I64(1), result)
    b.store(base, square)
    b.store(exponent, rest)
    with k.loop(64):
        e = b.load(rest)
        odd = b.icmp_unsigned("!=", b.and_(e, I64(1)), I64(0))
        b.store(b.select(odd, b.mul(b.load(result), b.load(square)), b.load(result)), result)
        b.store(b.mul(b.load(square), b.load(square)), square)
        b.store(b.lshr(e, I64(1)), rest)
    return b.load(result)


def emit_power(k: Kernel) -> None:
    """Y = X ** E element by element, broadcasting numpy's way."""
    node, b = k.node, k.b
    out = tuple(node.output.type.shape)
    base_int = not isinstance(k.outs[0].type.pointee, ir.FloatType)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        x = k.load(k.args[0], k.index(*zip(idx, broadcast_strides(node.inputs[0].type.shape,
                                                                   out))))
        e = k.load(k.args[1], k.index(*zip(idx, broadcast_strides(node.inputs[1].type.shape,
                                                                   out))))
        e_float = isinstance(e.type, ir.FloatType)
        if not base_int:
            value = intrinsic(k, "pow", x, e if e_float else b.sitofp(e, F32))
        else:
            wide = b.sext(x, I64) if x.type.width < 64 else x
            if e_float:
                whole = b.fptosi(e, I64)
                exact = b.and_(b.fcmp_ordered("==", b.sitofp(whole, e.type), e),
                               b.icmp_signed(">=", whole, I64(0)))
            else:
                whole = b.sext(e, I64) if e.type.width < 64 else e
                exact = b.icmp_signed(">=", whole, I64(0))
            by_squaring = _integer_power(k, wide, whole)
            by_float = b.fptosi(intrinsic(k, "pow", b.sitofp(x, F32),
                                          e if e_float else b.sitofp(e, F32)), I64)
            value = b.select(exact, by_squaring, by_float)
            value = b.trunc(value, x.type) if x.type.width < 64 else value
        k.store(value, k.outs[0], k.index(*zip(idx, broadcast_strides(out, out))))
