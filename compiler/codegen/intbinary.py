"""Element-wise arithmetic on integer tensors, with numpy's broadcasting.

The operators are Add, Sub, Mul, Div, Mod, BitShift and the bitwise ones. Sums and products
wrap as C's do (and as the reference computes them); division truncates toward zero; Mod takes
the divisor's sign (fmod=0) or the dividend's (fmod=1); a shift by the width or more (or by a
negative amount) leaves 0, or the sign for a right shift of a signed value. A division or
remainder by zero, which the reference refuses, gives 0 here: compiled code must not trap.
"""

from __future__ import annotations

from contextlib import ExitStack

from llvmlite import ir

from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import Kernel
from compiler.errors import KilnError

SIGNED = ("int8", "int16", "int32", "int64")


def _zero(x):
    return ir.Constant(x.type, 0)


def _divide(k: Kernel, a, b, signed: bool, remainder: bool):
    builder = k.b
    zero = builder.icmp_signed("==", b, _zero(b))
    safe = builder.select(zero, ir.Constant(b.type, 1), b)
    if remainder:
        value = builder.srem(a, safe) if signed else builder.urem(a, safe)
    else:
        value = builder.sdiv(a, safe) if signed else builder.udiv(a, safe)
    return builder.select(zero, _zero(a), value)


def _mod(k: Kernel, a, b, signed: bool, fmod: bool):
    r = _divide(k, a, b, signed, True)
    if fmod or not signed:
        return r
    builder = k.b
    differ = builder.icmp_unsigned("!=", builder.icmp_signed("<", r, _zero(r)),
                                   builder.icmp_signed("<", b, _zero(b)))
    fix = builder.and_(builder.icmp_signed("!=", r, _zero(r)), differ)
    return builder.select(fix, builder.add(r, b), r)


def _shift(k: Kernel, a, amount, signed: bool, left: bool):
    builder = k.b
    width = a.type.width
    outside = builder.or_(builder.icmp_signed("<", amount, _zero(amount)),
                          builder.icmp_signed(">=", amount, ir.Constant(amount.type, width)))
    safe = builder.select(outside, _zero(amount), amount)
    if left:
        return builder.select(outside, _zero(a), builder.shl(a, safe))
    shifted = builder.ashr(a, safe) if signed else builder.lshr(a, safe)
    fill = builder.ashr(a, ir.Constant(a.type, width - 1)) if signed else _zero(a)
    return builder.select(outside, fill, shifted)


def emit_integer_binary(k: Kernel) -> None:
    """Combine a and b per element, in the output's integer type."""
    node = k.node
    dtype = node.output.type.dtype
    signed = dtype in SIGNED
    b = k.b
    operations = {
        "Add": b.add, "Sub": b.sub, "Mul": b.mul, "BitwiseAnd": b.and_,
        "BitwiseOr": b.or_, "BitwiseXor": b.xor,
        "Div": lambda x, y: _divide(k, x, y, signed, False),
        "Mod": lambda x, y: _mod(k, x, y, signed, bool(node.attrs.get("fmod", 0))),
        "BitShift": lambda x, y: _shift(k, x, y, signed,
                                        node.attrs.get("direction") == "LEFT"),
    }
    if node.op not in operations or node.attrs.get("activation"):
        raise KilnError(f"cannot generate {node.op} {node.name} for {dtype}")
    out = tuple(node.output.type.shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]
        a, c = (k.load(k.args[i], k.index(*zip(idx, broadcast_strides(
            node.inputs[i].type.shape, out)))) for i in (0, 1))
        k.store(operations[node.op](a, c), k.outs[0],
                k.index(*zip(idx, broadcast_strides(out, out))))
