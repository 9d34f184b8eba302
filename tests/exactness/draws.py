"""The data a campaign case draws: calibration sets and inputs of every kind, seeded.

Calibrations: narrow (a hundredth of the usual spread), wide (ten times it), shifted (every
value far from zero on one side), a single sample, and constant tensors (every sample the same
value, so every range collapses to a point widened to include zero). Inputs: inside the
calibrated range, beyond it by 10x and by 1000x (a louder voice, a brighter room), zeros, and
the float extremes (values near float32's largest, of both signs, among ordinary ones), and
half steps: values halfway between two levels of the input's quantizer, where only the rounding
rule decides (ties away from zero under the tflite rule, to even under the onnx rule).
"""

from __future__ import annotations

import numpy as np

CALIBRATIONS = ("narrow", "wide", "shifted", "single", "constant")
INPUTS = ("inside", "beyond 10x", "beyond 1000x", "zeros", "float extremes", "half steps")
SCHEMAS = ("tflite", "symmetric", "uint8", "tflite-pow2", "symmetric-pow2")
RULES = ("onnx", "tflite")
SAMPLES = 6  # calibration samples, but for "single"
FLOAT_MAX = float(np.finfo(np.float32).max)


def calibration(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """[N, *shape[1:]] float32 samples of one calibration kind for an input of `shape`."""
    count = 1 if kind == "single" else SAMPLES
    size = (count, *shape[1:])
    if kind == "narrow":
        data = rng.uniform(-0.01, 0.01, size)
    elif kind == "wide":
        data = rng.normal(0.0, 10.0, size)
    elif kind == "shifted":
        side = 1.0 if rng.random() < 0.5 else -1.0
        data = side * rng.uniform(4.0, 6.0, size)
    elif kind == "single":
        data = rng.normal(0.0, 1.0, size)
    elif kind == "constant":
        data = np.full(size, rng.choice([0.0, 0.5, -1.25, 3.0]))
    else:
        raise ValueError(f"unknown calibration kind {kind!r}")
    return np.ascontiguousarray(data, np.float32)


def inputs(kind: str, calib: np.ndarray, rng: np.random.Generator, count: int,
           quantizer: tuple[float, int, int, int] = (1.0, 0, -128, 127)) -> list[np.ndarray]:
    """`count` inputs (batch 1, float32) of one kind, relative to the calibration's range.

    `quantizer`: the input's scale, zero point and integer range, for the half steps.
    """
    low, high = float(calib.min()), float(calib.max())
    centre, half = (low + high) / 2, max((high - low) / 2, 1e-3)
    shape = (1, *calib.shape[1:])
    made = []
    for _ in range(count):
        if kind == "inside":
            x = rng.uniform(low, high, shape) if high > low else np.full(shape, low)
        elif kind == "beyond 10x":
            x = centre + 10 * half * rng.uniform(-1.0, 1.0, shape)
        elif kind == "beyond 1000x":
            x = centre + 1000 * half * rng.uniform(-1.0, 1.0, shape)
        elif kind == "zeros":
            x = np.zeros(shape)
        elif kind == "half steps":
            scale, zero, low_q, high_q = quantizer
            q = rng.integers(low_q, high_q, shape) + 0.5 - zero
            x = (q.astype(np.float32) * np.float32(scale)).astype(np.float32)
        elif kind == "float extremes":
            picks = np.array([-FLOAT_MAX, FLOAT_MAX, -1e30, 1e30, -1e6, 1e6, 0.0, low, high])
            x = rng.choice(picks, shape)
        else:
            raise ValueError(f"unknown input kind {kind!r}")
        made.append(np.ascontiguousarray(x, np.float32))
    return made
