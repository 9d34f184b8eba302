"""What an integer operator does with its scales, in numbers a person can check.

The Properties panel and `kiln inspect` show, per output channel, the real multiplier
in_scale x w_scale / out_scale and what each rule makes of it: onnxruntime's float32 scale,
TFLite Micro's Q31 multiplier and shift. And for a quantized tensor the formula that turns its
integers into real values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.ir.graph import Constant, Node
from compiler.ir.types import QuantParams
from compiler.qmath.requant import onnx_scale, tflite_multiplier

# Where each integer operator keeps (input scale, weight scale, output scale, output zero point).
_SCALE_INPUTS = {"QLinearConv": (1, 4, 6, 7), "QLinearMatMul": (1, 4, 6, 7),
                 "QGemm": (1, 4, 7, 8)}


@dataclass(frozen=True)
class ChannelRequant:
    """How one output channel's accumulator becomes its 8-bit output."""

    channel: int
    real: float  # in_scale x w_scale / out_scale, in double
    onnx_scale: float  # onnxruntime's float32 scale
    multiplier: int  # TFLite Micro's Q31 multiplier
    shift: int  # and its power-of-two shift


def requant_channels(node: Node) -> list[ChannelRequant]:
    """Per output channel, the requantization of an integer operator; [] for other nodes."""
    where = _SCALE_INPUTS.get(node.op)
    if where is None:
        return []
    values = [node.inputs[i] for i in where[:3]]
    if not all(isinstance(v, Constant) for v in values):
        return []
    x_scale, w_scale, y_scale = (np.asarray(v.data, np.float32).reshape(-1) for v in values)
    real = (np.float64(x_scale[0]) * w_scale.astype(np.float64)) / np.float64(y_scale[0])
    scales = onnx_scale(x_scale[0], w_scale, y_scale[0])
    multipliers, shifts = tflite_multiplier(x_scale[0], w_scale, y_scale[0])
    return [ChannelRequant(i, float(real[i]), float(scales[i]), int(multipliers[i]),
                           int(shifts[i])) for i in range(w_scale.size)]


def real_value_formula(quant: QuantParams) -> str:
    """`real = scale x (q - zero_point)` with the numbers (per-axis: a summary)."""
    if len(quant.scale) == 1:
        zp = quant.zero_point[0]
        zp_text = f"({zp})" if zp < 0 else str(zp)
        return f"real = {quant.scale[0]:.6g} × (q − {zp_text})"
    low, high = min(quant.scale), max(quant.scale)
    return (f"real = scale[c] × (q − zero_point[c]) over axis {quant.axis}: "
            f"{len(quant.scale)} scales from {low:.4g} to {high:.4g}")


def summary(channels: list[ChannelRequant]) -> str:
    """One line: how many channels and the range of their multipliers and shifts."""
    if not channels:
        return ""
    reals = [c.real for c in channels]
    shifts = sorted({c.shift for c in channels})
    shift_text = str(shifts[0]) if len(shifts) == 1 else f"{shifts[0]} to {shifts[-1]}"
    return (f"{len(channels)} output channel{'s' if len(channels) > 1 else ''}: real multiplier "
            f"{min(reals):.4g} to {max(reals):.4g}, shift {shift_text}")
