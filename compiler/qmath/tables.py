"""256-entry tables of one-input 8-bit operators, built as onnxruntime builds them.

An 8-bit input has 256 values, so any function of one input is a table: onnxruntime dequantizes
every code in float32 (scale * (code - zero_point)), applies the float32 function, and quantizes
back with MLAS's QuantizeLinear (round half to even of value / scale, plus the zero point,
saturated). Tables are indexed by the uint8 bit pattern of the input, so int8 and uint8 index
alike.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.qmath.requant import RANGES

TABLE_SIZE = 256


def codes(dtype: str) -> np.ndarray:
    """The integer each table position stands for: position i holds the code with bit pattern i."""
    i = np.arange(TABLE_SIZE, dtype=np.int64)
    return i - TABLE_SIZE * (i > 127) if dtype == "int8" else i


def dequantize_codes(dtype: str, scale, zero_point: int) -> np.ndarray:
    """float32 real value of every code, in table order."""
    return np.float32(scale) * (codes(dtype) - int(zero_point)).astype(np.float32)


def quantize(real: np.ndarray, dtype: str, scale, zero_point: int) -> np.ndarray:
    """MLAS's QuantizeLinear: rint(real / scale) + zero_point, saturated to `dtype`."""
    low, high = RANGES[dtype]
    with np.errstate(over="ignore"):  # beyond float32 is infinite, as in MLAS, then saturated
        q = np.rint(np.asarray(real, np.float32) / np.float32(scale)) + np.float32(zero_point)
    return np.clip(q, low, high).astype(dtype)


def onnx_table(fn: Callable[[np.ndarray], np.ndarray], dtype: str, x_scale, x_zero_point: int,
               y_scale, y_zero_point: int) -> np.ndarray:
    """The table of float32 function `fn` between the two quantizations of one 8-bit type."""
    real = np.asarray(fn(dequantize_codes(dtype, x_scale, x_zero_point)), np.float32)
    return quantize(real, dtype, y_scale, y_zero_point)


def look_up(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Every element of 8-bit `x` replaced by its table entry."""
    return np.asarray(table)[np.asarray(x).astype(np.int64) & 0xFF]
