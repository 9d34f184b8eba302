"""IntDiv (Kiln only): TFLite Micro's 8-bit DIV, broadcasting numpy's way.

The arithmetic is compiler.qmath.tflite_div's (a fixed-point reciprocal of the divisor, no
float); the multiplier and shift are in1 / (in2 out) in QuantizeMultiplier's form, low and high
the fused activation's range.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.tflite_div import div_int8


def _infer(node, ins, values):
    a, b = ins
    if a.dtype != "int8" or b.dtype != "int8":
        fail(f"IntDiv takes two int8 inputs, got {a.dtype} and {b.dtype}")
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    quant = QuantParams((float(node.attrs["y_scale"]),), (int(node.attrs["y_zero_point"]),))
    return [TensorType(shape, "int8", quant)]


def _reference(node, a, b):
    return div_int8(a, b, node.attrs)


register(OpDef("IntDiv", "elementwise", _infer, _reference, inputs=(2, 2), onnx=False, attrs={
    "a_zero_point": Attr("int", 0, "Kiln only: the dividend's zero point"),
    "b_zero_point": Attr("int", 0, "Kiln only: the divisor's zero point"),
    "multiplier": Attr("int", doc="Kiln only: Q31 multiplier of in1 / (in2 out)"),
    "shift": Attr("int", doc="Kiln only: its shift"),
    "low": Attr("int", -128, "Kiln only: the fused activation's lowest code"),
    "high": Attr("int", 127, "Kiln only: its highest code"),
    "y_scale": Attr("float", 1.0, "Kiln only: the output's scale"),
    "y_zero_point": Attr("int", 0, "Kiln only: the output's zero point")},
    doc="Kiln only: TFLite's 8-bit DIV (a fixed-point reciprocal of the divisor)"))
