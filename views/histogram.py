"""One tensor's histogram with its quantization range as two handles to drag.

Counts are drawn on a log scale (a few outliers next to millions of values near zero are the
whole point of choosing a range). Dashed lines mark the float min and max the profile saw; the
chosen range is the unshaded band between two handles; outside it values clip. When the
quantization step is wide enough on screen, its grid is drawn as ticks. The wheel zooms about
the cursor, a double click shows everything again.

Signals:
    rangeDragged(low, high): a handle moves (many times a second while dragging).
    rangeChosen(low, high): a handle was released at a new place.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPen, QWheelEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from views import style

HANDLE_PX = 6  # half-width of a handle's grab zone
_CLIPPED = QColor(211, 47, 47, 40)
_BARS = QColor("#3465a4")
_HANDLE = QColor("#c2185b")
_GRID = QColor(194, 24, 91, 90)


class HistogramView(QWidget):
    """A painted histogram (bins over [lo, hi]) with a draggable [low, high] range."""

    rangeDragged = Signal(float, float)
    rangeChosen = Signal(float, float)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setMinimumSize(260, 150)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMouseTracking(True)
        self.counts = np.zeros(0)
        self.lo = self.hi = 0.0  # the histogram's span (the float min and max)
        self.low = self.high = 0.0  # the chosen range
        self.step = 0.0  # the quantization step of the chosen range
        self.message = "No tensor selected."
        self.view = (0.0, 1.0)  # the x interval shown
        self._drag: str | None = None  # "low" or "high" while a handle is held
        self._start: tuple[float, float] | None = None

    # -- content ------------------------------------------------------------------------------

    def set_histogram(self, counts, lo: float, hi: float, low: float, high: float,
                      step: float = 0.0) -> None:
        """Show `counts` over [lo, hi] with the chosen range [low, high] and its grid step."""
        self.counts = np.asarray(counts, np.float64)
        self.lo, self.hi = float(lo), float(hi)
        self.low, self.high, self.step = float(low), float(high), float(step)
        self.view = self._full_view()
        self.update()

    def clear(self, message: str) -> None:
        """Show `message` instead of a histogram."""
        self.counts = np.zeros(0)
        self.message = message
        self.update()

    def set_range(self, low: float, high: float, step: float = 0.0) -> None:
        """Move the handles (typed values, undo) without emitting anything."""
        self.low, self.high, self.step = float(low), float(high), float(step)
        self.update()

    def _full_view(self) -> tuple[float, float]:
        left, right = min(self.lo, self.low, 0.0), max(self.hi, self.high, 0.0)
        if right <= left:
            right = left + 1.0
        margin = (right - left) * 0.04
        return left - margin, right + margin

    # -- geometry -----------------------------------------------------------------------------

    def plot_rect(self) -> QRectF:
        """Where the bars go (room below for the axis labels)."""
        return QRectF(8, 8, max(1, self.width() - 16), max(1, self.height() - 30))

    def x_of(self, value: float) -> float:
        """The widget x of a real value."""
        r = self.plot_rect()
        a, b = self.view
        return r.left() + (value - a) / (b - a) * r.width()

    def value_at(self, x: float) -> float:
        """The real value at widget x."""
        r = self.plot_rect()
        a, b = self.view
        return a + (x - r.left()) / r.width() * (b - a)

    # -- painting -----------------------------------------------------------------------------

    def paintEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        p = QPainter(self)
        p.fillRect(self.rect(), QColor(style.BACKGROUND))
        font = QFont(self.font())
        font.setPixelSize(11)
        p.setFont(font)
        if not self.counts.size:
            p.setPen(QColor(style.TEXT_MUTED))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.message)
            return
        r = self.plot_rect()
        p.fillRect(r, QColor("#ffffff"))
        self._paint_bars(p, r)
        self._paint_range(p, r)
        self._paint_axis(p, r)
        p.end()

    def _paint_bars(self, p: QPainter, r: QRectF) -> None:
        counts = self.counts
        top = math.log1p(float(counts.max())) or 1.0
        width = (self.hi - self.lo) / len(counts) if self.hi > self.lo else 0.0
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(_BARS)
        if width == 0:  # every value equal: one bar
            x = self.x_of(self.lo)
            p.drawRect(QRectF(x - 1.5, r.top(), 3, r.height()))
            return
        # One rectangle per screen column at most (the tallest bar in it): 2,048 bins on 300
        # pixels stay cheap, and numpy does the per-bin work (a drag repaints many times).
        left, right, bottom = r.left(), r.right(), r.bottom()
        edges = self.lo + width * np.arange(len(counts) + 1)
        xs = (edges - self.view[0]) / (self.view[1] - self.view[0]) * r.width() + left
        heights = np.log1p(counts) / top * r.height()
        shown = (heights > 0) & (xs[1:] >= left) & (xs[:-1] <= right)
        if not shown.any():
            return
        first = int(left) - 1
        columns = np.clip(np.floor(xs[:-1][shown]).astype(np.int64), first, int(right) + 1)
        tallest = np.zeros(int(right) + 3 - first)
        ends = np.full(len(tallest), -np.inf)
        np.maximum.at(tallest, columns - first, heights[shown])
        np.maximum.at(ends, columns - first, xs[1:][shown])
        used = np.flatnonzero(ends > -np.inf)
        lefts = np.maximum((used + first).astype(np.float64), left)
        rights = np.minimum(np.maximum(ends[used], lefts + 1.0), right)
        p.drawRects([QRectF(x0, bottom - h, x1 - x0, h) for x0, x1, h in
                     zip(lefts.tolist(), rights.tolist(), tallest[used].tolist())])

    def _paint_range(self, p: QPainter, r: QRectF) -> None:
        x_low, x_high = self.x_of(self.low), self.x_of(self.high)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(_CLIPPED)
        if x_low > r.left():
            p.drawRect(QRectF(r.left(), r.top(), min(x_low, r.right()) - r.left(), r.height()))
        if x_high < r.right():
            left = max(x_high, r.left())
            p.drawRect(QRectF(left, r.top(), r.right() - left, r.height()))
        if self.step > 0:  # the grid, when its lines are at least 4 pixels apart
            spacing = self.x_of(self.low + self.step) - x_low
            if spacing >= 4:
                p.setPen(QPen(_GRID, 1))
                first = math.ceil((self.view[0] - self.low) / self.step)
                last = math.floor((min(self.view[1], self.high) - self.low) / self.step)
                for k in range(max(first, 0), last + 1):
                    x = self.x_of(self.low + k * self.step)
                    p.drawLine(QPointF(x, r.bottom() - 6), QPointF(x, r.bottom()))
        dashed = QPen(QColor(style.TEXT_MUTED), 1, Qt.PenStyle.DashLine)
        p.setPen(dashed)
        for value in (self.lo, self.hi):
            x = self.x_of(value)
            p.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()))
        for x in (x_low, x_high):
            p.setPen(QPen(_HANDLE, 2))
            p.drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()))
            p.setBrush(_HANDLE)
            p.drawRect(QRectF(x - HANDLE_PX / 2, r.top(), HANDLE_PX, 12))

    def _paint_axis(self, p: QPainter, r: QRectF) -> None:
        p.setPen(QColor(style.TEXT_MUTED))
        y = r.bottom() + 14
        for value, align in ((self.view[0], Qt.AlignmentFlag.AlignLeft),
                             (self.view[1], Qt.AlignmentFlag.AlignRight)):
            box = QRectF(r.left(), y - 10, r.width(), 14)
            p.drawText(box, align | Qt.AlignmentFlag.AlignVCenter, f"{value:.4g}")
        p.setPen(QColor(_HANDLE))
        text = f"[{self.low:.4g}, {self.high:.4g}]"
        p.drawText(QRectF(r.left(), y - 10, r.width(), 14), Qt.AlignmentFlag.AlignCenter, text)

    # -- interaction --------------------------------------------------------------------------

    def handle_at(self, x: float) -> str | None:
        """"low" or "high" when x is on that handle (the nearer one when both are)."""
        d_low, d_high = abs(x - self.x_of(self.low)), abs(x - self.x_of(self.high))
        if min(d_low, d_high) > HANDLE_PX:
            return None
        return "low" if d_low < d_high or (d_low == d_high and x < self.x_of(self.low)) \
            else "high"

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        if event.button() == Qt.MouseButton.LeftButton and self.counts.size:
            self._drag = self.handle_at(event.position().x())
            self._start = (self.low, self.high)
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        x = event.position().x()
        if self._drag is None:
            over = self.counts.size and self.handle_at(x) is not None
            self.setCursor(Qt.CursorShape.SizeHorCursor if over else Qt.CursorShape.ArrowCursor)
            return
        value = self.value_at(x)
        if self._drag == "low":
            self.low = min(value, self.high)
        else:
            self.high = max(value, self.low)
        if self.step > 0 and self._start is not None:  # keep the step's count of levels
            levels = (self._start[1] - self._start[0]) / self.step
            self.step = (self.high - self.low) / levels if levels else 0.0
        self.update()
        self.rangeDragged.emit(self.low, self.high)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        if self._drag is not None and event.button() == Qt.MouseButton.LeftButton:
            self._drag = None
            event.accept()  # handled here: the window must not take it for a separator drag
            if self._start != (self.low, self.high):
                self.rangeChosen.emit(self.low, self.high)
            return
        super().mouseReleaseEvent(event)

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: D102 (Qt override)
        if not self.counts.size:
            return
        factor = 0.8 if event.angleDelta().y() > 0 else 1.25
        centre = self.value_at(event.position().x())
        a, b = self.view
        self.view = (centre - (centre - a) * factor, centre + (b - centre) * factor)
        self.update()

    def mouseDoubleClickEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        self.view = self._full_view()
        self.update()
