"""The exploration's scatter: accuracy against instructions, flash as colour, fit as marker.

A filled circle fits the board, a cross is over its budget; a red ring marks the Pareto
front, a dashed line the lowest accuracy the bound allows. Hovering a point shows its
description (a tooltip the caller gives as text); a click asks to apply it; Ctrl+click adds
it to (or takes it from) a selection of at most two, for the compare view.

Signals:
    hovered(int): the point under the mouse (-1: none).
    applyRequested(int): a point was clicked.
    selectionChanged(list): the points Ctrl+clicked (up to two, the oldest dropped first).
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QLinearGradient, QMouseEvent, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from views import style
from views.metric_colors import viridis

MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 58, 78, 14, 40
RADIUS = 5.0
PICK = 9.0  # pixels from a point's centre that still pick it
FRONT = "#d62728"
SELECTED = style.SELECTED
FLOOR = "#7f7f7f"


class ExploreScatter(QWidget):
    """Draws points (`compiler.explore.points.Point`), the floor line and a flash colour bar."""

    hovered = Signal(int)
    applyRequested = Signal(int)
    selectionChanged = Signal(list)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.points: list = []
        self.floor: float | None = None
        self.applied: int | None = None
        self.selection: list[int] = []
        self.hover: int | None = None
        self.describe = lambda _number: ""  # the tooltip text of a point
        self.x_label = "instructions"
        self.y_label = "accuracy (%)"
        self.message = "No exploration yet."
        self.setMouseTracking(True)
        self.setMinimumSize(320, 220)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:  # noqa: D102 (Qt override)
        return QSize(560, 340)

    # -- data ---------------------------------------------------------------------------------

    def set_points(self, points: Sequence, floor: float | None, x_label: str, y_label: str,
                   message: str = "") -> None:
        """Show `points`; `floor` is the bound's accuracy line (percent), None for none."""
        self.points, self.floor = list(points), floor
        self.x_label, self.y_label = x_label, y_label
        self.message = message or "No measured point yet."
        known = {p.number for p in self.points}
        kept = [n for n in self.selection if n in known]
        if kept != self.selection:
            self.selection = kept
            self.selectionChanged.emit(list(kept))
        self.update()

    def set_applied(self, number: int | None) -> None:
        """Outline the point the document uses (None: none)."""
        self.applied = number
        self.update()

    def set_selection(self, numbers: Sequence[int]) -> None:
        """Select these points (at most the last two)."""
        self.selection = list(numbers)[-2:]
        self.selectionChanged.emit(list(self.selection))
        self.update()

    # -- geometry -----------------------------------------------------------------------------

    def plot_rect(self) -> QRectF:
        """Where the axes are, in widget pixels."""
        return QRectF(MARGIN_LEFT, MARGIN_TOP, max(10.0, self.width() - MARGIN_LEFT
                                                   - MARGIN_RIGHT),
                      max(10.0, self.height() - MARGIN_TOP - MARGIN_BOTTOM))

    def _ranges(self) -> tuple[float, float, float, float]:
        xs = [p.instructions for p in self.points] or [0, 1]
        ys = [p.score for p in self.points] + ([self.floor] if self.floor is not None else [])
        ys = ys or [0.0, 100.0]
        x0, x1 = min(xs), max(xs)
        y0, y1 = min(ys), max(ys)
        dx, dy = max(x1 - x0, 1.0) * 0.06, max(y1 - y0, 0.2) * 0.08
        return x0 - dx, x1 + dx, y0 - dy, y1 + dy

    def position(self, number: int) -> QPointF | None:
        """Where point `number` is drawn (None when it is not shown)."""
        point = next((p for p in self.points if p.number == number), None)
        return None if point is None else self._at(point.instructions, point.score)

    def _at(self, x: float, y: float) -> QPointF:
        r = self.plot_rect()
        x0, x1, y0, y1 = self._ranges()
        return QPointF(r.left() + (x - x0) / (x1 - x0) * r.width(),
                       r.bottom() - (y - y0) / (y1 - y0) * r.height())

    def point_at(self, pos: QPointF) -> int | None:
        """The point nearest `pos` within a few pixels (the last drawn wins a tie)."""
        best, distance = None, PICK
        for p in self.points:
            d = (self._at(p.instructions, p.score) - pos).manhattanLength() / 1.4
            if d <= distance:
                best, distance = p.number, d
        return best

    def _flash_span(self) -> tuple[float, float]:
        flash = [p.flash for p in self.points] or [0, 1]
        return min(flash), max(max(flash), min(flash) + 1)

    def color_of(self, point) -> QColor:
        """The point's fill: its flash on the viridis scale of the points shown."""
        low, high = self._flash_span()
        return QColor(viridis((point.flash - low) / (high - low)))

    # -- mouse --------------------------------------------------------------------------------

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        number = self.point_at(event.position())
        if number != self.hover:
            self.hover = number
            self.hovered.emit(-1 if number is None else number)
            self.update()
        if number is None:
            QToolTip.hideText()
            self.setToolTip("")
        else:
            text = self.describe(number)
            self.setToolTip(text)
            QToolTip.showText(event.globalPosition().toPoint(), text, self)

    def leaveEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        if self.hover is not None:
            self.hover = None
            self.hovered.emit(-1)
            self.update()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        if event.button() != Qt.MouseButton.LeftButton:
            return
        number = self.point_at(event.position())
        if number is None:
            return
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            chosen = [n for n in self.selection if n != number]
            if len(chosen) == len(self.selection):
                chosen.append(number)
            self.set_selection(chosen)
        else:
            self.applyRequested.emit(number)

    # -- painting -----------------------------------------------------------------------------

    def paintEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), QColor("#ffffff"))
        font = QFont(self.font())
        font.setPointSizeF(max(7.5, font.pointSizeF() * 0.9))
        p.setFont(font)
        r = self.plot_rect()
        p.setPen(QPen(QColor("#c8cdd2"), 1))
        p.drawRect(r)
        if not self.points:
            p.setPen(QColor(style.TEXT_MUTED))
            p.drawText(r, Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.message)
            self._axes_labels(p, r)
            return
        self._ticks(p, r)
        if self.floor is not None:
            y = self._at(0, self.floor).y()
            if r.top() <= y <= r.bottom():
                p.setPen(QPen(QColor(FLOOR), 1, Qt.PenStyle.DashLine))
                p.drawLine(QPointF(r.left(), y), QPointF(r.right(), y))
                p.drawText(QRectF(r.left() + 4, y - 16, r.width() - 8, 14),
                           Qt.AlignmentFlag.AlignRight, "bound")
        for point in self.points:
            self._draw_point(p, point)
        self._colour_bar(p, r)
        self._axes_labels(p, r)

    def _draw_point(self, p: QPainter, point) -> None:
        c = self._at(point.instructions, point.score)
        fill = self.color_of(point)
        if point.fits:
            p.setPen(QPen(QColor("#30363c"), 0.8))
            p.setBrush(fill)
            p.drawEllipse(c, RADIUS, RADIUS)
        else:
            p.setPen(QPen(fill, 2.4))
            d = RADIUS
            p.drawLine(c + QPointF(-d, -d), c + QPointF(d, d))
            p.drawLine(c + QPointF(-d, d), c + QPointF(d, -d))
        p.setBrush(Qt.BrushStyle.NoBrush)
        if point.front:
            p.setPen(QPen(QColor(FRONT), 1.6))
            p.drawEllipse(c, RADIUS + 3.5, RADIUS + 3.5)
        if point.number in self.selection:
            p.setPen(QPen(QColor(SELECTED), 2.2))
            p.drawRect(QRectF(c.x() - RADIUS - 6, c.y() - RADIUS - 6, 2 * RADIUS + 12,
                              2 * RADIUS + 12))
        if point.number == self.applied or point.number == self.hover:
            p.setPen(QPen(QColor(style.TEXT), 1.2, Qt.PenStyle.DotLine))
            p.drawEllipse(c, RADIUS + 7, RADIUS + 7)
        if point.number in self.selection or point.number == self.applied:
            p.setPen(QColor(style.TEXT))
            p.drawText(QRectF(c.x() + 9, c.y() - 20, 60, 14), Qt.AlignmentFlag.AlignLeft,
                       f"#{point.number}")

    def _ticks(self, p: QPainter, r: QRectF) -> None:
        x0, x1, y0, y1 = self._ranges()
        p.setPen(QColor(style.TEXT_MUTED))
        for i in range(5):
            x = x0 + (x1 - x0) * (i + 0.5) / 5
            at = self._at(x, y0)
            p.drawLine(QPointF(at.x(), r.bottom()), QPointF(at.x(), r.bottom() + 3))
            p.drawText(QRectF(at.x() - 40, r.bottom() + 4, 80, 14),
                       Qt.AlignmentFlag.AlignHCenter, f"{x / 1000:,.0f}k")
            y = y0 + (y1 - y0) * (i + 0.5) / 5
            at = self._at(x0, y)
            p.drawLine(QPointF(r.left() - 3, at.y()), QPointF(r.left(), at.y()))
            p.drawText(QRectF(0, at.y() - 7, r.left() - 5, 14), Qt.AlignmentFlag.AlignRight,
                       f"{y:.2f}")

    def _axes_labels(self, p: QPainter, r: QRectF) -> None:
        p.setPen(QColor(style.TEXT))
        p.drawText(QRectF(r.left(), r.bottom() + 20, r.width(), 16),
                   Qt.AlignmentFlag.AlignHCenter, self.x_label)
        p.save()
        p.translate(12, r.center().y())
        p.rotate(-90)
        p.drawText(QRectF(-r.height() / 2, -8, r.height(), 16), Qt.AlignmentFlag.AlignHCenter,
                   self.y_label)
        p.restore()

    def _colour_bar(self, p: QPainter, r: QRectF) -> None:
        """Flash from the smallest (bottom) to the largest (top), beside the axes."""
        bar = QRectF(r.right() + 14, r.top() + 16, 12, max(20.0, r.height() - 52))
        gradient = QLinearGradient(bar.bottomLeft(), bar.topLeft())
        for i in range(11):
            gradient.setColorAt(i / 10, QColor(viridis(i / 10)))
        p.setPen(QPen(QColor("#30363c"), 0.6))
        p.setBrush(gradient)
        p.drawRect(bar)
        p.setBrush(Qt.BrushStyle.NoBrush)
        low, high = self._flash_span()
        p.setPen(QColor(style.TEXT))
        p.drawText(QRectF(bar.left() - 12, r.top(), 60, 14), Qt.AlignmentFlag.AlignLeft,
                   "flash")
        p.drawText(QRectF(bar.right() + 2, bar.top() - 2, 50, 14), Qt.AlignmentFlag.AlignLeft,
                   f"{high / 1024:.1f}k")
        p.drawText(QRectF(bar.right() + 2, bar.bottom() - 12, 50, 14),
                   Qt.AlignmentFlag.AlignLeft, f"{low / 1024:.1f}k")
        legend = r.bottom() - 18
        p.setPen(QPen(QColor("#30363c"), 0.8))
        p.setBrush(QColor(viridis(0.5)))
        p.drawEllipse(QPointF(bar.left() + 2, legend), 4, 4)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QColor(style.TEXT))
        p.drawText(QRectF(bar.left() + 8, legend - 7, 60, 14), Qt.AlignmentFlag.AlignLeft,
                   "fits")
        p.setPen(QPen(QColor(viridis(0.5)), 2))
        c = QPointF(bar.left() + 2, legend + 14)
        p.drawLine(c + QPointF(-4, -4), c + QPointF(4, 4))
        p.drawLine(c + QPointF(-4, 4), c + QPointF(4, -4))
        p.setPen(QColor(style.TEXT))
        p.drawText(QRectF(bar.left() + 8, legend + 7, 60, 14), Qt.AlignmentFlag.AlignLeft,
                   "over")
