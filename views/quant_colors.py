"""The SQNR bins the quantization overlay colours nodes by, their colours, and text on them.

Five bins of 10 dB from viridis (readable with every common colour-vision deficiency, and in
grey): dark for the layers that lose most, light for those that lose least. Every text the
overlay writes takes, for the fill under it, whichever of a few text colours contrasts most:
WCAG asks 4.5:1 for normal text, which no single text colour meets on all five fills (white
gives 3.8:1 on the teal, the canvas's dark grey 2.1:1 on the blue). A box's body is its bin's
colour mixed toward white, as a node's body is its category's, so the lines under the title
stay dark on light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_CONTRAST = 4.5  # WCAG 2 AA, normal text
TEXT_CHOICES = ("#1d232a", "#ffffff", "#000000")  # the canvas's text colour first
BODY_MIX = 0.55  # how far a box's body goes from its bin's colour toward white

# Scale and zero point written on the edges: dark text on a white pill.
EDGE_LABEL_FILL, EDGE_LABEL_BORDER, EDGE_LABEL_TEXT = "#ffffff", "#9aa3ad", "#1d232a"


def luminance(color: str) -> float:
    """WCAG relative luminance of a #rrggbb colour (0 black, 1 white)."""
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours, 1 (none) to 21 (black on white)."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def text_on(fill: str) -> str:
    """The text colour that reads best on `fill` (the canvas's own dark grey on a tie)."""
    return max(TEXT_CHOICES, key=lambda text: (contrast(fill, text), text == TEXT_CHOICES[0]))


def mix_white(color: str, amount: float) -> str:
    """`color` moved `amount` of the way to white (0: itself, 1: white)."""
    channels = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in channels)


_FILLS = ((40.0, "#fde725"), (30.0, "#5ec962"), (20.0, "#21918c"), (10.0, "#3b528b"),
          (-math.inf, "#440154"))
# (lower bound in dB, fill, text colour), best first.
SQNR_BINS: tuple[tuple[float, str, str], ...] = tuple(
    (low, fill, text_on(fill)) for low, fill in _FILLS)
LABELS = ("≥ 40", "30–40", "20–30", "10–20", "< 10")  # dB


@dataclass(frozen=True)
class OverlayPalette:
    """What a box of the overlay paints: fills, border, and the text on each fill."""

    head: str  # the title band: the bin's colour
    title: str  # text on the title band
    body: str  # the lines' background: the bin's colour mixed toward white
    text: str  # every line on the body (values, names and shapes alike)
    border: str


def overlay_palette(fill: str) -> OverlayPalette:
    """The colours of a box whose output falls in the bin coloured `fill`."""
    body = mix_white(fill, BODY_MIX)
    border = "#" + "".join(f"{round(int(fill[i:i + 2], 16) * 0.7):02x}" for i in (1, 3, 5))
    return OverlayPalette(fill, text_on(fill), body, text_on(body), border)


def sqnr_bin(db: float) -> int:
    """The index of the bin `db` falls in (an exact tensor, infinite SQNR, is in the best)."""
    if math.isnan(db):
        return len(SQNR_BINS) - 1
    return next(i for i, (low, _, _) in enumerate(SQNR_BINS) if db >= low)


def sqnr_color(db: float) -> tuple[str, str]:
    """(fill, text) colours of the bin `db` falls in."""
    _, fill, text = SQNR_BINS[sqnr_bin(db)]
    return fill, text
