"""The SQNR bins the quantization overlay colours nodes by, and their colours.

Five bins of 10 dB from viridis (readable with every common colour-vision deficiency, and in
grey): dark for the layers that lose most, light for those that lose least.
"""

from __future__ import annotations

import math

# (lower bound in dB, fill, text colour), best first.
SQNR_BINS: tuple[tuple[float, str, str], ...] = (
    (40.0, "#fde725", "#1d232a"),
    (30.0, "#5ec962", "#1d232a"),
    (20.0, "#21918c", "#ffffff"),
    (10.0, "#3b528b", "#ffffff"),
    (-math.inf, "#440154", "#ffffff"),
)
LABELS = ("≥ 40", "30–40", "20–30", "10–20", "< 10")  # dB


def sqnr_bin(db: float) -> int:
    """The index of the bin `db` falls in (an exact tensor, infinite SQNR, is in the best)."""
    if math.isnan(db):
        return len(SQNR_BINS) - 1
    return next(i for i, (low, _, _) in enumerate(SQNR_BINS) if db >= low)


def sqnr_color(db: float) -> tuple[str, str]:
    """(fill, text) colours of the bin `db` falls in."""
    _, fill, text = SQNR_BINS[sqnr_bin(db)]
    return fill, text
