"""Comparisons, logic, bit operations, Mod and Where: element-wise with broadcasting.

Comparisons and logic produce bool tensors; Where picks by one. Bit operations and Mod keep
their inputs' integer type.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import ModelError
from compiler.ir.types import TensorType
from compiler.ops._util import broadcast_shape
from compiler.ops.elementwise import NUMERIC, SIGNED, UNSIGNED, quiet, require_dtype, same_dtype
from compiler.ops.registry import Attr, OpDef, fail, register

INTEGERS = SIGNED + UNSIGNED


def _infer_binary(allowed: tuple[str, ...], result: str | None):
    """Two inputs of one type in `allowed`; the output is `result` (None: the inputs' type)."""
    def infer(node, ins, values):
        dtype = same_dtype(node, ins)
        require_dtype(node, ins[0], allowed)
        return [TensorType(broadcast_shape(ins[0].shape, ins[1].shape), result or dtype)]
    return infer


def _apply(ufunc):
    @quiet
    def reference(node, a, b):
        out = np.asarray(ufunc(a, b))
        return out if out.dtype == np.bool_ else out.astype(a.dtype, copy=False)
    return reference


_COMPARABLE = NUMERIC + ("bool",)
for _name, _ufunc, _since, _doc in (
        ("Equal", np.equal, 7, "a == b"), ("Greater", np.greater, 7, "a > b"),
        ("Less", np.less, 7, "a < b"), ("GreaterOrEqual", np.greater_equal, 12, "a >= b"),
        ("LessOrEqual", np.less_equal, 12, "a <= b")):
    register(OpDef(_name, "elementwise", _infer_binary(_COMPARABLE, "bool"), _apply(_ufunc),
                   inputs=(2, 2), since=_since, doc=f"{_doc}, as bool, broadcasting"))

for _name, _ufunc in (("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)):
    register(OpDef(_name, "elementwise", _infer_binary(("bool",), "bool"), _apply(_ufunc),
                   inputs=(2, 2), since=7, doc=f"logical {_name.lower()} of bools, broadcasting"))

for _name, _ufunc in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                      ("BitwiseXor", np.bitwise_xor)):
    register(OpDef(_name, "elementwise", _infer_binary(INTEGERS, None), _apply(_ufunc),
                   inputs=(2, 2), since=18, doc=f"bitwise {_name[7:].lower()} of integers"))


def _infer_not(allowed):
    def infer(node, ins, values):
        require_dtype(node, ins[0], allowed)
        return [TensorType(ins[0].shape, ins[0].dtype)]
    return infer


register(OpDef("Not", "elementwise", _infer_not(("bool",)), lambda node, x: np.logical_not(x),
               doc="logical not of a bool"))
register(OpDef("BitwiseNot", "elementwise", _infer_not(INTEGERS), lambda node, x: np.invert(x),
               since=18, doc="every bit flipped"))


def _infer_shift(node, ins, values):
    if node.attrs["direction"] not in ("LEFT", "RIGHT"):
        fail(f"BitShift's direction must be LEFT or RIGHT, not {node.attrs['direction']!r}")
    return _infer_binary(INTEGERS, None)(node, ins, values)


def _bit_shift(node, x, amount):
    x, amount = np.broadcast_arrays(x, amount.astype(np.int64))
    width = x.dtype.itemsize * 8
    # A shift by a negative amount or by the width or more moves every bit out: 0, or the sign
    # for a right shift of a signed integer (C leaves it undefined; numpy wraps the amount).
    outside = (amount < 0) | (amount >= width)
    amount = np.where(outside, 0, amount)
    if node.attrs["direction"] == "RIGHT":
        fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
        return np.where(outside, fill, np.right_shift(x, amount.astype(x.dtype))).astype(x.dtype)
    bits = x.view(f"u{x.dtype.itemsize}")  # left shifts of signed integers wrap
    shifted = np.left_shift(bits, amount.astype(bits.dtype)).view(x.dtype)
    return np.where(outside, 0, shifted).astype(x.dtype)


register(OpDef("BitShift", "elementwise", _infer_shift, _bit_shift, inputs=(2, 2), since=11,
               attrs={"direction": Attr("string", "RIGHT", "LEFT or RIGHT")},
               doc="x shifted by y bits (arithmetic right shifts of signed integers)"))


def _infer_mod(node, ins, values):
    return _infer_binary(NUMERIC, None)(node, ins, values)


@quiet
def _mod(node, a, b):
    if a.dtype.kind != "f" and not np.all(b):
        raise ModelError("integer modulo by zero (its result is undefined)")
    if node.attrs["fmod"]:
        return np.fmod(a, b).astype(a.dtype)
    return np.mod(a, b).astype(a.dtype)


register(OpDef("Mod", "elementwise", _infer_mod, _mod, inputs=(2, 2), since=10,
               attrs={"fmod": Attr("int", 0, "1: the result takes the dividend's sign (C fmod); "
                                             "0: the divisor's")},
               doc="remainder of a / b, broadcasting"))


def _infer_where(node, ins, values):
    require_dtype(node, ins[0], ("bool",), "condition")
    dtype = same_dtype(node, ins[1:])
    return [TensorType(broadcast_shape(*(t.shape for t in ins)), dtype)]


register(OpDef("Where", "elementwise", _infer_where,
               lambda node, c, x, y: np.where(c, x, y).astype(x.dtype), inputs=(3, 3), since=9,
               doc="x where the condition holds, else y, broadcasting"))
