"""Per-layer SQNR as horizontal bars, in graph order, coloured by the overlay's bins.

Each quantized tensor gets a row: its name, a bar as long as its SQNR (0 to the largest finite
value shown, at least 50 dB) and the value. A click selects the tensor.

Signals:
    tensorClicked(name): a row was clicked.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter
from PySide6.QtWidgets import QSizePolicy, QWidget

from views import style
from views.quant_colors import sqnr_color

ROW = 18  # pixels per bar
LABEL = 190  # pixels for the names


class SqnrBars(QWidget):
    """Bars of (name, SQNR dB); the selected name is outlined."""

    tensorClicked = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.rows: list[tuple[str, float]] = []
        self.selected: str | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_rows(self, rows: list[tuple[str, float]], selected: str | None = None) -> None:
        """Show `rows` (graph order) and outline `selected`."""
        self.rows, self.selected = list(rows), selected
        self.setFixedHeight(max(ROW * len(self.rows) + 8, 40))
        self.update()

    def sizeHint(self) -> QSize:  # noqa: D102 (Qt override)
        return QSize(420, max(ROW * len(self.rows) + 8, 40))

    def top(self) -> float:
        """The SQNR at the right end of the bars."""
        finite = [v for _, v in self.rows if math.isfinite(v)]
        return max([50.0, *finite])

    def bar_rect(self, index: int) -> QRectF:
        """Where row `index`'s bar is drawn (full length for an exact tensor)."""
        name, value = self.rows[index]
        width = max(1.0, self.width() - LABEL - 60)
        length = width if not math.isfinite(value) else max(0.0, value) / self.top() * width
        return QRectF(LABEL, 4 + index * ROW + 2, max(length, 1.0), ROW - 4)

    def paintEvent(self, _event) -> None:  # noqa: D102 (Qt override)
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#ffffff"))
        font = QFont(self.font())
        font.setPixelSize(11)
        p.setFont(font)
        if not self.rows:
            p.setPen(QColor(style.TEXT_MUTED))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "Not calibrated.")
            return
        for i, (name, value) in enumerate(self.rows):
            bar = self.bar_rect(i)
            fill, _ = sqnr_color(value)
            p.fillRect(bar, QColor(fill))
            if name == self.selected:
                p.setPen(QColor(style.SELECTED))
                p.drawRect(bar.adjusted(-1, -1, 1, 1))
            p.setPen(QColor(style.TEXT))
            label = QRectF(4, bar.top() - 2, LABEL - 8, ROW)
            elided = p.fontMetrics().elidedText(name, Qt.TextElideMode.ElideMiddle,
                                                int(label.width()))
            p.drawText(label, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, elided)
            text = "exact" if not math.isfinite(value) else f"{value:.1f} dB"
            p.drawText(QRectF(bar.right() + 4, bar.top() - 2, 60, ROW),
                       Qt.AlignmentFlag.AlignVCenter, text)
        p.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: D102 (Qt override)
        index = int((event.position().y() - 4) // ROW)
        if 0 <= index < len(self.rows):
            self.tensorClicked.emit(self.rows[index][0])
