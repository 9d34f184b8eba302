"""Pictures in tests: render an SVG with Qt or Chromium, compare two pictures, read SVG text.

"Equal in content" (`Difference.equal_in_content`): the same size; after a 5 x 5 box blur (which
forgives the renderers' anti-aliasing and their glyph advances, a pixel or two apart at the end of
a long word), no 32 x 32 tile differs by more than TILE_LIMIT on average (a word moved by a few
pixels, or missing, changes its tile three times as much); and most pixels are identical
outright. A bound per tile, not a global average: one missing label is a tiny part of a tall
graph but most of its tile. Which strings are drawn, and where, is checked on the SVG's text
itself (`svg_texts`), so a lost digit cannot hide in the blur.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QByteArray, QRectF, QSize
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

SVG = "{http://www.w3.org/2000/svg}"
TILE = 32
BLUR = 5  # box blur width in pixels: a word drawn 1-2 px wider by one renderer still matches
TILE_LIMIT = 16.0  # mean |difference| (0-255) of the worst blurred tile
SAME_PIXELS = 0.95  # share of pixels within 8/255 on every channel
_MATRIX = re.compile(r"matrix\(([^)]*)\)")


def to_array(image: QImage) -> np.ndarray:
    """The picture over white, as an (h, w, 3) float array."""
    flat = QImage(image.size(), QImage.Format.Format_RGB888)
    flat.fill(QColor("white"))
    painter = QPainter(flat)
    source = image.copy()
    source.setDevicePixelRatio(1.0)  # one image pixel to one pixel, whatever it was drawn at
    painter.drawImage(0, 0, source)
    painter.end()
    rows = np.frombuffer(flat.constBits(), np.uint8).reshape(flat.height(), flat.bytesPerLine())
    return rows[:, : 3 * flat.width()].reshape(flat.height(), flat.width(), 3).astype(np.float32)


def qt_render(svg: bytes, size: QSize) -> QImage:
    """The SVG drawn by Qt's SVG renderer into an image of `size`, over white."""
    renderer = QSvgRenderer(QByteArray(svg))
    assert renderer.isValid()
    image = QImage(size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(QColor("white"))
    painter = QPainter(image)
    renderer.render(painter, QRectF(0, 0, size.width(), size.height()))
    painter.end()
    return image


def chromium_render(driver, svg_path: Path, size: QSize) -> QImage:
    """The SVG file as headless Chromium draws it in an <img> of `size` CSS pixels, over white."""
    w, h = size.width(), size.height()
    page = svg_path.with_suffix(".html")
    page.write_text(f'<!DOCTYPE html><html><body style="margin:0;background:white">'
                    f'<img id="p" src="{svg_path.name}" style="display:block;width:{w}px;'
                    f'height:{h}px"></body></html>')
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False})
    driver.get(page.as_uri())
    driver.execute_script("return document.getElementById('p').decode()")
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}})
    image = QImage()
    assert image.loadFromData(base64.b64decode(shot["data"]), "PNG")
    return image


def _box_1d(a: np.ndarray, axis: int, k: int) -> np.ndarray:
    """Mean over a window of `k` along `axis` (edges repeated), by a running sum."""
    pad = [(0, 0)] * a.ndim
    pad[axis] = (k // 2 + 1, k // 2)
    sums = np.cumsum(np.pad(a.astype(np.float64), pad, mode="edge"), axis=axis)
    n = a.shape[axis]
    upper = np.take(sums, range(k, k + n), axis=axis)
    lower = np.take(sums, range(0, n), axis=axis)
    return (upper - lower) / k


def _blur(a: np.ndarray) -> np.ndarray:
    return _box_1d(_box_1d(a, 0, BLUR), 1, BLUR)


@dataclass
class Difference:
    """How two pictures differ."""

    sizes: tuple[tuple[int, int], tuple[int, int]]
    worst_tile: float = 0.0  # mean blurred |difference| of the worst tile
    worst_at: tuple[int, int] = (0, 0)  # its top-left pixel (x, y)
    same: float = 1.0  # share of pixels equal within 8/255

    def equal_in_content(self) -> bool:
        """True when both pictures show the same thing."""
        return (self.sizes[0] == self.sizes[1] and self.worst_tile <= TILE_LIMIT
                and self.same >= SAME_PIXELS)


def difference(a: QImage, b: QImage) -> Difference:
    """Compare two pictures (see the module docstring), a band of tile rows at a time."""
    result = Difference(((a.width(), a.height()), (b.width(), b.height())))
    if result.sizes[0] != result.sizes[1]:
        return result
    x, y = to_array(a), to_array(b)
    result.same = float((np.abs(x - y).max(axis=2) <= 8).mean())
    h, w = x.shape[:2]
    band, reach = 8 * TILE, BLUR // 2
    for top in range(0, h, band):
        lo, hi = max(0, top - reach), min(h, top + band + reach)
        blurred = np.abs(_blur(x[lo:hi]) - _blur(y[lo:hi])).mean(axis=2)[top - lo:]
        for row in range(0, min(band, h - top), TILE):
            for left in range(0, w, TILE):
                value = float(blurred[row:row + TILE, left:left + TILE].mean())
                if value > result.worst_tile:
                    result.worst_tile, result.worst_at = value, (left, top + row)
    return result


@dataclass(frozen=True)
class Text:
    """One <text> of an SVG, at its anchor in the picture's coordinates."""

    text: str
    x: float
    y: float


def svg_texts(svg: bytes) -> list[Text]:
    """Every <text> element's string and position (the generator's group transforms applied).

    Parsing with ElementTree is itself the check that the file is well-formed XML.
    """
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    out: list[Text] = []

    def walk(element, matrix):
        found = _MATRIX.search(element.get("transform", ""))
        if found:
            a, b, c, d, e, f = (float(v) for v in found.group(1).split(","))
            m = matrix
            matrix = (m[0] * a + m[2] * b, m[1] * a + m[3] * b, m[0] * c + m[2] * d,
                      m[1] * c + m[3] * d, m[0] * e + m[2] * f + m[4], m[1] * e + m[3] * f + m[5])
        if element.tag == f"{SVG}text":
            x, y = float(element.get("x", 0)), float(element.get("y", 0))
            m = matrix
            out.append(Text("".join(element.itertext()), m[0] * x + m[2] * y + m[4],
                            m[1] * x + m[3] * y + m[5]))
            return
        for child in element:
            walk(child, matrix)

    walk(root, (1.0, 0.0, 0.0, 1.0, 0.0, 0.0))
    return out


def view_box(svg: bytes) -> tuple[float, float, float, float]:
    """The root element's viewBox."""
    return tuple(float(v) for v in ET.fromstring(svg).get("viewBox").split())
