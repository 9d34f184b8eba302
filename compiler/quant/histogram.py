"""Glow's growing histogram of a tensor's values, batch after batch.

A fixed number of bins spans [min, max]. The first batch sets the range. When a later batch
goes beyond it, the range grows to cover both; each old bin's count moves to the new bin its
start falls in, the fraction of it past that bin's end going to the next one (rounded), as
Glow's `generateTensorHistogram` does. Then the batch is binned with
min((v - min) / width, bins - 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import KilnError

# One resolution for every profile, from `kiln profile` and the window alike: fine enough for
# the entropy search (ENTROPY_BINS) and the MSE and percentile searches, and for dragging a
# range by hand. (Glow keeps 10; a profile that coarse makes every method return min-max.)
DEFAULT_BINS = 2048


@dataclass
class Histogram:
    """Counts over [low, high] in `len(counts)` equal bins."""

    low: float
    high: float
    counts: np.ndarray = field(default_factory=lambda: np.zeros(DEFAULT_BINS, np.int64))

    @classmethod
    def empty(cls, bins: int = DEFAULT_BINS) -> Histogram:
        """A histogram that has seen nothing yet (its first batch sets the range)."""
        return cls(np.inf, -np.inf, np.zeros(bins, np.int64))

    def add(self, values: np.ndarray, name: str = "") -> None:
        """Take one batch of values into the histogram, growing its range when needed."""
        values = np.asarray(values).reshape(-1)
        if values.size == 0:
            return
        low, high = float(values.min()), float(values.max())
        if not (np.isfinite(low) and np.isfinite(high)):  # NaN reaches min and max too
            raise KilnError(f"tensor {name!r} holds NaN or infinity; it cannot be profiled")
        if self.low > self.high:  # the first batch
            self.low, self.high = low, high
        elif low < self.low or high > self.high:
            self.grow(min(low, self.low), max(high, self.high))
        bins = len(self.counts)
        width = (self.high - self.low) / bins
        if width == 0:
            self.counts[0] += values.size
            return
        # float32 throughout: one pass for the offsets, one for the integer bins.
        scaled = values.astype(np.float32, copy=False) - np.float32(self.low)
        scaled *= np.float32(1.0 / width)
        index = scaled.astype(np.intp)
        np.clip(index, 0, bins - 1, out=index)
        self.counts += np.bincount(index, minlength=bins)

    def grow(self, low: float, high: float) -> None:
        """Widen the range to [low, high], moving each old bin's count as Glow does.

        All bins at once, in float64 as Glow's loop computes each one (a profile's thousands
        of bins made a Python loop most of a calibration's time).
        """
        bins = len(self.counts)
        old_width = (self.high - self.low) / bins
        new_width = (high - low) / bins
        counts = self.counts.astype(np.int64)
        start = self.low + np.arange(bins, dtype=np.float64) * old_width
        if new_width:
            dest = np.minimum(np.trunc((start - low) / new_width), bins - 1).astype(np.int64)
        else:
            dest = np.zeros(bins, np.int64)
        dest_end = low + (dest + 1) * new_width
        if old_width:
            kept = np.rint(counts * (dest_end - start) / old_width).astype(np.int64)
        else:
            kept = counts.copy()
        kept = np.clip(kept, 0, counts)
        grown = np.zeros(bins, np.int64)
        np.add.at(grown, dest, kept)
        np.add.at(grown, np.minimum(dest + 1, bins - 1), counts - kept)
        self.low, self.high, self.counts = low, high, grown

    def to_json(self) -> dict:
        """min, max and the counts, as the profile stores them."""
        return {"min": self.low, "max": self.high, "histogram": [int(c) for c in self.counts]}
