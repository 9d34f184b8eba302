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

from compiler.qmath.gemmlowp import exp_on_negative_values
from compiler.qmath.requant import quantize_multiplier, rounding_divide_by_pot
from compiler.qmath.requant import saturating_rounding_doubling_high_mul as _mul
from compiler.qmath.tflite_div import get_reciprocal

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


def _reciprocal(total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetReciprocal(sum, 12): (1 / the sum scaled into [0.5, 1), num_bits_over_unit)."""
    return get_reciprocal(total, _ACCUMULATION_BITS)


def softmax_int8(x: np.ndarray, input_scale: float, beta: float, low: int, high: int
                 ) -> np.ndarray:
    """TFLite Micro's softmax over the last axis of an 8-bit tensor; output zero point = low."""
    multiplier, shift, diff_min = softmax_params(beta, input_scale)
    diff = x.astype(np.int64) - x.max(axis=-1, keepdims=True).astype(np.int64)
    used = diff >= diff_min
    scaled = _mul(np.where(used, diff, 0) * (1 << shift), multiplier)
    exps = exp_on_negative_values(np.where(used, scaled, 0), _SCALED_DIFF_BITS)
    terms = np.where(used, rounding_divide_by_pot(exps, _ACCUMULATION_BITS), 0)  # to Q12.19
    reciprocal, bits_over_unit = _reciprocal(terms.sum(axis=-1, keepdims=True))
    exponent = bits_over_unit + 31 - 8
    out = rounding_divide_by_pot(_mul(reciprocal, exps), exponent) + low
    return np.where(used, np.clip(out, low, high), low).astype(x.dtype)
