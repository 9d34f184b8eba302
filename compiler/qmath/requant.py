"""Requantization: an int32 accumulator to an 8-bit output, by one of two exact rules.

`onnx` is what onnxruntime's integer kernels do (MLAS): the accumulator converted to float32,
multiplied by the float32 scale in_scale * w_scale / out_scale (formed in float32, left to
right), clamped, rounded half to even, shifted by the zero point.

`tflite` is TFLite Micro's (and CMSIS-NN's) fixed point: the real multiplier, formed in double,
becomes a Q31 integer and a power-of-two shift (QuantizeMultiplier), applied with two roundings
(SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT).

Everything is numpy on int64 arrays, vectorized; nothing loops per element in Python.
"""

from __future__ import annotations

import numpy as np

from compiler.qmath.scales import finite_ratio

MODES = ("onnx", "tflite")
REQUANT_KEY = "requant"  # graph.metadata key: the rule the graph's integer operators follow
# Graph metadata: the tensors the user kept float (`kiln quantize --keep-float`, the workbench).
# The integer pass leaves their readers float, even where it could move a dequantization.
KEPT_FLOAT_KEY = "kiln.quant.kept_float"
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


def check_mode(mode: str) -> str:
    """`mode` itself, or a ValueError naming the accepted ones."""
    if mode not in MODES:
        raise ValueError(f"unknown requantization {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32 two's complement, as C's int32 arithmetic does."""
    x = np.asarray(x, np.int64)
    return ((x - INT32_MIN) & 0xFFFFFFFF) + INT32_MIN


# -- TFLite Micro's fixed point -------------------------------------------------------------------

def quantize_multiplier(real) -> tuple[np.ndarray, np.ndarray]:
    """(Q31 multiplier, shift) with real = q * 2**(shift - 31), per TFLite's QuantizeMultiplier.

    frexp splits the double; the fraction times 2**31 is rounded half away from zero
    (std::round); a fraction that rounds up to 2**31 is halved and the shift raised; a shift
    below -31 gives (0, 0), as does a multiplier of 0.
    """
    real = np.asarray(real, np.float64)
    fraction, shift = np.frexp(real)
    scaled = fraction * float(1 << 31)  # exact: a power-of-two scaling of a double
    q = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.int64)
    shift = shift.astype(np.int64)
    full = q == (1 << 31)
    q = np.where(full, q // 2, q)
    shift = np.where(full, shift + 1, shift)
    tiny = shift < -31
    q = np.where(tiny | (real == 0), 0, q)
    shift = np.where(tiny | (real == 0), 0, shift)
    return q, shift


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """(a * b + nudge) / 2**31 truncated, nudge ±2**30; INT32_MIN * INT32_MIN saturates."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b  # |a|, |b| <= 2**31: fits in int64
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    total = ab + nudge
    quotient = np.abs(total) >> 31  # C's division truncates toward zero
    result = np.where(total < 0, -quotient, quotient)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, result)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """The quotient x / 2**exponent rounded half away from zero (RoundingDivideByPOT)."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier with double rounding (its default build).

    A positive shift multiplies x by 2**shift in int32 first (wrapping as C does), a negative
    one divides the high product by 2**-shift with rounding.
    """
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    scaled = wrap_int32(np.asarray(x, np.int64) << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(scaled, multiplier), right)


# -- the two rules, whole tensors -----------------------------------------------------------------

def onnx_scale(in_scale, w_scale, out_scale) -> np.ndarray:
    """float32 in_scale * w_scale / out_scale, each step rounded to float32 (onnxruntime).

    Refused (KilnError) when that overflows float32.
    """
    with np.errstate(over="ignore"):
        scale = (np.float32(in_scale) * np.asarray(w_scale, np.float32)) / np.float32(out_scale)
    return finite_ratio(scale, "the requantization scale input scale * weight scale / output "
                               "scale")


def tflite_multiplier(in_scale, w_scale, out_scale, *, product_in_float: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) per channel: double(in) * double(w) / double(out).

    `product_in_float` forms in * w in float32 first (TFLite's per-tensor fully connected).
    """
    w = np.asarray(w_scale, np.float32)
    if product_in_float:
        real = np.float64(np.float32(in_scale) * w) / np.float64(np.float32(out_scale))
    else:
        real = (np.float64(np.float32(in_scale)) * w.astype(np.float64)
                / np.float64(np.float32(out_scale)))
    return quantize_multiplier(real)


def requantize_onnx(acc, scale, zero_point: int, low: int, high: int) -> np.ndarray:
    """As MlasRequantizeOutput: float32(acc) * scale, clamp, round half to even, + zp.

    A product beyond float32 is infinite, as in MLAS, and the clamp saturates it.
    """
    with np.errstate(over="ignore"):
        value = np.asarray(acc, np.int64).astype(np.float32) * np.asarray(scale, np.float32)
    value = np.clip(value, np.float32(low - zero_point), np.float32(high - zero_point))
    return np.rint(value).astype(np.int64) + zero_point


def requantize_tflite(acc, multiplier, shift, zero_point: int, low: int, high: int
                      ) -> np.ndarray:
    """TFLite Micro: MultiplyByQuantizedMultiplier(acc) + zp, clamped to [low, high]."""
    value = multiply_by_quantized_multiplier(acc, multiplier, shift) + zero_point
    return np.clip(value, low, high)
