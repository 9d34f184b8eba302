"""Pictures of views as SVG (text stays text) or as PNG at a chosen scale, written atomically."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QPoint, QRectF, QSize, QSizeF
from PySide6.QtGui import QColor, QFont, QFontInfo, QImage, QPainter, QRegion
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene, QWidget

from compiler.errors import KilnError
from compiler.fileio import atomic_write_bytes

FORMATS = ("svg", "png")
MIN_SCALE, MAX_SCALE = 1.0, 4.0
MARGIN = 24.0  # scene units around the boxes of a group
# Logical pixels are CSS pixels: at 96 dpi the file's width in mm is its viewBox in px, so a
# browser shows the picture at the size the PNG export has at scale 1.
SVG_DPI = 96
MAX_PIXELS = 100_000_000  # 400 MB of pixels: a bigger PNG is refused before allocating it
_HINTS = QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing


@dataclass(frozen=True)
class Picture:
    """Something to export: its size in logical pixels and how to draw it with a painter."""

    size: QSizeF
    draw: Callable[[QPainter], None]
    title: str


def scene_picture(scene: QGraphicsScene, source: QRectF, background: QColor,
                  title: str) -> Picture:
    """The part `source` of `scene`, on `background`, one logical pixel per scene unit."""
    source = QRectF(source)

    def draw(painter: QPainter) -> None:
        target = QRectF(0, 0, source.width(), source.height())
        painter.fillRect(target, background)
        # Cached items would be drawn as pixmaps, their text included: draw each one afresh.
        items = scene.items()
        modes = [item.cacheMode() for item in items]
        for item in items:
            item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        try:
            scene.render(painter, target, source)
        finally:
            for item, mode in zip(items, modes):
                item.setCacheMode(mode)

    return Picture(source.size(), draw, title)


def canvas_region(canvas, keys: Iterable | None = None, margin: float = MARGIN) -> QRectF:
    """The scene rectangle of the boxes `keys` (a group) plus `margin`; all of it for None.

    `canvas` is a GraphCanvas (its `box_rect` gives a box's rectangle). Keys not shown are
    ignored; a group with none shown is refused.
    """
    scene = canvas.scene()
    if keys is None:
        return scene.sceneRect().united(scene.itemsBoundingRect())
    region = QRectF()
    for key in keys:
        rect = canvas.box_rect(key)
        if rect is not None:
            region = rect if region.isNull() else region.united(rect)
    if region.isNull():
        raise KilnError("none of the nodes to export is on the canvas")
    return region.adjusted(-margin, -margin, margin, margin)


def widget_picture(widget: QWidget, title: str) -> Picture:
    """`widget` and its children as they paint themselves, at the widget's current size."""

    def draw(painter: QPainter) -> None:
        widget.render(painter, QPoint(0, 0), QRegion(widget.rect()),
                      QWidget.RenderFlag.DrawWindowBackground
                      | QWidget.RenderFlag.DrawChildren)

    return Picture(QSizeF(widget.size()), draw, title)


def _families(svg: str) -> str:
    """Name the font each text was drawn with, not Qt's generic family ("Sans Serif").

    Another renderer resolves a generic name its own way; the concrete family lets a browser
    or Qt's renderer lay out the same glyphs the PNG has.
    """
    resolved: dict[str, str] = {}

    def concrete(match: re.Match) -> str:
        family = match.group(1)
        if family not in resolved:
            resolved[family] = QFontInfo(QFont(family)).family() or family
        return f'font-family="{resolved[family]}"'

    return re.sub(r'font-family="([^"]*)"', concrete, svg)


def svg_bytes(picture: Picture) -> bytes:
    """The picture as an SVG document; text is written as <text>, not as outlines."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setResolution(SVG_DPI)
    size = picture.size
    generator.setSize(QSize(math.ceil(size.width()), math.ceil(size.height())))
    generator.setViewBox(QRectF(0, 0, size.width(), size.height()))
    generator.setTitle(picture.title)
    generator.setDescription("Exported by Kiln")
    painter = QPainter(generator)
    painter.setRenderHints(_HINTS)
    try:
        picture.draw(painter)
    finally:
        painter.end()
    return _families(bytes(buffer.data()).decode("utf-8")).encode("utf-8")


def check_scale(scale: float) -> float:
    """`scale` if PNG export supports it, else a one-sentence error."""
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise KilnError(f"a PNG scale must be between {MIN_SCALE:g} and {MAX_SCALE:g}, "
                        f"not {scale:g}")
    return scale


def png_image(picture: Picture, scale: float = 1.0) -> QImage:
    """The picture drawn at `scale` device pixels per logical pixel."""
    check_scale(scale)
    width = math.ceil(picture.size.width() * scale)
    height = math.ceil(picture.size.height() * scale)
    if width * height > MAX_PIXELS or width <= 0 or height <= 0:
        raise KilnError(f"a {width} x {height} pixel picture cannot be made; choose a smaller "
                        "scale or export SVG")
    image = QImage(QSize(width, height), QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(QColor(0, 0, 0, 0))
    painter = QPainter(image)
    painter.setRenderHints(_HINTS)
    # Scaled as an SVG viewer scales it (not by device pixel ratio): text is laid out as in the
    # SVG, at the design size, so both files place every word alike.
    painter.scale(scale, scale)
    try:
        picture.draw(painter)
    finally:
        painter.end()
    return image


def png_bytes(picture: Picture, scale: float = 1.0) -> bytes:
    """The picture at `scale` as PNG file contents."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not png_image(picture, scale).save(buffer, "PNG"):
        raise KilnError("the picture could not be encoded as PNG")
    return bytes(buffer.data())


def format_of(path: str | Path) -> str:
    """"svg" or "png" from the file's suffix, else a one-sentence error."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise KilnError(f"{Path(path).name}: a picture is saved as .svg or .png")
    return suffix


def write_picture(picture: Picture, path: str | Path, scale: float = 1.0) -> Path:
    """Write the picture to `path` (its suffix picks SVG or PNG) atomically; returns the path.

    The old file stays whole until the new one is complete (write, then rename).
    """
    target = Path(path)
    kind = format_of(target)
    data = svg_bytes(picture) if kind == "svg" else png_bytes(picture, scale)
    try:
        atomic_write_bytes(target, data)
    except OSError as exc:
        raise KilnError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
