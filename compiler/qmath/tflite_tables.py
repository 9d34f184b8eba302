"""TFLite Micro's one-input int8 operators as 256-entry tables, computed with its arithmetic.

RELU requantizes (x - zp_in) by in_scale / out_scale (QuantizeMultiplier, in double) and clamps
below at the output's zero; RELU6 only clamps the stored integers between the input's
quantized 0 and 6; LEAKY_RELU requantizes by two multipliers, in_scale * alpha / out_scale
and in_scale / out_scale, both formed in double as TFLite Micro does; QUANTIZE from int8 to
int8 requantizes by in_scale / out_scale; LOGISTIC and TANH rescale the input into Q4.27 and
apply gemmlowp's fixed-point functions (compiler/qmath/gemmlowp.py); HARD_SWISH is TFLite's
16-bit fixed point. Every entry is exact
integer arithmetic, so the table equals the kernel on every code.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.qmath import gemmlowp
from compiler.qmath.gemmlowp import shift_left_saturating
from compiler.qmath.requant import (
    INT32_MAX,
    RANGES,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from compiler.qmath.requant import saturating_rounding_doubling_high_mul as mul
from compiler.qmath.tables import codes


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
    """LEAKY_RELU: identity and alpha multipliers, each formed in double.

    The float32 scales and alpha are multiplied and divided in double, as the installed TFLite
    Micro forms them (checked on parameters where forming them in float32 first gives another
    multiplier).
    """
    x = codes(dtype)
    xs, ys = np.float64(np.float32(in_scale)), np.float64(np.float32(out_scale))
    identity = _requantize(x, in_zp, float(xs / ys), out_zp)
    negative = _requantize(x, in_zp, float(xs * np.float64(np.float32(alpha)) / ys), out_zp)
    return _table(np.where(x - in_zp >= 0, identity, negative), dtype)


def requantize(dtype: str, in_scale, in_zp: int, out_scale, out_zp: int) -> np.ndarray:
    """QUANTIZE from one 8-bit quantization to another."""
    values = _requantize(codes(dtype), in_zp, _f32(in_scale) / _f32(out_scale), out_zp)
    return _table(values, dtype)


def _sigmoid_params(in_scale) -> tuple[int, int, int]:
    """(multiplier, left shift, input radius) of LOGISTIC and TANH: input in Q4.27 (frexp)."""
    real = float(np.float32(in_scale)) * float(1 << 27)
    fraction, shift = math.frexp(real)
    multiplier = round_away_double(fraction * (1 << 31))
    radius = math.floor(15 * (1 << 27) / 2.0 ** shift)  # CalculateInputRadius(4, shift, 31)
    return multiplier, shift, radius


def round_away_double(x: float) -> int:
    """std::round of a double: half away from zero."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def _transcendental(dtype: str, in_scale, in_zp: int, fn, out_bits: int, out_zp: int):
    multiplier, shift, radius = _sigmoid_params(in_scale)
    x = codes(dtype) - in_zp
    inside = (x > -radius) & (x < radius)
    q4 = multiply_by_quantized_multiplier(np.where(inside, x, 0), multiplier, shift)
    values = rounding_divide_by_pot(fn(q4, 4), 31 - out_bits) + out_zp
    qmin, qmax = RANGES[dtype]
    return _table(np.where(x <= -radius, qmin, np.where(x >= radius, qmax, values)), dtype)


def logistic(dtype: str, in_scale, in_zp: int) -> np.ndarray:
    """LOGISTIC: gemmlowp's logistic on Q4.27, to scale 1/256 and zero point -128."""
    return _transcendental(dtype, in_scale, in_zp, gemmlowp.logistic, 8, -128)


def tanh(dtype: str, in_scale, in_zp: int) -> np.ndarray:
    """TANH: gemmlowp's tanh on Q4.27, to scale 1/128 and zero point 0."""
    return _transcendental(dtype, in_scale, in_zp, gemmlowp.tanh, 7, 0)


# -- HARD_SWISH: TFLite's 16-bit fixed point ------------------------------------------------------

