"""The frame of an open group on the canvas: a pale panel behind its members, titled."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem

from views import style
from views.group_layout import FRAME_HEADER
from views.layout import Box, Key

RADIUS = 7.0


class FrameItem(QGraphicsItem):
    """An open group: drawn under the boxes; its title band is what a click closes."""

    def __init__(self, key: Key, box: Box, title: str, count: int):
        super().__init__()
        self.key = key
        self.title = title
        self.count = count
        self.rect = QRectF(0, 0, box.w, box.h)
        self.selected = False
        self.highlighted = False
        self.setPos(box.x, box.y)
        self.setZValue(0)

    def boundingRect(self) -> QRectF:  # noqa: D102 - Qt override
        return self.rect.adjusted(-3, -3, 3, 3)

    def shape(self) -> QPainterPath:  # noqa: D102 - Qt override: only the title band is hit
        path = QPainterPath()
        path.addRect(self.header())
        return path

    def header(self) -> QRectF:
        """The title band, in item coordinates."""
        return QRectF(0, 0, self.rect.width(), FRAME_HEADER - 4)

    def set_state(self, *, selected=None, highlighted=None) -> None:
        """Selection and search outlines, like a box's."""
        if selected is not None:
            self.selected = selected
        if highlighted is not None:
            self.highlighted = highlighted
        self.update()

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget=None) -> None:
        """A rounded panel with a title band: ▾, the title and how many nodes it holds."""
        outline = QPainterPath()
        outline.addRoundedRect(self.rect, RADIUS, RADIUS)
        painter.setPen(QPen(style.color(style.FRAME_BORDER), 1.0))
        painter.setBrush(style.color(style.FRAME_FILL))
        painter.drawPath(outline)
        band = QPainterPath()  # a shape, not a clip: SVG export drops clips
        band.addRect(self.header())
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(style.color(style.FRAME_HEAD))
        painter.drawPath(outline.intersected(band))
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        if lod >= style.LOD_TEXT:
            painter.setFont(style.title_font())
            painter.setPen(style.color(style.TEXT))
            text = f"▾ {self.title}"
            rect = self.header().adjusted(8, 0, -8, 0)
            painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                             text)
            painter.setFont(style.body_font())
            painter.setPen(style.color(style.TEXT_MUTED))
            painter.drawText(rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                             f"{self.count} nodes")
        for on, color, width in ((self.highlighted, style.HIGHLIGHT, 5.0),
                                 (self.selected, style.SELECTED, 2.5)):
            if on:
                painter.setPen(QPen(style.color(color), width))
                painter.setBrush(Qt.BrushStyle.NoBrush)
                painter.drawPath(outline)
