"""The scales Kiln takes: normal float32 numbers whose whole integer range stays finite.

A subnormal scale (1e-45, say) is positive and finite, but dividing by it overflows float32:
x / scale is infinite for every x above about 1e-7, and so are the reciprocals and ratios that
kernels compute from it at compile time. A huge one (1e30 on int32 values, 3e38 on 8-bit ones)
dequantizes the type's own values to infinity. No model needs either; every front end refuses
them in one sentence, as it does a zero, negative, infinite or NaN scale.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import KilnError

SMALLEST_SCALE = float(np.finfo(np.float32).tiny)  # 2**-126, about 1.18e-38
FLOAT32_MAX = float(np.finfo(np.float32).max)
# Steps between the lowest and the highest value of each quantized type.
LEVELS = {"int8": 255, "uint8": 255, "int16": 65535, "uint16": 65535, "int32": 2**32 - 1}
SCALE_RULE = ("a scale must be positive and finite, at least 1.18e-38 (float32's smallest "
              "normal number), and small enough that its type's whole range dequantizes to "
              "finite float32 numbers")


def largest_scale(dtype: str = "int8") -> float:
    """The largest scale whose `dtype` values all dequantize to finite float32 numbers."""
    return FLOAT32_MAX / LEVELS.get(dtype, 255)


def bad_scales(scales, dtype: str = "int8") -> list[float]:
    """The scales among `scales` that break SCALE_RULE for `dtype` values, as floats, in order."""
    flat = np.asarray(scales, np.float64).reshape(-1)
    good = np.isfinite(flat) & (flat >= SMALLEST_SCALE) & (flat <= largest_scale(dtype))
    return [float(v) for v in flat[~good]]


def finite_ratio(value, what: str) -> np.ndarray:
    """`value` (a float32 ratio of scales, computed with overflow allowed) when it is finite.

    Raises KilnError naming `what` otherwise: scales far apart make a requantization ratio
    that float32 cannot hold, so no engine computes the operator as its definition says.
    """
    array = np.asarray(value)
    if not np.all(np.isfinite(array)):
        raise KilnError(f"{what} overflows float32: its scales are too far apart")
    return array
