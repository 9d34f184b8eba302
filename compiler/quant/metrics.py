"""The error figures every quantization view reports, each computed by one formula here.

The report (`evaluate`), the workbench's incremental evaluator and the histogram estimate that
follows a dragged range all take their SQNR, RMS error over scale and top-1 agreement from
these functions, so the three can never disagree on what a number means.
"""

from __future__ import annotations

import math

import numpy as np


def sqnr_from_powers(signal: float, noise: float) -> float:
    """10 log10(signal / noise) in dB: infinity without noise, -infinity without signal."""
    if noise <= 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


def signal_power(reference: np.ndarray) -> float:
    """The sum of squares of `reference`, in float64."""
    r = np.asarray(reference).reshape(-1).astype(np.float64)
    return float(r @ r)


def noise_power(reference: np.ndarray, approximate: np.ndarray) -> float:
    """The sum of squares of `reference - approximate`, in float64."""
    d = np.subtract(np.asarray(reference).reshape(-1), np.asarray(approximate).reshape(-1),
                    dtype=np.float64)
    return float(d @ d)


def sqnr_db(reference: np.ndarray, approximate: np.ndarray) -> float:
    """The SQNR of `approximate` against `reference`, dB (infinity when they are equal)."""
    return sqnr_from_powers(signal_power(reference), noise_power(reference, approximate))


def rmse_over_scale(noise: float, count: int, scale: float) -> float:
    """TensorFlow Lite's debugger metric: the RMS error in quantization steps.

    About 1/sqrt(12) = 0.289 when the only error is rounding.
    """
    return math.sqrt(noise / count) / scale if count else 0.0


def top1_agreement(reference: np.ndarray, approximate: np.ndarray) -> float:
    """The fraction of samples (rows) whose largest output is at the same index in both."""
    f = np.asarray(reference).reshape(len(reference), -1)
    q = np.asarray(approximate).reshape(len(approximate), -1)
    return float(np.mean(np.argmax(f, axis=1) == np.argmax(q, axis=1))) if len(f) else 0.0
