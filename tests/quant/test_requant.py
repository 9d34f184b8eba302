"""The two requantization rules against exact rational re-derivations of their definitions.

The reference here never calls the code under test: Python integers and Fractions follow
QUANT.md section 2.3 (SRDHM rounds half up, RoundingDivideByPOT half away from zero) and
onnxruntime's float32 steps, one element at a time.
"""

from fractions import Fraction
from math import floor

import numpy as np
import pytest

from compiler.qmath.requant import (
    INT32_MAX,
    INT32_MIN,
    check_mode,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    requantize_onnx,
    requantize_tflite,
)


def _half_away(value: Fraction) -> int:
    n = floor(abs(value) + Fraction(1, 2))
    return n if value >= 0 else -n


def _reference_mbqm(x: int, q: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    a = x * (1 << left)
    if a == INT32_MIN and q == INT32_MIN:
        high = INT32_MAX
    else:
        high = floor(Fraction(a * q, 1 << 31) + Fraction(1, 2))  # round half up
    return _half_away(Fraction(high, 1 << right))


def _triples(count: int, seed: int):
    rng = np.random.default_rng(seed)
    edges = [(INT32_MIN, INT32_MIN, 0), (INT32_MAX, INT32_MAX, 0), (INT32_MIN, INT32_MAX, 0),
             (INT32_MIN, 1 << 30, -31), (INT32_MAX, 1 << 30, -31), (0, INT32_MAX, -5),
             (-1, 1 << 30, -1), (1, 1 << 30, -1), (-3, 1 << 30, -1), (3, 1 << 30, -1),
             ((1 << 20) - 1, (1 << 31) - 1, 10), (-(1 << 20), (1 << 31) - 1, 10)]
    found = list(edges)
    while len(found) < count:
        shift = int(rng.integers(-31, 11))
        limit = INT32_MAX >> max(shift, 0)  # x * 2**shift stays an int32
        x = int(rng.integers(-limit - 1, limit + 1))
        q = int(rng.integers(1 << 30, 1 << 31))
        if rng.random() < 0.1:  # ties: an accumulator that lands exactly on a half
            x = (int(rng.integers(-1000, 1000)) * 2 + 1) << max(-shift, 0)
            q = 1 << 30
            if not INT32_MIN <= x << max(shift, 0) <= INT32_MAX:
                continue
        found.append((x, q, shift))
    return found


def test_fixed_point_matches_an_exact_derivation_on_10000_triples():
    triples = _triples(10_000, seed=7)
    x, q, shift = (np.array(column, np.int64) for column in zip(*triples))
    got = multiply_by_quantized_multiplier(x, q, shift)
    want = np.array([_reference_mbqm(*t) for t in triples], np.int64)
    differ = np.flatnonzero(got != want)
    assert differ.size == 0, f"{differ.size} differ, first {triples[differ[0]]}"


def test_the_saturating_case_and_ties():
    assert multiply_by_quantized_multiplier(INT32_MIN, INT32_MIN, 0) == INT32_MAX
    # SRDHM rounds a half up: -0.5 -> 0 and 0.5 -> 1 (q = 2**30 halves x).
    assert multiply_by_quantized_multiplier(-1, 1 << 30, 0) == 0
    assert multiply_by_quantized_multiplier(1, 1 << 30, 0) == 1
    # RoundingDivideByPOT rounds a half away from zero.
    assert multiply_by_quantized_multiplier(6, 1 << 30, -2) == 1  # 6/2/4 = 0.75
    assert multiply_by_quantized_multiplier(-4, 1 << 30, -2) == -1  # -0.5 -> -1
    assert multiply_by_quantized_multiplier(4, 1 << 30, -2) == 1  # 0.5 -> 1


@pytest.mark.parametrize("real", [1e-9, 3.7e-5, 0.0019, 0.25, 0.5, 0.999999999, 1.0, 1.5, 7.3,
                                  1 - 2**-33, 2.0**-31, 2.0**-32 * 0.9])
def test_quantize_multiplier_represents_the_real_number(real):
    q, shift = (int(v) for v in quantize_multiplier(real))
    fraction_bits = Fraction(real) * (1 << 31) / Fraction(2) ** shift
    if q == 0:
        assert shift == 0 and real < 2.0**-31 * 2  # too small for a shift of -31
        return
    assert (1 << 30) <= q < (1 << 31)
    assert abs(q - fraction_bits) <= Fraction(1, 2)


def test_quantize_multiplier_edges():
    assert tuple(map(int, quantize_multiplier(0.0))) == (0, 0)
    # A fraction that rounds up to 2**31 becomes 2**30 with the shift one higher.
    q, shift = quantize_multiplier(1 - 2.0**-40)
    assert (int(q), int(shift)) == (1 << 30, 1)


def test_onnx_rule_matches_float32_steps():
    rng = np.random.default_rng(3)
    acc = rng.integers(-(1 << 24), 1 << 24, 10_000)
    acc[:4] = [INT32_MAX, INT32_MIN, 0, 33_554_433]  # the last is not a float32
    scale = np.float32(0.0123)
    got = requantize_onnx(acc, scale, -3, -128, 127)
    want = []
    for a in acc:
        value = np.float32(int(a)) * scale
        value = min(max(value, np.float32(-125)), np.float32(130))
        want.append(int(np.rint(value)) - 3)
    assert np.array_equal(got, np.array(want))
    # Ties go to even: 2.5 -> 2, 3.5 -> 4.
    assert list(requantize_onnx([5, 7], np.float32(0.5), 0, -128, 127)) == [2, 4]


def test_tflite_rule_clamps_after_the_zero_point():
    got = requantize_tflite([1 << 30, -(1 << 30), 10], 1 << 30, 0, 5, -128, 127)
    assert list(got) == [127, -128, 10]


def test_unknown_mode_is_named():
    with pytest.raises(ValueError, match="expected one of onnx, tflite"):
        check_mode("tf")
