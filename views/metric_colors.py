"""Colours of a per-layer metric overlay: a gradient or a threshold, and readable text on each.

The gradient is viridis (sequential, readable with the common colour-vision deficiencies and in
grey), its dark end the bad one: the largest count for figures where more is worse, the lowest
SQNR. Figures spanning more than two decades are placed on a log scale, so a network's small
layers do not all share one colour. A threshold paints the bad side of a value in one colour
and the rest in another. Text on every fill is `quant_colors.text_on`'s pick (WCAG contrast).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from views.quant_colors import text_on

VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
           "#6ece58", "#b5de2b", "#fde725")
BAD, GOOD = "#c0392b", "#d8ecd0"  # threshold: beyond it, within it
GRADIENT, THRESHOLD = "gradient", "threshold"
LOG_SPAN = 100.0  # high / low above which the gradient is logarithmic


def _mix(a: str, b: str, t: float) -> str:
    pa = [int(a[i:i + 2], 16) for i in (1, 3, 5)]
    pb = [int(b[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(pa, pb))


def viridis(t: float) -> str:
    """The viridis colour at `t` (0 dark purple .. 1 yellow), interpolated between stops."""
    t = min(1.0, max(0.0, t)) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    return _mix(VIRIDIS[i], VIRIDIS[i + 1], t - i)


@dataclass(frozen=True)
class Coloring:
    """How values become fills.

    Attributes:
        mode: GRADIENT or THRESHOLD.
        low, high: The gradient's ends (finite values).
        log: The gradient is logarithmic (every value positive, a wide span).
        higher_is_worse: Which end is bad: the dark end of the gradient, the red side of the
            threshold.
        threshold: The threshold's value (THRESHOLD mode).
    """

    mode: str
    low: float
    high: float
    log: bool
    higher_is_worse: bool
    threshold: float = 0.0

    def position(self, value: float) -> float:
        """Where `value` sits between low (0) and high (1)."""
        if not math.isfinite(value):
            return 0.0 if value < 0 else 1.0
        if self.high <= self.low:
            return 1.0
        if self.log:
            value = max(value, self.low)
            return math.log(value / self.low) / math.log(self.high / self.low)
        return (value - self.low) / (self.high - self.low)

    def bad(self, value: float) -> bool:
        """True when `value` is on the threshold's bad side (equal counts as within)."""
        return value > self.threshold if self.higher_is_worse else value < self.threshold

    def fill(self, value: float) -> str:
        """The fill of a node with `value`."""
        if self.mode == THRESHOLD:
            return BAD if self.bad(value) else GOOD
        t = min(1.0, max(0.0, self.position(value)))
        return viridis(1.0 - t if self.higher_is_worse else t)

    def colors(self, value: float) -> tuple[str, str]:
        """(fill, text) of a node with `value`, as the canvas's `set_overlay` takes them."""
        fill = self.fill(value)
        return fill, text_on(fill)


def coloring(values: list[float], higher_is_worse: bool, mode: str = GRADIENT,
             threshold: float | None = None) -> Coloring:
    """A colouring fitted to `values` (their finite range; the threshold defaults to the median)."""
    finite = sorted(v for v in values if math.isfinite(v))
    low, high = (finite[0], finite[-1]) if finite else (0.0, 1.0)
    log = low > 0 and high / low > LOG_SPAN
    if threshold is None:
        threshold = finite[len(finite) // 2] if finite else 0.0
    return Coloring(mode, low, high, log, higher_is_worse, threshold)


def gradient_stops(c: Coloring, count: int = 24) -> list[tuple[float, str]]:
    """(position 0..1 along the legend's bar, colour), low value on the left."""
    stops = []
    for i in range(count):
        t = i / (count - 1)
        stops.append((t, viridis(1.0 - t if c.higher_is_worse else t)))
    return stops


def legend_ticks(c: Coloring, count: int = 3) -> list[tuple[float, float]]:
    """(position 0..1, value) of a few values along a gradient legend, ends included."""
    ticks = []
    for i in range(count):
        t = i / (count - 1)
        if c.log:
            value = c.low * (c.high / c.low) ** t
        else:
            value = c.low + (c.high - c.low) * t
        ticks.append((t, value))
    return ticks


def format_value(value: float | None, unit: str = "") -> str:
    """A figure short enough for a legend tick or a table cell (1.2 M, 3.4 KiB, 27.1 dB)."""
    if value is None:
        return "–"
    if not math.isfinite(value):
        return ("∞" if value > 0 else "−∞") + (f" {unit}" if unit else "")
    if unit == "dB":
        return f"{value:.1f} dB"
    if unit == "B":
        for scale, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.1f} {name}"
        return f"{value:,.0f} B"
    for scale, name in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {name}" + (f"{unit}" if unit else "")
    text = f"{value:,.0f}" if float(value).is_integer() else f"{value:.3g}"
    return text + (f" {unit}" if unit else "")
