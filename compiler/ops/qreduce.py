"""IntReduce (Kiln only): TFLite Micro's 8-bit SUM and MEAN over any axes, in integers.

The stored values are summed in int32 over the axes, the input's zero point times the count
taken away, and the sum requantized by in_scale / out_scale (a Q31 multiplier and a shift, as
QuantizeMultiplier forms them). MEAN folds 1 / count into the multiplier as TFLite does: the
multiplier shifted left by floor(log2 count) (at most 32, and no further than the shift
allows) and divided by the count, the shift lowered by as much.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.types import QuantParams, TensorType
from compiler.ops._util import normalize_axes
from compiler.ops.registry import Attr, OpDef, fail, register
from compiler.qmath.requant import RANGES, multiply_by_quantized_multiplier


def mean_multiplier(multiplier: int, shift: int, count: int) -> tuple[int, int]:
    """The (multiplier, shift) of a mean over `count` values (TFLite's QuantizedMeanOrSum)."""
    bits = min(count.bit_length() - 1, 32, 31 + shift)
    return int((multiplier << bits) // count), shift - bits


def _axes(node, rank: int) -> tuple[int, ...]:
    return tuple(sorted(normalize_axes(node.attrs["axes"], rank)))


def _infer(node, ins, values):
    x = ins[0]
    if x.dtype not in ("int8", "uint8"):
        fail(f"IntReduce takes 8-bit values, got {x.dtype}")
    axes = _axes(node, x.rank)
    if node.attrs["keepdims"]:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    quant = QuantParams((float(node.attrs["y_scale"]),), (int(node.attrs["y_zero_point"]),))
    return [TensorType(shape, x.dtype, quant)]


def _reference(node, x):
    axes = _axes(node, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    total = x.astype(np.int64).sum(axis=axes, keepdims=bool(node.attrs["keepdims"]))
    shifted = total - node.attrs["x_zero_point"] * count
    multiplier, shift = node.attrs["multiplier"], node.attrs["shift"]
    if node.attrs["mean"]:
        multiplier, shift = mean_multiplier(multiplier, shift, count)
    y = multiply_by_quantized_multiplier(shifted, multiplier, shift) + node.attrs["y_zero_point"]
    low, high = RANGES[x.dtype.name]
    return np.clip(y, low, high).astype(x.dtype)


register(OpDef("IntReduce", "reduce", _infer, _reference, inputs=(1, 1), onnx=False, attrs={
    "axes": Attr("ints", doc="Kiln only: the axes summed"),
    "keepdims": Attr("int", 0, "Kiln only: 1 keeps the summed axes with size 1"),
    "mean": Attr("int", 0, "Kiln only: 1 divides by the count (MEAN), 0 sums (SUM)"),
    "x_zero_point": Attr("int", 0, "Kiln only: the input's zero point"),
    "y_scale": Attr("float", 1.0, "Kiln only: the output's scale (its type's quantization)"),
    "y_zero_point": Attr("int", 0, "Kiln only: the output's zero point"),
    "multiplier": Attr("int", doc="Kiln only: Q31 multiplier of in_scale / out_scale"),
    "shift": Attr("int", doc="Kiln only: its left shift (negative: right)")},
    doc="Kiln only: TFLite's 8-bit SUM and MEAN over any axes (int32 sums, requantized)"))
