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
from compiler.qmath.scales import SMALLEST_SCALE
from compiler.quant.metrics import sqnr_from_powers
from compiler.quant.profile import TensorRange

METHODS = ("minmax", "percentile", "entropy", "mse")
SCHEMAS = ("tflite", "symmetric", "uint8", "tflite-pow2", "symmetric-pow2")
_SHRINKS = np.linspace(0.05, 1.0, 96)  # the candidate ranges: the observed one, shrunk
LEVELS = 255  # steps of an 8-bit range
ENTROPY_BINS = 512  # entropy sees rounding only where a level spans two bins or more


def method_note(method: str, bins: int) -> str | None:
    """A sentence when `method` cannot do its job on a histogram of `bins` bins, else None."""
    if method == "entropy" and bins < ENTROPY_BINS:
        return (f"entropy needs {ENTROPY_BINS} histogram bins or more to see rounding; this "
                f"profile has {bins}, so entropy keeps min-max where nothing is clipped "
                f"(profile again with --bins 2048)")
    return None


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
    """The candidate range of least `cost`; on a tie the wider (so a flat cost keeps min-max)."""
    values, counts = _centres(entry)
    best, chosen = math.inf, (entry.min, entry.max)
    for low, high in reversed(list(_candidates(entry))):  # widest first
        if high <= low:
            continue
        value = cost(values, counts, low, high)
        if value < best and not math.isclose(value, best, rel_tol=1e-12, abs_tol=0.0):
            best, chosen = value, (low, high)
    return max(chosen[0], entry.min), min(chosen[1], entry.max)


def _mse_cost(values, counts, low, high) -> float:
    """The expected square error of a candidate range.

    scale**2 / 12 of rounding for each value inside it (the values of a bin spread over the
    bin), the clipping distance squared for each value outside.
    """
    scale = (high - low) / LEVELS
    clipped = np.clip(values, low, high)
    inside = clipped == values
    rounding = scale * scale / 12.0
    return float(np.sum(counts * np.where(inside, rounding, (values - clipped) ** 2)))


def _kl_cost(values, counts, low, high) -> float:
    """KL(P || Q) of a candidate range, as TensorRT and MXNet compute it.

    P is the histogram's bins inside the range with the outliers folded into its edge bins
    (what clipping makes of the values); Q is the inside bins alone, merged into the range's
    255 levels and each level's count spread evenly back over its non-empty bins (what the
    quantized tensor can still tell apart). Clipping shows as mass P has and Q lacks at the
    edges, rounding as detail merged away, so the divergence only sees rounding where a level
    spans several bins: entropy needs a histogram finer than the levels (`ENTROPY_BINS`).
    The bin holding zero stays a level of its own: every schema here represents 0 exactly, and
    merging a ReLU's spike of zeros with its neighbours would pass for a loss.
    """
    inside = (values >= low) & (values <= high)
    if not inside.any():
        return math.inf
    kept = counts[inside]
    p = kept.copy()
    p[0] += counts[values < low].sum()
    p[-1] += counts[values > high].sum()
    level = np.round((values[inside] - low) / ((high - low) / LEVELS)).astype(np.int64)
    level = np.clip(level, 0, LEVELS)
    width = values[1] - values[0] if len(values) > 1 else high - low
    level[np.abs(values[inside]) <= width / 2] = LEVELS + 1  # zero's bin: exact, not merged
    nonzero = p > 0
    totals = np.bincount(level, weights=kept, minlength=LEVELS + 2)
    members = np.bincount(level, weights=nonzero, minlength=LEVELS + 2)
    q = np.where(nonzero, totals[level] / np.maximum(members[level], 1), 0.0)
    return _divergence(_smoothed(p), _smoothed(q))


def _smoothed(counts: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """`counts` as a distribution, `eps` counts moved onto its empty bins (MXNet's smoothing).

    So log(p / q) stays finite where clipping put values in a level the unclipped histogram
    left empty: a large cost, not an infinite one.
    """
    empty = counts == 0
    if empty.all():
        return np.full(len(counts), 1.0 / len(counts))
    h = np.where(empty, eps, np.maximum(counts - eps * empty.sum() / (~empty).sum(), eps))
    return h / h.sum()


def _divergence(p: np.ndarray, q: np.ndarray) -> float:
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-300))))


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
    if not scale >= SMALLEST_SCALE or not math.isfinite(scale):
        scale = 1.0  # an empty (or subnormal) range: every value quantizes to the zero point
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
    return clipped, sqnr_from_powers(float(np.sum(counts * values * values)), noise)
