"""IntRescaledSum and IntSquaredDifference (Kiln only): TFLite Micro's rescaled 8-bit sums.

For ADD_N and CUMSUM each stored value is rescaled as ADD rescales its inputs: (q - zp)
shifted left by 20 bits, times the input multiplier (in / (2 in), a half), so that sums keep
their precision; the sum starts from the rescaled value of -zp (TFLite Micro's accumulator
starts at its input offset, not at 0), and the total is requantized by 2 in / (2^20 out).
ADD_N sums its inputs element by element; CUMSUM runs the sum along an axis, exclusive and
reversed as asked. SQUARED_DIFFERENCE rescales its two inputs likewise (7 bits of left shift),
squares their difference in int32 and requantizes by (2 max scale)^2 / (2^14 out).
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops._util import normalize_axis
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.requant import RANGES, multiply_by_quantized_multiplier
from compiler.qmath.tables import codes

LEFT_SHIFT = 20


def rescaled(node, values: np.ndarray) -> np.ndarray:
    """The rescaled int32 of each stored value (int64 arithmetic, int32 results)."""
    shifted = (values.astype(np.int64) - node.attrs["x_zero_point"]) << LEFT_SHIFT
    return multiply_by_quantized_multiplier(shifted, node.attrs["input_multiplier"],
                                            node.attrs["input_shift"])


def start_value(node) -> int:
    """Where TFLite Micro's accumulator starts: the rescaled input offset, -zp."""
    shifted = np.array([-node.attrs["x_zero_point"] << LEFT_SHIFT])
    return int(multiply_by_quantized_multiplier(shifted, node.attrs["input_multiplier"],
                                                 node.attrs["input_shift"])[0])


def rescaled_table(node) -> np.ndarray:
    """rescaled() of every int8 code, in bit-pattern order (a kernel's lookup table)."""
    return rescaled(node, codes("int8")).astype(np.int32)


def _output(node, total: np.ndarray, dtype) -> np.ndarray:
    """The rescaled sums requantized into the output's type, clamped."""
    y = multiply_by_quantized_multiplier(total, node.attrs["output_multiplier"],
                                         node.attrs["output_shift"]) + node.attrs["y_zero_point"]
    low, high = RANGES[np.dtype(dtype).name]
    return np.clip(y, low, high).astype(dtype)


def _infer(node, ins, values):
    x = ins[0]
    if x.dtype != "int8" or any(t.shape != x.shape or t.dtype != "int8" for t in ins):
        fail("IntRescaledSum takes int8 inputs of one shape")
    if node.attrs["mode"] not in ("add_n", "cumsum"):
        fail(f"IntRescaledSum's mode must be add_n or cumsum, not {node.attrs['mode']!r}")
    if node.attrs["mode"] == "cumsum":
        if len(ins) != 1:
            fail("IntRescaledSum's cumsum takes one input")
        normalize_axis(node.attrs["axis"], x.rank)
    quant = QuantParams((float(node.attrs["y_scale"]),), (int(node.attrs["y_zero_point"]),))
    return [TensorType(x.shape, x.dtype, quant)]


def _reference(node, *inputs):
    start = start_value(node)
    if node.attrs["mode"] == "add_n":
        return _output(node, start + sum(rescaled(node, x) for x in inputs), inputs[0].dtype)
    x = inputs[0]
    axis = normalize_axis(node.attrs["axis"], x.ndim)
    steps = rescaled(node, np.flip(x, axis) if node.attrs["reverse"] else x)
    totals = start + np.cumsum(steps, axis=axis)
    if node.attrs["exclusive"]:
        totals = totals - steps
    y = _output(node, totals, x.dtype)
    return np.flip(y, axis) if node.attrs["reverse"] else y


register(OpDef("IntRescaledSum", "elementwise", _infer, _reference, inputs=(1, -1), onnx=False,
               attrs={
                   "mode": Attr("string", "add_n", "Kiln only: add_n or cumsum"),
                   "axis": Attr("int", 0, "Kiln only: cumsum's axis"),
                   "exclusive": Attr("int", 0, "Kiln only: cumsum leaves each value out"),
                   "reverse": Attr("int", 0, "Kiln only: cumsum runs from the end"),
                   "x_zero_point": Attr("int", 0, "Kiln only: the inputs' zero point"),
                   "input_multiplier": Attr("int", doc="Kiln only: Q31 input multiplier"),
                   "input_shift": Attr("int", doc="Kiln only: its shift (0 or negative)"),
                   "output_multiplier": Attr("int", doc="Kiln only: Q31 output multiplier"),
                   "output_shift": Attr("int", doc="Kiln only: its shift"),
                   "y_scale": Attr("float", 1.0, "Kiln only: the output's scale"),
                   "y_zero_point": Attr("int", 0, "Kiln only: the output's zero point")},
               doc="Kiln only: TFLite's 8-bit ADD_N and CUMSUM (inputs rescaled as ADD's)"))


# -- IntSquaredDifference ------------------------------------------------------------------------

SQUARED_DIFFERENCE_SHIFT = 7  # squared_difference.cc: the 8-bit left shift


def rescaled_input(values: np.ndarray, zero_point: int, multiplier: int, shift: int
                   ) -> np.ndarray:
    """(q - zp) << 7 times a multiplier below one: SQUARED_DIFFERENCE's rescaled input."""
    shifted = (values.astype(np.int64) - zero_point) << SQUARED_DIFFERENCE_SHIFT
    return multiply_by_quantized_multiplier(shifted, multiplier, shift)


def _infer_squared(node, ins, values):
    a, b = ins
    if a.dtype != "int8" or b.dtype != "int8":
        fail("IntSquaredDifference takes two int8 inputs")
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    quant = QuantParams((float(node.attrs["y_scale"]),), (int(node.attrs["y_zero_point"]),))
    return [TensorType(shape, "int8", quant)]


def _squared_difference(node, a, b):
    attrs = node.attrs
    diff = (rescaled_input(a, attrs["a_zero_point"], attrs["a_multiplier"], attrs["a_shift"])
            - rescaled_input(b, attrs["b_zero_point"], attrs["b_multiplier"], attrs["b_shift"]))
    return _output(node, diff * diff, np.int8)


register(OpDef("IntSquaredDifference", "elementwise", _infer_squared, _squared_difference,
               inputs=(2, 2), onnx=False, attrs={
                   **{f"{side}_{what}": Attr("int", doc=f"Kiln only: input {side}'s {what}")
                      for side in "ab" for what in ("zero_point", "multiplier", "shift")},
                   "output_multiplier": Attr("int", doc="Kiln only: Q31 output multiplier"),
                   "output_shift": Attr("int", doc="Kiln only: its shift"),
                   "y_scale": Attr("float", 1.0, "Kiln only: the output's scale"),
                   "y_zero_point": Attr("int", 0, "Kiln only: the output's zero point")},
               doc="Kiln only: TFLite's 8-bit SQUARED_DIFFERENCE (inputs rescaled, squared, "
                   "requantized)"))
