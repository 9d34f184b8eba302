"""TFLite Micro's 8-bit DIV, bit for bit: a fixed-point reciprocal of the divisor, no float.

Per element (both values offset by their zero points) the signs are moved to the dividend so
the divisor is positive, GetReciprocal(divisor, 31) gives its reciprocal in [0.5, 1) (three
gemmlowp Newton steps) and the power of two it was scaled by, the dividend is normalized by its
leading sign bits, multiplied by the reciprocal, then requantized by in1 / (in2 out) with the
shifts of both normalizations folded in (reference_ops::DivElementwise). The final rounding
shift can pass 31 bits: see rounding_divide_by_pot_int32. A divisor equal to its
zero point is outside DIV's domain (TFLite Micro stops on a check); Kiln gives the saturated
quotient there: the top of the range for a positive dividend, the bottom for a negative one, the
output's zero point for 0.
"""

from __future__ import annotations

import numpy as np

from compiler.qmath.gemmlowp import one_over_one_plus_x
from compiler.qmath.requant import saturating_rounding_doubling_high_mul as mul


def count_leading_zeros(x: np.ndarray) -> np.ndarray:
    """CountLeadingZeros of uint32 values (32 for 0)."""
    x = np.asarray(x, np.int64) & 0xFFFFFFFF
    _, exponent = np.frexp(np.maximum(x, 1).astype(np.float64))
    return np.where(x == 0, 32, 32 - exponent.astype(np.int64))


def count_leading_sign_bits(x: np.ndarray) -> np.ndarray:
    """CountLeadingSignBits of int32 values: redundant sign bits (31 for 0 and -1)."""
    x = np.asarray(x, np.int64)
    return np.where(x >= 0, count_leading_zeros(x) - 1,
                    np.where(x == -(1 << 31), 0, count_leading_zeros(2 * (-x) - 1)))


def get_reciprocal(x: np.ndarray, integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """GetReciprocal: (1 / x scaled into [0.5, 1) as Q0.31, num_bits_over_unit), x > 0."""
    x = np.asarray(x, np.int64)
    leading = count_leading_zeros(x)
    shifted = ((x << leading) & 0xFFFFFFFF) - (1 << 31)
    return one_over_one_plus_x(shifted), integer_digits - leading


def rounding_divide_by_pot_int32(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT as compiled C computes it on int32 for exponents up to 62.

    DIV's exponent passes 31 for small dividends over large divisors (gemmlowp asserts it does
    not; release builds go on): the mask (1 << e) - 1 is cut to 32 bits, all ones, and x86
    shifts by e mod 32, which is what TFLite Micro's x86 build computes. Kiln does the same on
    every target.
    """
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = ((np.int64(1) << exponent) - 1) & 0xFFFFFFFF
    mask = np.where(mask >= 1 << 31, mask - (1 << 32), mask)  # as int32
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> (exponent & 31)) + (remainder > threshold)


def div_int8(a: np.ndarray, b: np.ndarray, attrs: dict) -> np.ndarray:
    """DIV of int8 codes (broadcast numpy's way) into int8 codes, TFLite Micro's arithmetic."""
    a = np.asarray(a, np.int64) - attrs["a_zero_point"]
    b = np.asarray(b, np.int64) - attrs["b_zero_point"]
    a, b = np.broadcast_arrays(a, b)
    flip = b < 0
    a = np.where(flip, -a, a)
    divisor = np.where(flip, -b, b)
    zero = divisor == 0
    inverse, recip_shift = get_reciprocal(np.where(zero, 1, divisor), 31)
    headroom = count_leading_sign_bits(a)
    quotient = mul(a << headroom, inverse)
    exponent = np.maximum(recip_shift + headroom - attrs["shift"], 0)
    y = attrs["y_zero_point"] + rounding_divide_by_pot_int32(
        mul(quotient, attrs["multiplier"]), exponent)
    low, high = attrs["low"], attrs["high"]
    y = np.where(zero, np.where(a > 0, high, np.where(a < 0, low, attrs["y_zero_point"])), y)
    return np.clip(y, low, high).astype(np.int8)
