"""The Activations panel: run a sample, then a clicked edge's heat maps, histogram and statistics.

The panel only draws an `Activation` (compiler.activations) and emits requests; the app's
controller runs the sample and picks the value. With an int8 counterpart, the selected
channel's float, int8 (dequantized) and difference maps sit side by side, and the histogram
and the statistics table show both.

Signals:
    runRequested(): "Run sample" was pressed (the source and index are read from the panel).
    cancelRequested(): "Cancel" was pressed.
    fileRequested(): "File…" was chosen as the source.
    exportRequested(): "Export .npy…" was pressed.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from compiler.activations.sample import Activation
from compiler.stats import TensorStats
from views import style
from views.flow_layout import FlowLayout
from views.heat_maps import HeatMapGrid
from views.signals import signals_blocked

PAGE = 16  # channels shown at once
FILE = "__file__"  # the source item that asks for a file


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.5g}"


def _pair(label: str, widget: QWidget) -> QWidget:
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(QLabel(label))
    row.addWidget(widget)
    return box


class ActivationHistogram(QWidget):
    """The value histogram: float, and int8 dequantized over it when there is a pair."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(3.4, 1.9), dpi=100, layout="constrained")
        self.canvas = FigureCanvasQTAgg(self.figure)
        self.canvas.setMinimumHeight(170)
        self.axes = self.figure.add_subplot()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas)

    def plot(self, stats: TensorStats | None, int8: TensorStats | None = None) -> None:
        """Draw `stats`' histogram, and `int8`'s as an outline over it."""
        ax = self.axes
        ax.clear()
        if stats is not None and len(stats.counts):
            ax.stairs(stats.counts, stats.edges, fill=True, color="#4878a8", label="float")
        if int8 is not None and len(int8.counts):
            ax.stairs(int8.counts, int8.edges, color="#c2185b", linewidth=1.2,
                      label="int8 (dequantized)")
            ax.legend(fontsize=7, frameon=False)
        ax.tick_params(labelsize=7)
        ax.set_yscale("symlog")
        ax.set_title("value histogram (log counts)", fontsize=8)
        self.canvas.draw_idle()


