"""IntL2Normalize (Kiln only): TFLite Micro's 8-bit L2_NORMALIZATION over the last axis.

Per row the int32 sum of (x - zp)^2 gives 1 / sqrt(sum) as a Q31 multiplier and a shift
(GetInvSqrtQuantizedMultiplierExp, gemmlowp's Newton steps; a sum of 0 or 1 gives the largest
multiplier), and each x - zp is requantized by it with 7 more bits of left shift: the output is
always at scale 1/128, zero point 0, whatever its tensor states (TFLite Micro ignores it).
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.requant import multiply_by_quantized_multiplier
from compiler.qmath.tflite_tables import inv_sqrt_multiplier

OUTPUT_SHIFT = 7  # kOutputScale: the result in 1/128 steps


def l2_normalize(x: np.ndarray, zero_point: int) -> np.ndarray:
    """The int8 result of every row of x (last axis), TFLite Micro's arithmetic."""
    centered = x.astype(np.int64) - zero_point
    rows = centered.reshape(-1, x.shape[-1] if x.ndim else 1)
    out = np.empty_like(rows)
    for i, row in enumerate(rows):
        multiplier, shift = inv_sqrt_multiplier(int((row * row).sum()))
        out[i] = multiply_by_quantized_multiplier(row, multiplier, shift + OUTPUT_SHIFT)
    return np.clip(out, -128, 127).astype(np.int8).reshape(x.shape)


def _infer(node, ins, values):
    x = ins[0]
    if x.dtype != "int8" or x.rank < 1:
        fail(f"IntL2Normalize takes an int8 tensor of rank 1 or more, got {x}")
    quant = QuantParams((float(node.attrs["y_scale"]),), (int(node.attrs["y_zero_point"]),))
    return [TensorType(x.shape, "int8", quant)]


def _reference(node, x):
    return l2_normalize(x, node.attrs["x_zero_point"])


register(OpDef("IntL2Normalize", "norm", _infer, _reference, inputs=(1, 1), onnx=False,
               attrs={"x_zero_point": Attr("int", 0, "Kiln only: the input's zero point"),
                      "y_scale": Attr("float", 1 / 128, "Kiln only: the output's stated scale"),
                      "y_zero_point": Attr("int", 0, "Kiln only: its stated zero point")},
               doc="Kiln only: TFLite's 8-bit L2_NORMALIZATION (1 / sqrt of each row's sum of "
                   "squares in fixed point, results in 1/128 steps)"))
