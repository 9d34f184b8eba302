"""Colours and fonts of the graph canvas: one place to tune how a model looks."""

from __future__ import annotations

from functools import cache

from PySide6.QtGui import QColor, QFont

from compiler import ops
from views import labels

# Header colour per operator category (compiler.ops.CATEGORIES). Mid-dark and distinct in hue,
# so white titles read well and neighbouring categories do not blur together when zoomed out;
# pure red is kept for invalid nodes.
CATEGORY_COLORS: dict[str, str] = {
    "conv": "#3465a4",  # blue
    "matmul": "#1f7f7a",  # teal
    "pool": "#3d7c3a",  # green
    "norm": "#6750a4",  # indigo
    "activation": "#d06818",  # orange: not red, which means "invalid" here
    "elementwise": "#8a7a16",  # olive
    "reduce": "#9c4f96",  # violet
    "shape": "#6e5b4f",  # brown
    "quant": "#c2185b",  # raspberry
    "constant": "#6f7780",  # grey
    "misc": "#4e5d6c",  # slate
    "group": "#37474f",  # blue grey: a closed scope, separable pair or residual block
}
UNKNOWN = "#4e5d6c"

# Graph inputs, outputs and constant boxes: pale pills and a pale box, dark text.
INPUT_FILL, INPUT_BORDER = "#e3edf9", "#5677a6"
OUTPUT_FILL, OUTPUT_BORDER = "#e4f2e4", "#4f8a4f"
CONST_FILL, CONST_BORDER = "#f1f1f1", "#9a9a9a"
# Open groups: a pale frame behind their members, its title band a shade darker.
FRAME_FILL, FRAME_HEAD, FRAME_BORDER = "#eef1f4", "#dde3e9", "#9aa7b4"

PROBLEM = "#d32f2f"
PROBLEM_BODY = "#fbd9d5"
SELECTED = "#0a7cff"  # selection outline and the selected node's edges
HIGHLIGHT = "#ffd54f"  # search matches
BACKGROUND = "#fbfbfc"
EDGE = "#7d8894"
EDGE_LOW = "#b4bcc5"  # edges when zoomed far out: lighter, so boxes stay the figure
EDGE_INT = "#c2185b"  # edges carrying 8-bit integers (quantized tensors)
TEXT = "#1d232a"
TEXT_MUTED = "#5f6b77"
TITLE_TEXT = "#ffffff"

# Level-of-detail thresholds, in device pixels per scene unit.
LOD_TEXT = 0.45  # below: boxes without text
LOD_ARROWS = 0.55  # below: edges without arrow heads
LOD_PLAIN = 0.12  # below: boxes as plain rectangles (no rounded corners, no border)


@cache
def color(name: str) -> QColor:
    """A cached QColor (the canvas asks for the same few colours thousands of times)."""
    return QColor(name)


def category_of(op: str) -> str:
    """The registry category of an operator; unknown operators count as misc."""
    opdef = ops.get(op)
    return opdef.category if opdef else "misc"


@cache
def header_color(category: str) -> QColor:
    """Fill of a node's title band."""
    return QColor(CATEGORY_COLORS.get(category, UNKNOWN))


@cache
def body_color(category: str) -> QColor:
    """Fill of a node's body: the category colour mixed far toward white."""
    return tint(header_color(category), 0.88)


@cache
def border_color(category: str) -> QColor:
    """Outline of a node: the category colour, darker."""
    return header_color(category).darker(135)


def tint(base: QColor, amount: float) -> QColor:
    """`base` mixed with white; amount 1 is white."""
    return QColor(round(base.red() + (255 - base.red()) * amount),
                  round(base.green() + (255 - base.green()) * amount),
                  round(base.blue() + (255 - base.blue()) * amount))


@cache
def title_font() -> QFont:
    """Bold font of box titles, at the pixel size the layout measured."""
    font = QFont()
    font.setPixelSize(labels.TITLE_PX)
    font.setBold(True)
    return font


@cache
def body_font() -> QFont:
    """Font of the lines under a title."""
    font = QFont()
    font.setPixelSize(labels.BODY_PX)
    return font


@cache
def body_bold_font() -> QFont:
    """Font of the input names of constant lines (`W`, `B`)."""
    font = QFont(body_font())
    font.setBold(True)
    return font
