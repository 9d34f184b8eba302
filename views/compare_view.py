"""The Compare window's body: two canvases side by side, the differences, deltas, timelines."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from views.canvas import GraphCanvas
from views.signals import signals_blocked
from views.size_report import SizeReport
from views.timeline import MemoryTimeline

# Fill colours of compared nodes (the canvas picks a readable text colour on each).
STATUS_COLORS = {"changed": "#f0b04a", "removed": "#e07a7a", "added": "#7cc47f",
                 "folded": "#c9c3e6", "metrics": "#9cc3e6"}


def _column(title: QLabel, canvas: GraphCanvas) -> QWidget:
    widget = QWidget()
    column = QVBoxLayout(widget)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(2)
    title.setWordWrap(True)
    column.addWidget(title)
    column.addWidget(canvas, 1)
    return widget


class CompareView(QWidget):
    """Draws a comparison the app computed; emits the row a user picks.

    Signals:
        rowChosen(int): a row of the differences list was clicked, or Previous/Next pressed.
        closeRequested(): the Close button was pressed.
    """

    rowChosen = Signal(int)
    closeRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.summary = QLabel("Nothing compared yet.")
        self.summary.setWordWrap(True)
        self.title_a, self.title_b = QLabel(), QLabel()
        self.canvas_a, self.canvas_b = GraphCanvas(), GraphCanvas()
        self.rows = QListWidget()
        self.rows.setToolTip("Every difference, in graph order: click one to show the pair")
        self.previous_button = QPushButton("◀ Previous")
        self.next_button = QPushButton("Next ▶")
        self.details = QLabel()
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.setAlignment(Qt.AlignmentFlag.AlignTop)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.timeline_a, self.timeline_b = MemoryTimeline(), MemoryTimeline()
        for timeline in (self.timeline_a, self.timeline_b):
            timeline.setMinimumHeight(110)

        canvases = QSplitter(Qt.Orientation.Horizontal)
        canvases.addWidget(_column(self.title_a, self.canvas_a))
        canvases.addWidget(_column(self.title_b, self.canvas_b))
        stepping = QWidget()
        steps = QVBoxLayout(stepping)
        steps.setContentsMargins(0, 0, 0, 0)
        buttons = QHBoxLayout()
        buttons.addWidget(self.previous_button)
        buttons.addWidget(self.next_button)
        steps.addLayout(buttons)
        steps.addWidget(self.rows, 1)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(stepping)
        bottom.addWidget(self.details)
        timelines = QSplitter(Qt.Orientation.Horizontal)
        timelines.addWidget(self.timeline_a)
        timelines.addWidget(self.timeline_b)
        self.size_a, self.size_b = SizeReport(), SizeReport()
        sizes = QSplitter(Qt.Orientation.Horizontal)
        sizes.addWidget(self.size_a)
        sizes.addWidget(self.size_b)
        scroll = QScrollArea()  # the reports are tall: scrolled, they leave the canvases room
        scroll.setWidgetResizable(True)
        scroll.setWidget(sizes)
        sizes.setMinimumHeight(560)
        self.below = QTabWidget()
        self.below.addTab(timelines, "Memory timelines")
        self.below.addTab(scroll, "Size reports")
        body = QSplitter(Qt.Orientation.Vertical)
        body.addWidget(canvases)
        body.addWidget(bottom)
        body.addWidget(self.below)
        body.setStretchFactor(0, 5)
        body.setStretchFactor(1, 2)
        body.setStretchFactor(2, 1)
        column = QVBoxLayout(self)
        column.setContentsMargins(6, 6, 6, 6)
        self.close_button = QPushButton("Close")
        self.close_button.setToolTip("Close the comparison (Esc)")
        self.close_button.clicked.connect(self.closeRequested)
        head = QHBoxLayout()
        head.addWidget(self.summary, 1)
        head.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        column.addLayout(head)
        column.addWidget(body, 1)

        self.rows.currentRowChanged.connect(self._row_changed)
        self.previous_button.clicked.connect(lambda: self.step(-1))
        self.next_button.clicked.connect(lambda: self.step(1))

    def set_sizes(self, a: dict | None, b: dict | None) -> None:
        """The two networks' size reports (bundle reports), side by side."""
        for widget, report in ((self.size_a, a), (self.size_b, b)):
            if report is None:
                widget.clear()
            else:
                widget.set_report(report)
        self.below.setTabEnabled(1, a is not None or b is not None)

    def set_rows(self, rows: list[tuple[str, str]]) -> None:
        """The differences as (status, text), coloured by status; none chosen."""
        with signals_blocked(self.rows):
            self.rows.clear()
            for status, text in rows:
                item = QListWidgetItem(f"{status}: {text}")
                item.setData(Qt.ItemDataRole.UserRole, status)
                item.setToolTip(text)
                if status in STATUS_COLORS:  # a light tint: the list's dark text stays readable
                    tint = QColor(STATUS_COLORS[status])
                    tint.setAlpha(90)
                    item.setBackground(tint)
                self.rows.addItem(item)
            self.rows.setCurrentRow(-1)
        enabled = bool(rows)
        self.previous_button.setEnabled(enabled)
        self.next_button.setEnabled(enabled)

    def choose(self, row: int) -> None:
        """Show row `row` as chosen without emitting (the app already knows)."""
        with signals_blocked(self.rows):
            self.rows.setCurrentRow(row)

    def step(self, by: int) -> None:
        """Choose the next (1) or previous (-1) difference, wrapping around."""
        count = self.rows.count()
        if not count:
            return
        current = self.rows.currentRow()
        row = (by if by > 0 else count + by) if current < 0 else (current + by) % count
        if by > 0 and current < 0:
            row = 0
        self.rows.setCurrentRow(row)

    def _row_changed(self, row: int) -> None:
        if row >= 0:
            self.rowChosen.emit(row)