def _int16(x) -> np.ndarray:
    """C's conversion to int16_t (wrapping)."""
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _c_div(x: np.ndarray, d: int) -> np.ndarray:
    """C's integer division (truncating toward zero) of int64 arrays by a positive d."""
    return np.sign(x) * (np.abs(x) // d)


def _srdhm16(a, b) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul of gemmlowp on int16."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    result = _int16(_c_div(ab + nudge, 1 << 15))
    return np.where((a == b) & (a == -(1 << 15)), (1 << 15) - 1, result)


def _sdhm16(a, b) -> np.ndarray:
    """SaturatingDoublingHighMul on int16: truncating toward zero instead of rounding."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    result = _int16(_c_div(a * b, 1 << 15))
    return np.where((a == b) & (a == -(1 << 15)), (1 << 15) - 1, result)


def _shift_left16(x, amount: int) -> np.ndarray:
    return np.clip(np.asarray(x, np.int64) * (1 << amount), -(1 << 15), (1 << 15) - 1)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier."""
    q, shift = (int(v[0]) for v in quantize_multiplier(np.array([real])))
    if q >= (1 << 31) - 1 - (1 << 15):
        return (1 << 15) - 1, shift
    return (q + (1 << 15)) >> 16, shift


def hard_swish(dtype: str, in_scale, in_zp: int, out_scale, out_zp: int) -> np.ndarray:
    """HARD_SWISH: x * relu6(x + 3) / 6 in TFLite's int16 fixed point (reference_ops)."""
    hires_scale = np.float32(1.0 / 128.0) * np.float32(in_scale)
    out_multiplier, out_exponent = _int16_multiplier(
        float(hires_scale / np.float32(out_scale)))
    relu_multiplier, relu_exponent = _int16_multiplier(
        float(hires_scale / np.float32(3.0 / 32768.0)))
    x = _int16(codes(dtype) - in_zp)
    hires = _int16(x * (1 << 7))
    preshift = _srdhm16(hires, out_multiplier)
    reluish = hires
    if relu_exponent > 0:
        reluish = _shift_left16(reluish, relu_exponent - 1)
    reluish = _srdhm16(reluish, relu_multiplier)
    if relu_exponent > 0:
        reluish = _shift_left16(reluish, 1)
    if relu_exponent < 0:
        reluish = rounding_divide_by_pot(reluish, -relu_exponent)
    reluish = _int16((reluish + (1 << 15)) >> 1)
    value = rounding_divide_by_pot(_sdhm16(reluish, preshift), -out_exponent)
    return _table(_int16(value + out_zp), dtype)


def absolute(in_scale, in_zp: int, out_scale, out_zp: int) -> np.ndarray:
    """ABS (int8): |x - zp_in|, requantized, plus zp_out.

    The requantization by in_scale / out_scale (formed in float32) is skipped when the two
    scales are equal, as TFLite Micro skips it.
    """
    value = np.abs(codes("int8") - in_zp)
    if np.float32(in_scale) != np.float32(out_scale):
        multiplier, shift = quantize_multiplier(
            np.array([_f32(np.float32(in_scale) / np.float32(out_scale))]))
        value = multiply_by_quantized_multiplier(value, multiplier[0], shift[0])
    return _table(value + out_zp, "int8")


def elu(in_scale, in_zp: int, out_scale, out_zp: int) -> np.ndarray:
    """ELU (int8): TFLite Micro's float32 table, e^x - 1 below zero, rounded half away."""
    f = np.float32
    x = (f(in_scale) * (codes("int8") - in_zp).astype(f)).astype(f)
    below = (np.exp(x.astype(np.float64)).astype(f) - f(1.0)).astype(f)
    y = np.where(x < 0, below, x).astype(f)
    scaled = (y * (f(1.0) / f(out_scale))).astype(f)
    wide = scaled.astype(np.float64)  # std::round, exactly: |x| + 0.5 is exact in float64
    rounded = (np.sign(wide) * np.floor(np.abs(wide) + 0.5)).astype(f)
    return _table((rounded + f(out_zp)).astype(np.int64), "int8")


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """1 / sqrt(value) as a Q31 multiplier and a left shift (GetInvSqrtQuantizedMultiplierExp).

    gemmlowp's five Newton steps in FixedPoint<int32, 3>, reverse shift -1.
    """
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    pairs = ((32 - value.bit_length()) - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    x_in = value >> 1  # F3 raw
    half_in = int(rounding_divide_by_pot(x_in, 1))
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # F3 one
    for _ in range(5):
        x3 = int(shift_left_saturating(mul(mul(x, x), x), 6))  # F9 -> F3
        diff = _wrap(int(mul(half_three, x)) - int(mul(half_in, x3)))  # F6, wrapping
        x = int(shift_left_saturating(diff, 3))  # F6 -> F3
    x = int(mul(x, 1518500250))  # times sqrt(2) / 2 (F0)
    if shift < 0:
        x = _wrap(x << -shift)
        shift = 0
    return x, -shift


def _wrap(x: int) -> int:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def rsqrt(in_scale, in_zp: int, out_scale, out_zp: int) -> np.ndarray:
    """RSQRT (int8): 1 / sqrt(x - zp_in) in TFLite Micro's integers (a zero input gives 127).

    Codes below the input's zero point are outside RSQRT's domain (TFLite Micro stops with an
    error); their entries hold what the same arithmetic gives for |x - zp_in|.
    """
    scale = 1.0 / float(np.float32(np.sqrt(np.float32(in_scale)) * np.float32(out_scale)))
    multiplier, out_shift = (int(v[0]) for v in quantize_multiplier(np.array([scale])))
    values = []
    for q in codes("int8"):
        value = abs(int(q) - in_zp)
        if value == 0:
            values.append(127)
            continue
        m, s = inv_sqrt_multiplier(value)
        data = int(multiply_by_quantized_multiplier(1, m, s + 20))
        values.append(int(multiply_by_quantized_multiplier(data, multiplier, out_shift - 20))
                      + out_zp)
    return _table(np.array(values), "int8")


def prelu(alpha_code: int, in_scale, in_zp: int, alpha_scale, alpha_zp: int, out_scale,
          out_zp: int) -> np.ndarray:
    """PRELU (int8) for one stored alpha, as TFLite Micro computes it.

    x - zp_in is scaled by in / out when not negative, else (x - zp_in)(alpha - zp_alpha) by
    in x alpha / out; both multipliers are formed in double.
    """
    x = codes("int8") - in_zp
    xs, as_, ys = (np.float64(np.float32(s)) for s in (in_scale, alpha_scale, out_scale))
    m1, s1 = (int(v[0]) for v in quantize_multiplier(np.array([xs / ys])))
    m2, s2 = (int(v[0]) for v in quantize_multiplier(np.array([xs * as_ / ys])))
    positive = multiply_by_quantized_multiplier(x, m1, s1)
    negative = multiply_by_quantized_multiplier(x * (alpha_code - alpha_zp), m2, s2)
    return _table(np.where(x >= 0, positive, negative) + out_zp, "int8")
