"""Comparisons, logic, Where and integer extremes: element-wise kernels on bytes and integers.

A comparison reads two tensors of one element type (float, or integers compared signed or
unsigned by their type) and writes bools, which are bytes of 0 or 1; And, Or, Xor and Not
combine bools; Where picks between two tensors of any one type by a bool condition; Max and Min
of integers compare as comparisons do. Every input broadcasts numpy's way.
"""

from __future__ import annotations

from contextlib import ExitStack

from llvmlite import ir

from compiler.codegen.elementwise import broadcast_strides
from compiler.codegen.kernel import Kernel
from compiler.errors import KilnError

BYTE = ir.IntType(8)
# ONNX comparison -> (ordered float predicate, integer predicate).
_COMPARE = {"Equal": ("==", "=="), "Greater": (">", ">"), "Less": ("<", "<"),
            "GreaterOrEqual": (">=", ">="), "LessOrEqual": ("<=", "<=")}


def _each(k: Kernel, body) -> None:
    """Loop over the output, handing `body` a loader per input; store what it returns."""
    node = k.node
    out = tuple(node.output.type.shape)
    with ExitStack() as stack:
        idx = [stack.enter_context(k.loop(n)) for n in out]

        def operand(i: int) -> ir.Value:
            steps = broadcast_strides(node.inputs[i].type.shape, out)
            return k.load(k.args[i], k.index(*zip(idx, steps)))
        k.store(body(operand), k.outs[0], k.index(*zip(idx, broadcast_strides(out, out))))


def _truth(k: Kernel, bit: ir.Value) -> ir.Value:
    return k.b.zext(bit, BYTE)


def _is_set(k: Kernel, byte: ir.Value) -> ir.Value:
    return k.b.icmp_unsigned("!=", byte, ir.Constant(BYTE, 0))


def emit_compare(k: Kernel) -> None:
    """Compare a with b into a bool byte (NaN compares false, as in C)."""
    node = k.node
    float_op, int_op = _COMPARE[node.op]
    dtype = node.inputs[0].type.dtype

    def body(operand):
        a, b = operand(0), operand(1)
        if dtype == "float32":
            return _truth(k, k.b.fcmp_ordered(float_op, a, b))
        if dtype in ("uint8", "bool"):
            return _truth(k, k.b.icmp_unsigned(int_op, a, b))
        if dtype in ("int8", "int32", "int64"):
            return _truth(k, k.b.icmp_signed(int_op, a, b))
        raise KilnError(f"cannot generate {node.op} {node.name} for {dtype} inputs")
    _each(k, body)


def emit_logical(k: Kernel) -> None:
    """And, Or, Xor of two bools, Not of one."""
    node = k.node

    def body(operand):
        a = _is_set(k, operand(0))
        if node.op == "Not":
            return _truth(k, k.b.not_(a))
        b = _is_set(k, operand(1))
        combine = {"And": k.b.and_, "Or": k.b.or_, "Xor": k.b.xor}[node.op]
        return _truth(k, combine(a, b))
    _each(k, body)


def emit_where(k: Kernel) -> None:
    """Pick x where the condition holds, else z, element by element."""
    _each(k, lambda operand: k.b.select(_is_set(k, operand(0)), operand(1), operand(2)))


def emit_integer_extreme(k: Kernel) -> None:
    """Max / Min of two integer tensors (stored 8-bit values compare as their type's sign)."""
    node = k.node
    if len(node.inputs) != 2:
        raise KilnError(f"cannot generate {node.op} {node.name} of {len(node.inputs)} integer "
                        "inputs (two only)")
    signed = node.output.type.dtype in ("int8", "int32", "int64")
    sign = ">" if node.op == "Max" else "<"

    def body(operand):
        a, b = operand(0), operand(1)
        larger = k.b.icmp_signed(sign, a, b) if signed else k.b.icmp_unsigned(sign, a, b)
        return k.b.select(larger, a, b)
    _each(k, body)


def emit_is_inf(k: Kernel) -> None:
    """IsInf (+inf and -inf as detect_positive and detect_negative ask) and IsNaN."""
    node = k.node
    positive = node.attrs.get("detect_positive", 0)
    negative = node.attrs.get("detect_negative", 0)

    def body(operand):
        x = operand(0)
        if node.op == "IsNaN":
            return _truth(k, k.b.fcmp_unordered("uno", x, x))
        hit = ir.Constant(ir.IntType(1), 0)
        if positive:
            hit = k.b.or_(hit, k.b.fcmp_ordered("==", x, ir.Constant(x.type, float("inf"))))
        if negative:
            hit = k.b.or_(hit, k.b.fcmp_ordered("==", x, ir.Constant(x.type, float("-inf"))))
        return _truth(k, hit)
    _each(k, body)


def emit_integer_unary(k: Kernel) -> None:
    """BitwiseNot (all bits flipped) and Clip with integer bounds (missing ones: no bound)."""
    node = k.node
    signed = node.output.type.dtype not in ("uint8",)
    present = [i for i in (1, 2) if i < len(node.inputs) and node.inputs[i] is not None]

    def body(operand):
        x = operand(0)
        if node.op == "BitwiseNot":
            return k.b.xor(x, ir.Constant(x.type, -1))
        for i in present:
            bound = operand(i)
            beyond = (k.b.icmp_signed if signed else k.b.icmp_unsigned)(
                "<" if i == 1 else ">", x, bound)
            x = k.b.select(beyond, bound, x)
        return x
    _each(k, body)
