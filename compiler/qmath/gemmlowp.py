"""The fixed-point transcendental functions of gemmlowp on int32 raws, vectorized, bit for bit.

TFLite Micro's int8 SOFTMAX, LOGISTIC and TANH are built from these: exp on negative values
(a Taylor polynomial on [-1/4, 0) and a barrel shifter for the integer part), 1 / (1 + x) and
(1 - x) / (1 + x) by three Newton-Raphson steps, and the logistic and tanh built on them. A raw
of FixedPoint<int32, k> holds value * 2**(31 - k); products are SaturatingRoundingDoublingHighMul.
"""

from __future__ import annotations

import numpy as np

from compiler.qmath.requant import INT32_MAX, INT32_MIN, rounding_divide_by_pot
from compiler.qmath.requant import saturating_rounding_doubling_high_mul as mul


def shift_left_saturating(x, bits: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT with a positive exponent."""
    x = np.asarray(x, np.int64)
    return np.where(x > INT32_MAX >> bits, INT32_MAX,
                    np.where(x < INT32_MIN >> bits, INT32_MIN, x << bits))


def _exp_on_interval(a: np.ndarray) -> np.ndarray:
    """exp(a) for Q0.31 a in [-1/4, 0): Taylor expansion around -1/8."""
    constant_term = 1895147668  # exp(-1/8)
    one_third = 715827883
    x = a + (1 << 28)  # a + 1/8
    x2 = mul(x, x)
    x3 = mul(x2, x)
    x4 = mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(mul(x4_over_4 + x3, one_third) + x2, 1)
    return constant_term + mul(constant_term, x + poly)


# exp(-2**k) in Q0.31 for the barrel shifter, k = -2 .. 4.
_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
           (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """exp(a) for a <= 0 in Q(integer_bits), as Q0.31."""
    a = np.asarray(a, np.int64)
    fractional = 31 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(shift_left_saturating(a_mod, integer_bits))
    remainder = a_mod - a
    for exponent, multiplier in _BARREL:
        if integer_bits > exponent:
            bit = (remainder & (1 << (fractional + exponent))) != 0
            result = np.where(bit, mul(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _newton_reciprocal(a: np.ndarray) -> np.ndarray:
    """1 / (1 + a) for Q0.31 a in [0, 1), as Q2.29, before the final rescale."""
    total = a + INT32_MAX  # RoundingHalfSum(a, One)
    total = np.where(total >= 0, total + 1, total - 1)
    half_denominator = np.sign(total) * (np.abs(total) // 2)
    x = 1515870810 + mul(half_denominator, -1010580540)  # 48/17 - 32/17 * d, Q2.29
    for _ in range(3):
        product = mul(half_denominator, x)
        x = x + shift_left_saturating(mul(x, (1 << 29) - product), 2)
    return x


def one_over_one_plus_x(a) -> np.ndarray:
    """1 / (1 + a) for Q0.31 a in [0, 1) (ExactMulByPot<-1> keeps the raw: Q2.29 / 2 = Q1.30)."""
    return shift_left_saturating(_newton_reciprocal(np.asarray(a, np.int64)), 1)


def one_minus_x_over_one_plus_x(a) -> np.ndarray:
    """(1 - a) / (1 + a) for Q0.31 a in [0, 1)."""
    return shift_left_saturating(_newton_reciprocal(np.asarray(a, np.int64)) - (1 << 29), 2)


def logistic(a, integer_bits: int) -> np.ndarray:
    """1 / (1 + exp(-a)) for Q(integer_bits) a, as Q0.31."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    magnitude = np.where(positive, a, -a)
    on_positive = one_over_one_plus_x(exp_on_negative_values(-magnitude, integer_bits))
    result = np.where(positive, on_positive, INT32_MAX - on_positive)
    return np.where(a == 0, 1 << 30, result)


def tanh(a, integer_bits: int) -> np.ndarray:
    """The hyperbolic tangent of Q(integer_bits) a as Q0.31 (exp(2a): same raw, one more bit)."""
    a = np.asarray(a, np.int64)
    negative = a < 0
    n = np.where(negative, a, -a)
    t = one_minus_x_over_one_plus_x(exp_on_negative_values(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, -t, t))
