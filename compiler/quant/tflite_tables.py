"""TFLite Micro's one-input int8 operators as 256-entry tables, computed with its arithmetic.

RELU requantizes (x - zp_in) by in_scale / out_scale (QuantizeMultiplier, in double) and clamps
below at the output's zero; RELU6 only clamps the stored integers between the input's
quantized 0 and 6; LEAKY_RELU requantizes by two multipliers, in_scale * alpha / out_scale
and in_scale / out_scale, both formed in float first as TFLite Micro does; QUANTIZE from int8 to
int8 requantizes by in_scale / out_scale. Every entry is exact integer arithmetic
(compiler/quant/requant.py), so the table equals the kernel on every code.
"""

from __future__ import annotations

import numpy as np

from compiler.quant.requant import RANGES, multiply_by_quantized_multiplier, quantize_multiplier
from compiler.quant.tables import codes


def _f32(x) -> float:
    return float(np.float32(x))


def round_away(x) -> int:
    """C's roundf / std::round of a float32: half away from zero (exact, in float64)."""
    x = float(np.float32(x))
    return int(np.sign(x) * np.floor(abs(x) + 0.5))


def _requantize(x: np.ndarray, zp_in: int, real: float, zp_out: int) -> np.ndarray:
    multiplier, shift = quantize_multiplier(np.array([real]))
    return zp_out + multiply_by_quantized_multiplier(x - zp_in, multiplier[0], shift[0])


def _table(values: np.ndarray, dtype: str, low: int | None = None, high: int | None = None):
    qmin, qmax = RANGES[dtype]
    return np.clip(values, qmin if low is None else low, qmax if high is None else high
                   ).astype(dtype)


def relu(dtype: str, in_scale, in_zp: int, out_scale, out_zp: int) -> np.ndarray:
    """RELU: requantized, clamped below at max(qmin, zp_out + round(0 / scale))."""
    values = _requantize(codes(dtype), in_zp, _f32(in_scale) / _f32(out_scale), out_zp)
    return _table(values, dtype, low=max(RANGES[dtype][0], out_zp))


def clamp(dtype: str, in_scale, in_zp: int, low: float, high: float) -> np.ndarray:
    """RELU6: the stored integers clamped to zp + round(bound / scale)."""
    scale = np.float32(in_scale)
    q_low = in_zp + round_away(np.float32(low) / scale)
    q_high = in_zp + round_away(np.float32(high) / scale)
    return _table(np.clip(codes(dtype), q_low, q_high), dtype)


def leaky_relu(dtype: str, alpha: float, in_scale, in_zp: int, out_scale, out_zp: int
               ) -> np.ndarray:
    """LEAKY_RELU: identity and alpha multipliers, each formed in float32 then widened."""
    x = codes(dtype)
    identity = _requantize(x, in_zp, _f32(np.float32(in_scale) / np.float32(out_scale)), out_zp)
    alpha_real = _f32(np.float32(in_scale) * np.float32(alpha) / np.float32(out_scale))
    negative = _requantize(x, in_zp, alpha_real, out_zp)
    return _table(np.where(x - in_zp >= 0, identity, negative), dtype)


def requantize(dtype: str, in_scale, in_zp: int, out_scale, out_zp: int) -> np.ndarray:
    """QUANTIZE from one 8-bit quantization to another."""
    values = _requantize(codes(dtype), in_zp, _f32(in_scale) / _f32(out_scale), out_zp)
    return _table(values, dtype)
