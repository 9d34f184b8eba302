"""A grid of small heat maps, one per channel, on one colour scale, with its colour bar.

Values map to viridis between the scale's ends (a difference map uses a red-blue scale
symmetric about zero, white at zero); NaN and infinities are drawn grey. Each cell is the
channel's map scaled up without smoothing, so one pixel of the tensor stays one square.
Labels are drawn on the panel's background, never on the colours.

Signals:
    channelClicked(int): the user clicked a channel's cell.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from PySide6.QtCore import QPoint, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QMouseEvent, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from views import style

LABEL_H = 14  # the channel number above each cell
BAR_H = 10  # the colour bar's height
GAP = 6
_NONFINITE = (150, 150, 150)


@cache
def _lut(name: str) -> np.ndarray:
    """256 RGB bytes of a matplotlib colour map (loaded on first use)."""
    from matplotlib import colormaps

    return (colormaps[name](np.linspace(0, 1, 256))[:, :3] * 255).round().astype(np.uint8)


def colorize(values: np.ndarray, low: float, high: float, diverging: bool = False) -> np.ndarray:
    """RGB bytes [rows, columns, 3] of a 2-D array on the scale [low, high]."""
    values = np.asarray(values, np.float64)
    finite = np.isfinite(values)
    span = high - low if high > low else 1.0
    index = np.clip((np.where(finite, values, low) - low) / span * 255, 0, 255).round()
    rgb = _lut("RdBu_r" if diverging else "viridis")[index.astype(np.intp)]
    rgb[~finite] = _NONFINITE
    return rgb


def to_image(rgb: np.ndarray) -> QImage:
    """A QImage owning a copy of RGB bytes [rows, columns, 3]."""
    rgb = np.ascontiguousarray(rgb)
    rows, columns = rgb.shape[:2]
    return QImage(rgb.tobytes(), columns, rows, 3 * columns, QImage.Format.Format_RGB888).copy()


def _fmt(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class HeatMapGrid(QWidget):
    """Channels `first` .. `first + count - 1` of maps [channels, rows, columns], in a grid."""

    channelClicked = Signal(int)

    def __init__(self, title: str = "", cell: int = 64, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = title
        self.cell = cell  # the preferred cell side, pixels
        self.maps = np.zeros((0, 1, 1))
        self.low = self.high = 0.0
        self.diverging = False
        self.first, self.count = 0, 0
        self.selected: int | None = None
        self.message = "No values."
        self._images: dict[int, QImage] = {}
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(self.cell + 2 * GAP)

    # -- content ------------------------------------------------------------------------------

    def set_maps(self, maps: np.ndarray, low: float, high: float, *, diverging: bool = False,
                 first: int = 0, count: int | None = None) -> None:
        """Show `count` channels of `maps` from `first`, coloured on [low, high]."""
        self.maps = maps
        self.low, self.high, self.diverging = float(low), float(high), diverging
        self.first = max(0, min(first, max(len(maps) - 1, 0)))
        self.count = len(maps) - self.first if count is None else \
            max(0, min(count, len(maps) - self.first))
        self.message = ""
        self._images.clear()
        self._fit()

    def clear(self, message: str) -> None:
        """Show `message` instead of maps."""
        self.maps, self.count, self.message = np.zeros((0, 1, 1)), 0, message
        self._images.clear()
        self._fit()

    def _fit(self) -> None:
        """Ask for the height the content needs at the present width."""
        self.setMinimumHeight(self.heightForWidth(max(self.width(), self.minimumWidth())))
        self.updateGeometry()
        self.update()

    def set_selected(self, channel: int | None) -> None:
        """Outline `channel`'s cell (None: none)."""
        self.selected = channel
        self.update()

    def image(self, channel: int) -> QImage:
        """Channel `channel`'s map as drawn (computed once per content)."""
        if channel not in self._images:
            self._images[channel] = to_image(colorize(self.maps[channel], self.low, self.high,
                                                      self.diverging))
        return self._images[channel]

    # -- geometry -----------------------------------------------------------------------------

    def _cell_size(self) -> QSize:
        """Cell width and height: the map's aspect, `cell` pixels on its longer side."""
        rows, columns = (self.maps.shape[1], self.maps.shape[2]) if self.count else (1, 1)
        wide = max(self.width() - 2 * GAP, self.cell) if self.count == 1 and rows == 1 else 0
        if wide:  # one strip (a 1-D tensor): as wide as the panel
            return QSize(wide, max(12, min(self.cell // 2, 40)))
        side = self.cell
        if columns >= rows:
            return QSize(side, max(4, round(side * rows / columns)))
        return QSize(max(4, round(side * columns / rows)), side)

    def _columns(self) -> int:
        size = self._cell_size()
        return max(1, min(self.count, (self.width() - GAP) // (size.width() + GAP)))

    def _grid_top(self) -> int:
        return LABEL_H + 4 if self.title else 0

    def cell_rect(self, index: int) -> QRect:
        """The rectangle of the `index`-th shown cell (its map, without the label)."""
        size, columns = self._cell_size(), self._columns()
        row, column = divmod(index, columns)
        x = GAP + column * (size.width() + GAP)
        y = self._grid_top() + row * (size.height() + LABEL_H + GAP) + LABEL_H
        return QRect(x, y, size.width(), size.height())

    def channel_rect(self, channel: int) -> QRect | None:
        """Where channel `channel` is drawn (None when it is not shown)."""
        index = channel - self.first
        return self.cell_rect(index) if 0 <= index < self.count else None

    def sizeHint(self) -> QSize:  # noqa: D102 (Qt override)
        return QSize(4 * (self.cell + GAP) + GAP, self.heightForWidth(4 * (self.cell + GAP)))

    def hasHeightForWidth(self) -> bool:  # noqa: D102 (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: D102 (Qt override)
        if not self.count:
            return self._grid_top() + 40
        size = self._cell_size()
        columns = max(1, min(self.count, (width - GAP) // (size.width() + GAP)))
        rows = math.ceil(self.count / columns)
        return self._grid_top() + rows * (size.height() + LABEL_H + GAP) + BAR_H + 2 * LABEL_H

    def resizeEvent(self, event) -> None:  # noqa: D102 (Qt override)
        super().resizeEvent(event)
        self.setMinimumHeight(self.heightForWidth(self.width()))

    # -- drawing ------------------------------------------------------------------------------

    def paintEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor(style.BACKGROUND))
        font = QFont(self.font())
        font.setPointSizeF(max(7.0, font.pointSizeF() - 1))
        painter.setFont(font)
        text = QColor(style.TEXT)
        painter.setPen(text)
        if self.title:
            bold = QFont(font)
            bold.setBold(True)
            painter.setFont(bold)
            painter.drawText(QRect(GAP, 0, self.width() - 2 * GAP, LABEL_H + 2),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             self.title)
            painter.setFont(font)
        if not self.count:
            painter.setPen(QColor(style.TEXT_MUTED))
            painter.drawText(self.rect().adjusted(GAP, self._grid_top(), -GAP, 0),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop |
                             Qt.TextFlag.TextWordWrap, self.message)
            return
        bottom = 0
        for index in range(self.count):
            channel = self.first + index
            rect = self.cell_rect(index)
            painter.setPen(text)
            painter.drawText(QRect(rect.left(), rect.top() - LABEL_H, rect.width(), LABEL_H),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom,
                             f"{channel}" if len(self.maps) > 1 else "")
            painter.drawImage(QRectF(rect), self.image(channel))
            selected = channel == self.selected and len(self.maps) > 1
            painter.setPen(QPen(QColor(style.SELECTED if selected else style.EDGE_LOW),
                                2 if selected else 1))
            painter.drawRect(rect.adjusted(0, 0, -1, -1))
            bottom = max(bottom, rect.bottom())
        self._draw_bar(painter, bottom + GAP, text)

    def _draw_bar(self, painter: QPainter, top: int, text: QColor) -> None:
        """The colour bar under the grid, its two ends written beside it."""
        width = min(self.width() - 2 * GAP, 240)
        ramp = np.linspace(self.low, self.high, max(width, 2))[None, :]
        painter.drawImage(QRect(GAP, top, width, BAR_H),
                          to_image(colorize(ramp, self.low, self.high, self.diverging)))
        painter.setPen(text)
        labels = QRect(GAP, top + BAR_H, width, LABEL_H + 2)
        painter.drawText(labels, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop,
                         _fmt(self.low))
        painter.drawText(labels, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop,
                         _fmt(self.high))
        if self.diverging:
            painter.drawText(labels, Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop,
                             "0")

    # -- mouse --------------------------------------------------------------------------------

    def channel_at(self, pos: QPoint) -> int | None:
        """The channel whose cell holds `pos` (None: none)."""
        for index in range(self.count):
            if self.cell_rect(index).contains(pos):
                return self.first + index
        return None

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        channel = self.channel_at(event.position().toPoint())
        if channel is not None and event.button() == Qt.MouseButton.LeftButton:
            self.channelClicked.emit(channel)
            event.accept()
            return
        super().mousePressEvent(event)
