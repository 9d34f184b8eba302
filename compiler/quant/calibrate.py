"""Calibration: the real range each tensor gets, chosen from its profile, and its parameters.

Methods, all on the profile's histogram (bin centres stand for the values in the bin):
- `minmax`: the observed range.
- `percentile`: the range keeping `p` percent of the values, cutting (100 - p) / 2 percent
  from each end.
- `entropy`: TensorRT's KL-divergence search: among shrunk ranges, the one whose 255-level
  quantization of the histogram stays closest (KL divergence) to the clipped histogram.
- `mse`: among shrunk ranges, the one with the least expected square error over the histogram:
  rounding noise (scale squared over 12) inside the range, the clipping distance outside.
Then the schema turns a range into a scale and zero point: TFLite's int8 asymmetric (the
default), symmetric int8, uint8 asymmetric, or any of them with power-of-two scales. Every
range is widened to include 0, so zero is exact (padding, ReLU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.errors import KilnError
from compiler.quant.profile import TensorRange

METHODS = ("minmax", "percentile", "entropy", "mse")
SCHEMAS = ("tflite", "symmetric", "uint8", "tflite-pow2", "symmetric-pow2")
_SHRINKS = np.linspace(0.05, 1.0, 96)  # the candidate ranges: the observed one, shrunk


@dataclass(frozen=True)
class QuantParams:
    """How a tensor's reals map to 8-bit integers: real = (q - zero_point) * scale."""

    scale: float
    zero_point: int
    dtype: str  # "int8" or "uint8"


def _centres(entry: TensorRange) -> tuple[np.ndarray, np.ndarray]:
    counts = np.asarray(entry.histogram, np.float64)
    edges = np.linspace(entry.min, entry.max, len(counts) + 1)
    return (edges[:-1] + edges[1:]) / 2, counts


def choose_range(entry: TensorRange, method: str = "minmax", percentile: float = 99.99
                 ) -> tuple[float, float]:
    """The real range of one tensor by `method` (KilnError for an unknown one)."""
    if method not in METHODS:
        raise KilnError(f"calibration method {method!r} is not one of {', '.join(METHODS)}")
    low, high = float(entry.min), float(entry.max)
    if method == "minmax" or high <= low or not sum(entry.histogram):
        return low, high
    if method == "percentile":
        return _percentile(entry, percentile)
    return _search(entry, _kl_cost if method == "entropy" else _mse_cost)


def _percentile(entry: TensorRange, p: float) -> tuple[float, float]:
    if not 0 < p <= 100:
        raise KilnError(f"percentile {p} must be in (0, 100]")
    counts = np.asarray(entry.histogram, np.float64)
    edges = np.linspace(entry.min, entry.max, len(counts) + 1)
    cumulative = np.cumsum(counts) / counts.sum()
    cut = (100.0 - p) / 200.0
    first = int(np.searchsorted(cumulative, cut, side="right"))
    last = int(np.searchsorted(cumulative, 1.0 - cut, side="left"))
    return float(edges[min(first, len(counts) - 1)]), float(edges[min(last + 1, len(counts))])


def _candidates(entry: TensorRange):
    """Shrunk ranges about zero (or about the range's end nearest zero when 0 is outside)."""
    low, high = min(entry.min, 0.0), max(entry.max, 0.0)
    for t in _SHRINKS:
        yield low * t, high * t


def _search(entry: TensorRange, cost) -> tuple[float, float]:
    values, counts = _centres(entry)
    best, chosen = math.inf, (entry.min, entry.max)
    for low, high in _candidates(entry):
        if high <= low:
            continue
        value = cost(values, counts, low, high)
        if value < best - 1e-12 * abs(best):
            best, chosen = value, (low, high)
    return max(chosen[0], entry.min), min(chosen[1], entry.max)


def _mse_cost(values, counts, low, high) -> float:
    """The expected square error of a candidate range.

    scale**2 / 12 of rounding for each value inside it (the values of a bin spread over the
    bin), the clipping distance squared for each value outside.
    """
    scale = (high - low) / 255.0
    clipped = np.clip(values, low, high)
    inside = clipped == values
    rounding = scale * scale / 12.0
    return float(np.sum(counts * np.where(inside, rounding, (values - clipped) ** 2)))


def _kl_cost(values, counts, low, high) -> float:
    """KL(P || Q) of a candidate range, TensorRT's way.

    P is the histogram with its outliers folded into the edge bins, Q its quantization to 255
    levels spread evenly back over the bins each level covers.
    """
    inside = (values >= low) & (values <= high)
    if not inside.any():
        return math.inf
    p = counts * inside
    first, last = np.flatnonzero(inside)[[0, -1]]
    p[first] += counts[values < low].sum()
    p[last] += counts[values > high].sum()
    level = np.clip(np.round((values - low) / ((high - low) / 255.0)), 0, 255).astype(np.int64)
    q = np.zeros_like(p)
    for lv in np.unique(level[inside]):
        members = inside & (level == lv)
        nonzero = members & (p > 0)
        if nonzero.any():
            q[nonzero] = p[members].sum() / nonzero.sum()
    mask = p > 0
    p_n, q_n = p[mask] / p.sum(), q[mask] / q.sum()
    return float(np.sum(p_n * np.log(p_n / np.maximum(q_n, 1e-12))))


def _pow2(scale: float) -> float:
    return float(2.0 ** math.ceil(math.log2(scale)))


def params_for(low: float, high: float, schema: str = "tflite") -> QuantParams:
    """Scale and zero point of a real range under `schema` (0 always exactly representable)."""
    if schema not in SCHEMAS:
        raise KilnError(f"schema {schema!r} is not one of {', '.join(SCHEMAS)}")
    low, high = min(low, 0.0), max(high, 0.0)
    symmetric = schema.startswith("symmetric")
    if symmetric:
        scale = max(-low, high) / 127.0
    else:
        scale = (high - low) / 255.0
    if scale <= 0 or not math.isfinite(scale):
        scale = 1.0
    if schema.endswith("pow2"):
        scale = _pow2(scale)
    scale = float(np.float32(scale))
    if symmetric:
        return QuantParams(scale, 0, "int8")
    qmin, qmax, dtype = (0, 255, "uint8") if schema == "uint8" else (-128, 127, "int8")
    zero_point = int(np.clip(round(qmin - low / scale), qmin, qmax))
    return QuantParams(scale, zero_point, dtype)


def histogram_error(entry: TensorRange, low: float, high: float, levels: int = 255
                    ) -> tuple[float, float]:
    """(clipped fraction, SQNR in dB) of quantizing the profiled values to [low, high].

    An estimate from the histogram alone, cheap enough to follow a dragged handle: each bin's
    values sit at its centre; inside the range they lose step**2 / 12 to rounding, outside it
    their distance to the range.
    """
    values, counts = _centres(entry)
    total = counts.sum()
    if not total:
        return 0.0, math.inf
    outside = (values < low) | (values > high)
    clipped = float(counts[outside].sum() / total)
    step = (high - low) / levels if high > low else 0.0
    noise = float(np.sum(counts * np.where(outside, (values - np.clip(values, low, high)) ** 2,
                                           step * step / 12.0)))
    signal = float(np.sum(counts * values * values))
    if noise <= 0:
        return clipped, math.inf
    return clipped, 10 * math.log10(signal / noise) if signal > 0 else -math.inf
