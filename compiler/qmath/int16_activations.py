"""TFLite's 16-bit sigmoid and tanh, as TFLite Micro's integer LSTM applies them.

Both interpolate one 256-entry table of sigmoid(i / 24) in 0.16 fixed point (tanh(x) is
2 sigmoid(2x) - 1), over the absolute value of the input rescaled by 3 (with a rounding right
shift when the input's scale is a large power of two), restoring the sign afterwards. The
table is TensorFlow Lite's `sigmoid_table_uint16` (Apache-2.0): its values are rounded by its
generator, not by a formula Kiln could re-derive bit for bit, so they are kept as data. Every
function here is exact int64 arithmetic over int16 codes, mirroring the C kernels' uint32 and
int32 steps, so a kernel and this reference agree on every code.
"""

from __future__ import annotations

import numpy as np

SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149,
    40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369,
    47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169,
    53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370,
    60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302,
    62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786,
    64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079,
    65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498,
    65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522,
    65523, 65523, 65524, 65524, 65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528,
    65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531,
    65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
], np.int64)


def _rescaled(x: np.ndarray, multiplier: int, left_shift: int) -> np.ndarray:
    """(x * multiplier + round) >> shift, the power-of-two case folding the shift in."""
    if multiplier == 0:
        multiplier, left_shift = 3 << left_shift, 0
    rounding = (1 << (left_shift - 1)) if left_shift > 0 else 0
    return (np.asarray(x, np.int64) * multiplier + rounding) >> left_shift


def _interpolated(magnitude: np.ndarray, fraction_bits: int, saturated: int) -> np.ndarray:
    """The table read at magnitude / 2**fraction_bits, linearly between entries."""
    whole = magnitude >> fraction_bits
    inside = whole < 255
    index = np.minimum(whole, 254)
    low, high = SIGMOID_TABLE[index], SIGMOID_TABLE[index + 1]
    part = magnitude & ((1 << fraction_bits) - 1)
    return np.where(inside, (low << fraction_bits) + part * (high - low), saturated)


def sigmoid(x: np.ndarray, multiplier: int = 0, left_shift: int = 0) -> np.ndarray:
    """reference_integer_ops::Logistic on int16: Q3.12 in (by default), Q0.15 out."""
    value = _rescaled(x, multiplier, left_shift)
    result = _interpolated(np.abs(value) & 0xFFFFFFFF, 9, 0x7FFF << 10)
    result = np.where(value >= 0, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1)
    return (result >> 10).astype(np.int16)


def tanh_shift(cell_scale_power: int) -> tuple[int, int]:
    """(input multiplier, left shift) TFLite Micro's LSTM passes for a 2**power input scale."""
    shift = 15 + cell_scale_power - 3
    return (3, -shift) if shift < 0 else (0, shift)


def tanh(x: np.ndarray, cell_scale_power: int) -> np.ndarray:
    """reference_integer_ops::Tanh on int16 codes of scale 2**cell_scale_power; Q0.15 out."""
    multiplier, shift = tanh_shift(cell_scale_power)
    value = _rescaled(x, multiplier, shift)
    result = _interpolated(np.abs(value) & 0xFFFFFFFF, 8, 0xFFFF << 8)
    result = np.where(value >= 0, result - (1 << 23) + (1 << 7),
                      -result + (1 << 23) + (1 << 7) - 1)
    return (result >> 8).astype(np.int16)
