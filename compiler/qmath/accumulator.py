"""The int32 accumulator of a QDQ unit fused into an integer operator: its bias, and its reach.

Kiln's integer operators accumulate in int32 and wrap, as onnxruntime's and TFLite Micro's
kernels do; the float graph of a QDQ model (DequantizeLinear, Conv, QuantizeLinear) never wraps.
So a unit becomes an integer operator only when the sum of its int32 bias and every product of
its 8-bit inputs stays within int32 for every input (or, in a channel that may leave it, when
every value, wrapped or not, requantizes to the zero point: a dead channel whose weight scale
is ~1e-32 and whose bias a quantizer clipped to int32), and only when the bias's DequantizeLinear
means what the operator's bias means: scale input scale * weight scale, and its zero point
subtracted in int32 (wrapping, as onnxruntime's DequantizeLinear and Kiln's do).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.qmath.check import RELATIVE_TOLERANCE
from compiler.qmath.requant import (
    INT32_MAX,
    INT32_MIN,
    RANGES,
    tflite_multiplier,
    wrap_int32,
)


@dataclass(frozen=True)
class BiasDequantize:
    """The parts of a bias's DequantizeLinear: int32 integers, scale, zero point (or None)."""

    integers: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray | None


@dataclass(frozen=True)
class FoldedBias:
    """What a unit's integer operator takes as its bias, or why the unit must stay float.

    `bias` is the int32 bias minus its zero point, wrapped to int32 as DequantizeLinear
    computes it (None: the unit has no bias); `changed` says it differs from the file's
    integers; `problem` is a clause naming the reason, or None.
    """

    bias: np.ndarray | None = None
    changed: bool = False
    problem: str | None = None


def weight_rows(integers: np.ndarray, zero_point: np.ndarray | None, output_axis: int
                ) -> np.ndarray:
    """Each output's integer weights minus their zero point, as rows [N, K] of int64."""
    data = np.asarray(integers, np.int64)
    rows = np.moveaxis(data, output_axis, 0).reshape(data.shape[output_axis], -1)
    return rows - (0 if zero_point is None else np.asarray(zero_point, np.int64).reshape(-1, 1))


def accumulator_range(rows: np.ndarray, x_dtype: str, x_zero_point: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Per output, the least and the greatest sum of (x - x_zero_point) * rows[n, k] over x.

    `rows` holds each output's weights minus their zero point, [N, K]; every x ranges over its
    whole 8-bit type. A padding tap reads the zero point and adds 0, inside the range.
    """
    low, high = RANGES[x_dtype]
    w = np.asarray(rows, np.int64)
    ends = (w * (low - int(x_zero_point)), w * (high - int(x_zero_point)))
    return np.minimum(*ends).sum(axis=1), np.maximum(*ends).sum(axis=1)


def fold_bias(rows: np.ndarray, x_dtype: str, x_zero_point: int,
              bias: BiasDequantize | None, *, mode: str, x_scale, w_scale, y_scale,
              fully_connected: bool) -> FoldedBias:
    """The bias a fused unit's integer operator takes, or the reason it cannot be fused.

    The bias's scale must equal input scale * weight scale in float32 (what the integer
    operator assumes); its zero point is subtracted as DequantizeLinear does, in int32; then
    bias plus accumulator, times the tflite rule's left shift, must stay within int32 for
    every input, except in a channel where anything up to 2**31 plus that reach, times the
    real multiplier in_scale * w_scale / out_scale, stays under 0.25: every value there,
    wrapped or not, rounds to the zero point under either rule (double rounding included).
    """
    n = rows.shape[0]
    per_tensor = np.asarray(w_scale).size == 1
    w_scale = np.broadcast_to(np.asarray(w_scale, np.float32).reshape(-1), (n,))
    folded = np.zeros(n, np.int64)
    changed = False
    if bias is not None:
        if bias.integers.size not in (1, n) or bias.scale.size not in (1, n):
            return FoldedBias(problem=f"its bias has {bias.integers.size} values for {n} "
                                      "outputs")
        want = np.float32(x_scale) * w_scale
        have = np.broadcast_to(np.asarray(bias.scale, np.float32).reshape(-1), (n,))
        # Converters (tf2onnx) round the bias scale their own way, an ulp or so off the
        # float32 product. onnxruntime's QLinearConv has no bias scale at all and TFLite
        # Micro allows |product - bias scale| up to 0.02 output steps: both add the int32
        # bias as it is. So does Kiln, within the tolerance the loader checks.
        with np.errstate(divide="ignore", invalid="ignore"):
            off = ~(np.abs(have.astype(np.float64) - want) <= RELATIVE_TOLERANCE
                    * np.abs(want.astype(np.float64)))
        if np.any(off):
            at = int(np.argmax(off))
            return FoldedBias(problem=f"its bias is dequantized with scale {float(have[at]):.9g}"
                                      f", not input scale x weight scale "
                                      f"{float(want[at]):.9g}")
        folded = np.broadcast_to(np.asarray(bias.integers, np.int64).reshape(-1), (n,))
        if bias.zero_point is not None and np.any(bias.zero_point):
            folded = wrap_int32(folded - np.asarray(bias.zero_point, np.int64).reshape(-1))
            changed = True
    low, high = accumulator_range(rows, x_dtype, x_zero_point)
    low, high = low + folded, high + folded
    if mode == "tflite":  # TFLite Micro shifts the accumulator left first, in int32
        _, shift = tflite_multiplier(x_scale, w_scale[:1] if per_tensor else w_scale, y_scale,
                                     product_in_float=fully_connected and per_tensor)
        scale = np.int64(1) << np.maximum(np.broadcast_to(shift, (n,)), 0).astype(np.int64)
        low, high = low * scale, high * scale
    real = np.float64(np.float32(x_scale)) * w_scale.astype(np.float64) / np.float64(
        np.float32(y_scale))
    reach = np.maximum(np.abs(low), np.abs(high))
    negligible = (float(1 << 31) + reach.astype(np.float64)) * real < 0.25
    wraps = ((low < INT32_MIN) | (high > INT32_MAX)) & ~negligible
    if np.any(wraps):
        low, high = low[wraps], high[wraps]
        reach = int(high.max()) if high.max() > INT32_MAX else int(low.min())
        return FoldedBias(problem=f"its int32 accumulator, bias included, could reach {reach} "
                                  "and wrap, where the float graph does not")
    out = None if bias is None else folded.astype(np.int32)
    return FoldedBias(out, changed)
