"""TFLite Micro's 8-bit softmax, bit for bit: gemmlowp fixed point, no table, no float.

Per row, x - max is rescaled by beta * input_scale into Q5.26, exp() is gemmlowp's polynomial on
[-1/4, 0) with a barrel shifter for the integer part (Q0.31), the sum is kept in Q12.19, its
reciprocal comes from three Newton-Raphson steps, and each output is
RoundingDivideByPOT(reciprocal * exp, bits_over_unit + 31 - 8) - 128. Elements more than
CalculateInputRadius below the maximum contribute nothing and give -128. The parameters are
derived in double as TFLite Micro's softmax_common.cc does. All numpy, vectorized over rows.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.quant.requant import (
    INT32_MAX,
    INT32_MIN,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from compiler.quant.requant import saturating_rounding_doubling_high_mul as _mul

_SCALED_DIFF_BITS = 5  # Q5.26 for the rescaled differences
_ACCUMULATION_BITS = 12  # Q12.19 for the sum of exponentials


def softmax_params(beta: float, input_scale: float) -> tuple[int, int, int]:
    """(multiplier, left shift, diff_min) of PreprocessSoftmaxScaling and CalculateInputRadius."""
    real = min(float(beta) * float(np.float32(input_scale)) * (1 << (31 - _SCALED_DIFF_BITS)),
               float((1 << 31) - 1))
    multiplier, shift = quantize_multiplier(np.array([real]))
    multiplier, shift = int(multiplier[0]), int(shift[0])
    radius = ((1 << _SCALED_DIFF_BITS) - 1) * (1 << (31 - _SCALED_DIFF_BITS)) / (1 << shift)
    return multiplier, shift, -math.floor(radius)


def _shift_left_saturating(x: np.ndarray, bits: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT of gemmlowp with a positive exponent."""
    x = np.asarray(x, np.int64)
    return np.where(x > INT32_MAX >> bits, INT32_MAX,
                    np.where(x < INT32_MIN >> bits, INT32_MIN, x << bits))


def _exp_on_interval(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31: Taylor around -1/8 (gemmlowp)."""
    constant_term = 1895147668  # exp(-1/8)
    one_third = 715827883
    x = a + (1 << 28)  # a + 1/8
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(_mul(x4_over_4 + x3, one_third) + x2, 1)
    return constant_term + _mul(constant_term, x + poly)


# exp(-2**k) in Q0.31 for the barrel shifter, k = -2 .. 4.
_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
           (3, 720401), (4, 242))


def exp_on_negative_values(a: np.ndarray) -> np.ndarray:
    """exp(a) for Q5.26 a <= 0, as Q0.31 (gemmlowp's exp_on_negative_values)."""
    fractional = 31 - _SCALED_DIFF_BITS
    quarter = 1 << (fractional - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(_shift_left_saturating(a_mod, _SCALED_DIFF_BITS))
    remainder = a_mod - a
    for exponent, multiplier in _BARREL:
        bit = (remainder & (1 << (fractional + exponent))) != 0
        result = np.where(bit, _mul(result, multiplier), result)
    return np.where(a == 0, INT32_MAX, result)


def _one_over_one_plus_x(a: np.ndarray) -> np.ndarray:
    """1 / (1 + a) for Q0.31 a in [0, 1): Newton-Raphson as gemmlowp does it."""
    total = a + INT32_MAX
    half_denominator = np.where(total >= 0, total + 1, total - 1)
    half_denominator = np.sign(half_denominator) * (np.abs(half_denominator) // 2)
    x = 1515870810 + _mul(half_denominator, -1010580540)  # 48/17 - 32/17 * d, Q2.29
    for _ in range(3):
        product = _mul(half_denominator, x)
        correction = _mul(x, (1 << 29) - product)  # Q4.27
        x = x + _shift_left_saturating(correction, 2)
    return _shift_left_saturating(x, 1)  # ExactMulByPot<-1> keeps the raw: Q2.29 x/2 is Q1.30


def _reciprocal(total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetReciprocal(sum, 12): (1 / the sum scaled into [0.5, 1), num_bits_over_unit)."""
    total = total.astype(np.int64)
    _, exponent = np.frexp(np.maximum(total, 1).astype(np.float64))  # total < 2**exponent
    leading = np.where(total <= 0, 32, 32 - exponent.astype(np.int64))  # CountLeadingZeros
    bits_over_unit = _ACCUMULATION_BITS - leading
    shifted = ((total << leading) & 0xFFFFFFFF) - (1 << 31)
    return _one_over_one_plus_x(shifted), bits_over_unit


def softmax_int8(x: np.ndarray, input_scale: float, beta: float, low: int, high: int
                 ) -> np.ndarray:
    """TFLite Micro's softmax over the last axis of an 8-bit tensor; output zero point = low."""
    multiplier, shift, diff_min = softmax_params(beta, input_scale)
    diff = x.astype(np.int64) - x.max(axis=-1, keepdims=True).astype(np.int64)
    used = diff >= diff_min
    scaled = _mul(np.where(used, diff, 0) * (1 << shift), multiplier)
    exps = exp_on_negative_values(np.where(used, scaled, 0))
    terms = np.where(used, rounding_divide_by_pot(exps, _ACCUMULATION_BITS), 0)  # to Q12.19
    reciprocal, bits_over_unit = _reciprocal(terms.sum(axis=-1, keepdims=True))
    exponent = bits_over_unit + 31 - 8
    out = rounding_divide_by_pot(_mul(reciprocal, exps), exponent) + low
    return np.where(used, np.clip(out, low, high), low).astype(x.dtype)