class ActivationPanel(QWidget):
    """Sample controls, the value's heat maps, the comparison, histogram and statistics."""

    runRequested = Signal()
    cancelRequested = Signal()
    fileRequested = Signal()
    exportRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.activation: Activation | None = None
        self.source = QComboBox()
        self.source.setToolTip("Where the sample comes from: calibration data, an .npy or .npz "
                               "file, or a seeded random input")
        self.source.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.source.setMinimumContentsLength(10)
        self.index = QSpinBox()
        self.index.setRange(0, 10**7)
        self.index.setToolTip("The sample's index in the source (the seed for random)")
        self.run_button = QPushButton("Run sample")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(120)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.status = QLabel("Run a sample, then click an edge.")
        self.status.setWordWrap(True)
        self.status.setMinimumWidth(40)
        controls = QWidget()
        flow = FlowLayout(controls)
        flow.setContentsMargins(6, 4, 6, 0)
        for widget in (_pair("Sample:", self.source), _pair("#", self.index), self.run_button,
                       self.cancel_button, self.progress):
            flow.addWidget(widget)

        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.first = QSpinBox()
        self.first.setToolTip("The first channel shown in the grid")
        self.first.setSingleStep(PAGE)
        self.channel = QSpinBox()
        self.channel.setToolTip("The channel compared below (or click a map)")
        self.channel_row = QWidget()
        row = QHBoxLayout(self.channel_row)
        row.setContentsMargins(6, 0, 6, 0)
        self.channel_count = QLabel()
        for widget in (_pair("From channel", self.first), self.channel_count,
                       _pair("Selected", self.channel)):
            row.addWidget(widget)
        row.addStretch(1)
        self.grid = HeatMapGrid("float", cell=64)
        self.compare = QWidget()
        rows = QVBoxLayout(self.compare)
        rows.setContentsMargins(0, 4, 0, 0)
        rows.setSpacing(0)
        self.compare_title = QLabel()
        self.compare_title.setContentsMargins(6, 0, 6, 0)
        rows.addWidget(self.compare_title)
        pairs = QHBoxLayout()
        pairs.setSpacing(0)
        rows.addLayout(pairs)
        self.float_map = HeatMapGrid("float", cell=96)
        self.int8_map = HeatMapGrid("int8", cell=96)
        self.diff_map = HeatMapGrid("int8 − float", cell=96)
        for grid in (self.float_map, self.int8_map, self.diff_map):
            pairs.addWidget(grid)
        self.compare.hide()
        self.histogram = ActivationHistogram()
        self.table = QTableWidget(0, 1)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.export_button = QPushButton("Export .npy…")
        self.export_button.setToolTip("Write the selected value, exactly as the interpreter "
                                      "computed it, to a NumPy file")
        self.export_button.setEnabled(False)

        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 6)
        column.setSpacing(4)
        column.addWidget(controls)
        for widget in (self.status, self.title):
            widget.setContentsMargins(6, 0, 6, 0)
            column.addWidget(widget)
        column.addWidget(self.channel_row)
        column.addWidget(self.grid)
        column.addWidget(self.compare)
        column.addWidget(self.histogram)
        column.addWidget(self.table)
        bottom = QHBoxLayout()
        bottom.setContentsMargins(6, 0, 6, 0)
        bottom.addWidget(self.export_button)
        bottom.addStretch(1)
        column.addLayout(bottom)
        column.addStretch(1)

        self.run_button.clicked.connect(self.runRequested)
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.export_button.clicked.connect(self.exportRequested)
        self.source.activated.connect(self._source_activated)
        self.first.valueChanged.connect(lambda _v: self._draw_grid())
        self.channel.valueChanged.connect(lambda _v: self._draw_channel())
        self.grid.channelClicked.connect(self.channel.setValue)
        self.show_activation(None)

    # -- sample controls ------------------------------------------------------------------------

    def set_sources(self, sources: list[tuple[str, str]], current: str) -> None:
        """Fill the source list with (label, source) pairs, then "File…"; select `current`."""
        with signals_blocked(self.source):
            self.source.clear()
            for label, data in sources:
                self.source.addItem(label, data)
            self.source.addItem("File…", FILE)
            self.source.setCurrentIndex(max(self.source.findData(current), 0))

    def add_source(self, label: str, source: str) -> None:
        """Add a chosen file before "File…" and select it."""
        at = self.source.findData(source)
        if at < 0:
            at = self.source.count() - 1
            self.source.insertItem(at, label, source)
            self.source.setItemData(at, source, Qt.ItemDataRole.ToolTipRole)
        self.source.setCurrentIndex(at)

    def chosen_source(self) -> str | None:
        """The selected source (None while "File…" is selected)."""
        data = self.source.currentData()
        return None if data == FILE else data

    def _source_activated(self, _index: int) -> None:
        if self.source.currentData() == FILE:
            self.fileRequested.emit()

    def set_running(self, running: bool) -> None:
        """Show progress and Cancel while a sample runs."""
        self.run_button.setEnabled(not running)
        self.cancel_button.setVisible(running)
        self.progress.setVisible(running)
        if running:
            self.progress.setValue(0)

    def set_status(self, text: str, error: bool = False) -> None:
        """A one-line status under the controls (red for an error)."""
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {style.PROBLEM};" if error else "")

    # -- the value ------------------------------------------------------------------------------

    def show_activation(self, activation: Activation | None, title: str = "") -> None:
        """Show `activation` (None: nothing selected; `title` says why)."""
        self.activation = activation
        self.export_button.setEnabled(activation is not None)
        if activation is None:
            self.title.setText(title)
            self.channel_row.hide()
            self.compare.hide()
            self.grid.clear("Click an edge on the canvas to see its values.")
            self.histogram.plot(None)
            self.table.setRowCount(0)
            return
        self.title.setText(title)
        channels = activation.channels
        for box in (self.first, self.channel):
            with signals_blocked(box):
                box.setRange(0, channels - 1)
        self.first.setValue(0)
        self.channel.setValue(0)
        self.channel_row.setVisible(channels > 1)
        self.channel_count.setText(f"of {channels}")
        self.compare.setVisible(activation.int8 is not None)
        self._draw_grid()
        self._draw_channel()
        self.histogram.plot(activation.real_stats or activation.stats, activation.int8_stats)
        self._fill_table(activation)

    def _scale(self) -> tuple[float, float]:
        a = self.activation
        stats = a.real_stats or a.stats
        low, high = stats.min, stats.max
        if a.int8_stats is not None:  # float and int8 maps on one scale
            low, high = min(low, a.int8_stats.min), max(high, a.int8_stats.max)
        return (low, high) if math.isfinite(low) and math.isfinite(high) else (0.0, 1.0)

    def _draw_grid(self) -> None:
        a = self.activation
        if a is None:
            return
        low, high = self._scale()
        self.grid.set_maps(a.maps, low, high, first=self.first.value(), count=PAGE)
        self.grid.set_selected(self.channel.value())

    def _draw_channel(self) -> None:
        a = self.activation
        if a is None:
            return
        channel = self.channel.value()
        self.grid.set_selected(channel)
        if a.int8 is None:
            return
        low, high = self._scale()
        self.float_map.set_maps(a.maps, low, high, first=channel, count=1)
        self.int8_map.set_maps(a.int8_maps, low, high, first=channel, count=1)
        bound = float(np.max(np.abs(a.difference))) if a.difference.size else 0.0
        bound = bound if bound > 0 and math.isfinite(bound) else 1.0
        self.diff_map.set_maps(a.difference_maps, -bound, bound, diverging=True, first=channel,
                               count=1)
        where = f"channel {channel}: " if a.channels > 1 else ""
        self.compare_title.setText(f"<b>{where}float, int8 dequantized, their difference</b>")

    def rows(self) -> list[tuple[str, list[str]]]:
        """The statistics table's rows: (label, one text per column)."""
        table = self.table
        return [(table.verticalHeaderItem(r).text(),
                 [table.item(r, c).text() for c in range(table.columnCount())
                  if table.item(r, c) is not None])  # a spanned row has one item
                for r in range(table.rowCount())]

    def _fill_table(self, a: Activation) -> None:
        columns: list[tuple[str, TensorStats]] = [("value" if a.real is None else "int8",
                                                   a.stats)]
        if a.real_stats is not None:
            columns.append(("real", a.real_stats))
        if a.int8_stats is not None:
            columns = [("float", a.stats), ("int8 (dequantized)", a.int8_stats)]
        rows = [("min", lambda s: _fmt(s.min)), ("max", lambda s: _fmt(s.max)),
                ("mean", lambda s: _fmt(s.mean)), ("std", lambda s: _fmt(s.std)),
                ("zeros", lambda s: f"{100 * s.sparsity:.1f} %"),
                ("non-finite", lambda s: f"{s.nonfinite:,}")]
        table = self.table
        extra = []
        if a.error is not None:
            e = a.error
            extra = [("max |int8 − float|", _fmt(e.max_abs)), ("mean |int8 − float|",
                                                              _fmt(e.mean_abs)),
                     ("rms error", _fmt(e.rmse)), ("SQNR", f"{e.sqnr_db:.1f} dB"),
                     ("scale, zero point", f"{a.int8.quant}")]
        table.clear()
        table.setColumnCount(len(columns))
        table.setRowCount(len(rows) + len(extra))
        table.setHorizontalHeaderLabels([name for name, _ in columns])
        for r, (label, text) in enumerate(rows):
            table.setVerticalHeaderItem(r, QTableWidgetItem(label))
            for c, (_, stats) in enumerate(columns):
                table.setItem(r, c, QTableWidgetItem(text(stats)))
        for r, (label, text) in enumerate(extra, len(rows)):
            table.setVerticalHeaderItem(r, QTableWidgetItem(label))
            table.setItem(r, 0, QTableWidgetItem(text))
            if len(columns) > 1:
                table.setSpan(r, 0, 1, len(columns))
        table.setFixedHeight(table.verticalHeader().length() +
                             table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth())
