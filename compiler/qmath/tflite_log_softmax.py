"""TFLite Micro's 8-bit LOG_SOFTMAX, bit for bit (reference_ops::LogSoftmaxQuantized).

A row's values enter through their distance below the row's maximum: each distance within the
input radius is rescaled into Q5.26 (the softmax's multiplier) and its exponential summed in
Q12.19; the log of the sum is gemmlowp's log_x_for_x_greater_than_or_equal_to_1 (a rational
approximation on the mantissa plus the exponent times log 2) in Q5.26; each output is
(diff - log sum) in Q5.26 rounded into 16/256 steps, plus 127. Distances beyond a cut-off (the
input radius, or where the result would fall below -128 anyway) give -128. The output is
always at scale 16/256, zero point 127, as TFLite Micro requires of the tensor.
"""

from __future__ import annotations

import numpy as np

from compiler.qmath.gemmlowp import exp_on_negative_values, one_over_one_plus_x
from compiler.qmath.requant import (
    INT32_MAX,
    INT32_MIN,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    wrap_int32,
)
from compiler.qmath.requant import saturating_rounding_doubling_high_mul as mul
from compiler.qmath.tflite_softmax import softmax_params

INPUT_BITS, SUM_BITS, OUTPUT_BITS = 5, 12, 4  # Q5.26 diffs, Q12.19 sum, 4 bits out
OUTPUT_SCALE, OUTPUT_ZERO_POINT = 16 / 256, 127
ACCUM_BITS = INPUT_BITS + 1  # the log's accumulator: one bit of headroom
LOG_2, SQRT_SQRT_HALF, SQRT_HALF = 1488522236, 1805811301, 1518500250
ONE_QUARTER = 536870912
ALPHA_N, ALPHA_D, ALPHA_I, ALPHA_F = 117049297, 127690142, 1057819769, 638450708


def params(input_scale: float) -> dict[str, int]:
    """PreprocessLogSoftmaxScalingExp and CalculateInputRadius for beta 1 (log_softmax.cc)."""
    multiplier, shift, diff_min = softmax_params(1.0, input_scale)
    reverse = (1 << (31 - shift)) / float(multiplier)
    reverse_multiplier, reverse_shift = (int(v[0]) for v in quantize_multiplier(
        np.array([reverse])))
    return {"multiplier": multiplier, "shift": shift, "diff_min": diff_min,
            "reverse_multiplier": reverse_multiplier, "reverse_shift": reverse_shift}


def diffs_in_q5(distance: np.ndarray, p: dict) -> np.ndarray:
    """-distance rescaled into Q5.26: MultiplyByQuantizedMultiplier with the left shift."""
    return multiply_by_quantized_multiplier(-np.asarray(distance, np.int64), p["multiplier"],
                                            p["shift"])


def exp_terms(distance: np.ndarray, p: dict) -> np.ndarray:
    """Each distance's exponential in Q12.19 (0 beyond the input radius)."""
    distance = np.asarray(distance, np.int64)
    exps = rounding_divide_by_pot(exp_on_negative_values(diffs_in_q5(distance, p), INPUT_BITS),
                                  SUM_BITS)
    return np.where(-distance >= p["diff_min"], exps, 0)


def _clz(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.int64) & 0xFFFFFFFF
    _, exponent = np.frexp(np.maximum(x, 1).astype(np.float64))
    return np.where(x == 0, 32, 32 - exponent.astype(np.int64))


def _times_pot(x: np.ndarray, exponent) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOTParam for exponents >= 0."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    threshold = (np.int64(1) << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def _saturate(x: np.ndarray) -> np.ndarray:
    return np.clip(x, INT32_MIN, INT32_MAX)


def log_of_sum(total: np.ndarray) -> np.ndarray:
    """log_x_for_x_greater_than_or_equal_to_1<5> of Q12.19 sums (>= 1), as Q5.26 raws."""
    z_a = np.asarray(total, np.int64)
    quarter = quarter_in_accumulator()
    a_headroom = _clz(z_a)
    r_a = _times_pot(mul(_times_pot(z_a, a_headroom - 1), SQRT_HALF), 1)
    a_adjust = _saturate(_times_pot(SUM_BITS - a_headroom, 31 - ACCUM_BITS) + quarter)
    z_b = mul(z_a, SQRT_HALF)
    b_headroom = _clz(z_b) - 1
    r_b = _times_pot(z_a, b_headroom)
    b_adjust = _saturate(_times_pot(SUM_BITS - b_headroom, 31 - ACCUM_BITS) - quarter)
    r = np.minimum(r_a, r_b)
    adjust = np.maximum(a_adjust, b_adjust)
    half_sum = r + SQRT_SQRT_HALF  # gemmlowp's RoundingHalfSum
    p = np.where(half_sum >= 0, half_sum + 1, half_sum - 1)
    p = np.sign(p) * (np.abs(p) // 2)
    q = wrap_int32(r - SQRT_SQRT_HALF)
    q = wrap_int32(q + q)
    square = mul(q, q)
    num = wrap_int32(mul(q, r) + mul(mul(q, square), ALPHA_N))
    inner = wrap_int32(wrap_int32(ALPHA_I + q) + mul(ALPHA_D, square))
    denominator = wrap_int32(mul(p, inner) + mul(ALPHA_F, q))
    reciprocal = one_over_one_plus_x(denominator)
    scaled = rounding_divide_by_pot(num, ACCUM_BITS)
    total_log = wrap_int32(mul(adjust, LOG_2) + mul(scaled, reciprocal))
    return _times_pot(total_log, ACCUM_BITS - INPUT_BITS)


def quarter_in_accumulator() -> int:
    """1/4 rescaled into the log's accumulator (Rescale<ACCUM_BITS>)."""
    return int(rounding_divide_by_pot(np.int64(ONE_QUARTER), ACCUM_BITS))


def cutoff(log_sum: np.ndarray, p: dict) -> np.ndarray:
    """The adjusted diff_min: distances beyond it give -128."""
    shifted = wrap_int32(np.asarray(log_sum, np.int64) + INT32_MIN)
    reach = multiply_by_quantized_multiplier(shifted, p["reverse_multiplier"],
                                             p["reverse_shift"])
    return np.maximum(p["diff_min"] - 1, reach)


def output_codes(distance: np.ndarray, log_sum: np.ndarray, p: dict) -> np.ndarray:
    """Each element's int8 code from its distance and its row's log sum."""
    distance = np.asarray(distance, np.int64)
    shifted = wrap_int32(diffs_in_q5(distance, p) - log_sum)
    out = rounding_divide_by_pot(shifted, 31 - INPUT_BITS - OUTPUT_BITS) + OUTPUT_ZERO_POINT
    keep = -distance > cutoff(log_sum, p)
    return np.where(keep, np.clip(out, -128, 127), -128)


def log_softmax_int8(x: np.ndarray, input_scale: float) -> np.ndarray:
    """LOG_SOFTMAX over the last axis of an int8 tensor."""
    p = params(input_scale)
    distance = x.max(axis=-1, keepdims=True).astype(np.int64) - x.astype(np.int64)
    log_sum = log_of_sum(exp_terms(distance, p).sum(axis=-1, keepdims=True))
    return output_codes(distance, log_sum, p).astype(np.int8)
