"""The Quantization dock's widgets: the tensor table, the readouts and the range editor.

The table lists every quantized tensor with its range, scale, zero point and errors (sortable,
filterable); under it the selected tensor's histogram with its range as handles and spin boxes,
the calibration method for it, and a live estimate (clipped fraction, SQNR from the histogram)
while a handle moves. The readouts say what the whole model loses. After a graph edit a banner
says which ranges are stale or missing and offers Re-profile; the table marks those rows. The
controller (`app.quant.controller`) fills them and turns edits into undoable commands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from compiler.quant.calibrate import METHODS
from views import style
from views.flow_layout import FlowLayout
from views.histogram import HistogramView
from views.quant_colors import LABELS, SQNR_BINS
from views.signals import signals_blocked
from views.sqnr_bars import SqnrBars

COLUMNS = ("Tensor", "Producer", "Min as int8", "Max as int8", "Scale", "Zero point",
           "Clipped %", "SQNR dB", "rmse/scale")
# The table shows the range the int8 model uses; the handles and boxes, the range as set.
NUDGED_TIP = ("The range as quantized: the range you set, moved so that 0.0 falls on a whole "
              "int8 step (what the integer model computes with). The histogram's handles and "
              "the Min/Max boxes show the range as set.")
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
MANUAL = "manual"
# A row's state after a graph edit (the banner says what to do about it).
STALE, NOT_PROFILED, KEPT_FLOAT = "stale", "not profiled", "float"
STATE_TIPS = {STALE: "measured before the last edit changed what computes it; Re-profile",
              NOT_PROFILED: "new since calibration: no range yet, left in float; Re-profile",
              KEPT_FLOAT: "kept in float; untick Keep float to quantize it again"}
# The banner: amber, the usual colour of "needs attention, nothing broken".
BANNER_FILL, BANNER_BORDER = "#fff4d6", "#e0a800"


@dataclass(frozen=True)
class Row:
    """One tensor as the table shows it."""

    tensor: str
    producer: str
    low: float
    high: float
    scale: float
    zero_point: int | None  # None: not known yet (not profiled, or being evaluated)
    clipped: float
    sqnr: float
    rmse_over_scale: float
    state: str = ""  # "", STALE or NOT_PROFILED


def _text(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        return f"{value:.4g}"
    return str(value)


class TensorTable(QAbstractTableModel):
    """Rows of quantized tensors; sorted by number where a column holds numbers."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[Row] = []

    def set_rows(self, rows: list[Row]) -> None:
        """Replace every row (a new evaluation)."""
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: D102, B008 (Qt override)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: D102, B008 (Qt override)
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: D102
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole \
                and section in (2, 3):
            return NUDGED_TIP
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):  # noqa: D102 (Qt override)
        row = self.rows[index.row()]
        value = (row.tensor, row.producer, row.low, row.high, row.scale, row.zero_point,
                 100 * row.clipped, row.sqnr, row.rmse_over_scale)[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            if row.state == NOT_PROFILED and index.column() >= 2:
                return NOT_PROFILED if index.column() == 2 else ""
            if row.state == KEPT_FLOAT and index.column() >= 4:  # its range, no int8 figures
                return KEPT_FLOAT
            return _text(value)
        if role == SORT_ROLE:
            return -1e300 if value is None or (isinstance(value, float) and math.isnan(value)) \
                else value
        if role == Qt.ItemDataRole.ToolTipRole and index.column() < 2:
            return f"{value} ({STATE_TIPS[row.state]})" if row.state else value
        if role == Qt.ItemDataRole.ForegroundRole and row.state:
            return QColor(style.TEXT_MUTED)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() >= 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def row_of(self, tensor: str) -> int | None:
        """The row index of `tensor`, if listed."""
        return next((i for i, r in enumerate(self.rows) if r.tensor == tensor), None)


class QuantPanel(QWidget):
    """Readouts, worst layers, filter, table, histogram and range editor."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.calibrate_button = QPushButton("Calibrate…")
        self.status = QLabel("Not calibrated. Quantize > Calibrate… measures every tensor.")
        self.status.setWordWrap(True)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.stale_banner = QFrame()
        self.stale_text = QLabel()
        self.reprofile_button = QPushButton("Re-profile")
        self.reprofile_button.setToolTip("Calibrate again on the same samples; hand-tuned "
                                         "ranges and float tensors stay")
        self.output_sqnr = QLabel("–")
        self.agreement = QLabel("–")
        self.accuracy = QLabel("–")
        self.overlay = QCheckBox("Error overlay on the graph")
        chips = "".join(f"<span style='background:{fill}; color:{text};'>&nbsp;"
                        f"{escape(label)}&nbsp;</span> "
                        for (_, fill, text), label in zip(SQNR_BINS, LABELS))
        self.legend = QLabel(f"Node colour, output SQNR in dB: {chips}")
        self.legend.setWordWrap(True)
        self.legend.hide()
        self.overlay.toggled.connect(self.legend.setVisible)
        self.worst = QListWidget()
        self.worst.setMaximumHeight(96)
        self.worst.setToolTip("The tensors that lose most; click to show one on the graph")
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter tensors…")
        self.filter.setClearButtonEnabled(True)
        self.model = TensorTable(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        # At least five rows: a short dock scrolls (it sits in a scroll area) rather than
        # squeezing the table to one row.
        rows = self.table.verticalHeader().defaultSectionSize()
        self.table.setMinimumHeight(self.table.horizontalHeader().sizeHint().height() + 5 * rows
                                    + 2 * self.table.frameWidth())
        self.histogram = HistogramView()
        self.low, self.high = QDoubleSpinBox(), QDoubleSpinBox()
        for box in (self.low, self.high):
            box.setDecimals(6)
            box.setRange(-1e12, 1e12)
            box.setKeyboardTracking(False)
        self.method = QComboBox()
        self.method.addItems([*METHODS, MANUAL])
        self.method.setToolTip("How this tensor's range is chosen (manual: the handles)")
        self.keep_float = QCheckBox("Keep float")
        self.keep_float.setToolTip("Leave this tensor (and its layer's weights) in float")
        self.live = QLabel()
        self.live.setStyleSheet(f"color: {style.TEXT_MUTED};")
        # What Keep float costs the selected tensor's int8 model (arena, flash, RAM, MACs).
        self.float_cost = QLabel()
        self.float_cost.setWordWrap(True)
        self.float_cost.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.float_cost.setToolTip("Both int8 models compiled for the document's target: "
                                   "with this tensor quantized → with it kept float")
        self.bars = SqnrBars()
        self.sample = QSpinBox()
        self.sample.setToolTip("Which of the live samples to show")
        self.outputs = QTableWidget(0, 4)
        self.outputs.setHorizontalHeaderLabels(["#", "float", "int8", "int8 − float"])
        self.outputs.verticalHeader().hide()
        self.outputs.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.outputs.horizontalHeader().setStretchLastSection(True)
        self.outputs_note = QLabel()
        self.tabs = QTabWidget()
        self._build()

    def _build(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.calibrate_button)
        top.addWidget(self.status, 1)
        # The readouts wrap onto a second row in a narrow dock instead of being clipped.
        readouts = QWidget()
        flow = FlowLayout(readouts)
        for title, label in (("Output SQNR", self.output_sqnr),
                             ("Top-1 agreement", self.agreement), ("Accuracy", self.accuracy)):
            label.setStyleSheet("font-weight: bold;")
            flow.addWidget(_labelled(title, label))
        flow.addWidget(self.overlay)
        upper = QWidget()
        column = QVBoxLayout(upper)
        column.setContentsMargins(0, 0, 0, 0)
        column.addLayout(top)
        column.addWidget(readouts)
        column.addWidget(self.legend)
        column.addWidget(QLabel("Worst layers:"))
        column.addWidget(self.worst)
        column.addWidget(self.filter)
        column.addWidget(self.table, 1)
        editor = QWidget()
        fields = FlowLayout(editor)
        for title, widget in (("Min", self.low), ("Max", self.high), ("Method", self.method)):
            fields.addWidget(_labelled(title, widget))
        fields.addWidget(self.keep_float)
        lower = QWidget()
        below = QVBoxLayout(lower)
        below.setContentsMargins(0, 0, 0, 0)
        below.addWidget(self.histogram, 1)
        below.addWidget(editor)
        below.addWidget(self.float_cost)
        below.addWidget(self.live)
        layers = QScrollArea()
        layers.setWidget(self.bars)
        layers.setWidgetResizable(True)
        outputs = QWidget()
        sample_row = QHBoxLayout()
        sample_row.addWidget(QLabel("Sample:"))
        sample_row.addWidget(self.sample)
        sample_row.addWidget(self.outputs_note, 1)
        outputs_column = QVBoxLayout(outputs)
        outputs_column.addLayout(sample_row)
        outputs_column.addWidget(self.outputs, 1)
        self.tabs.addTab(lower, "Range")
        self.tabs.addTab(layers, "Layers (SQNR)")
        self.tabs.addTab(outputs, "Outputs")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(upper)
        split.addWidget(self.tabs)
        split.setSizes([380, 300])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        # Above the splitter: the banner takes its lines from both halves, not from the
        # readouts and the table alone.
        layout.addWidget(self._build_banner())
        layout.addWidget(split)

    def _build_banner(self) -> QFrame:
        banner = self.stale_banner
        banner.setObjectName("staleBanner")
        banner.setStyleSheet(f"#staleBanner {{ background: {BANNER_FILL}; border: 1px solid "
                             f"{BANNER_BORDER}; border-radius: 4px; }} #staleBanner QLabel "
                             f"{{ color: {style.TEXT}; }}")
        self.stale_text.setWordWrap(True)
        self.stale_text.setSizePolicy(QSizePolicy.Policy.Ignored,
                                      QSizePolicy.Policy.Preferred)
        row = QHBoxLayout(banner)
        row.setContentsMargins(8, 6, 8, 6)
        row.addWidget(self.stale_text, 1)
        row.addWidget(self.reprofile_button, 0, Qt.AlignmentFlag.AlignVCenter)
        banner.hide()
        return banner

    def show_stale(self, text: str) -> None:
        """Show the stale-profile banner saying `text`; hide it for an empty text."""
        self.stale_text.setText(text)
        self.stale_banner.setVisible(bool(text))

    def clear(self) -> None:
        """Show nothing of any model (not calibrated, or another model opened)."""
        self.model.set_rows([])
        self.histogram.clear("Not calibrated.")
        for label in (self.output_sqnr, self.agreement, self.accuracy):
            label.setText("–")
        self.worst.clear()
        self.bars.set_rows([])
        self.outputs.setRowCount(0)
        self.outputs_note.clear()
        self.live.clear()
        self.float_cost.clear()
        self.keep_float.setChecked(False)  # no tensor shown: the editor holds nothing either
        for box in (self.low, self.high):
            with signals_blocked(box):  # not an edit: the controller must not hear it
                box.setValue(0.0)

    def forget_model(self) -> None:
        """Another model: nothing of the last one's shown, filtered by or chosen for it."""
        self.clear()
        self.filter.clear()  # its tensor names mean nothing in another model
        with signals_blocked(self.method):
            self.method.setCurrentIndex(0)

    def show_outputs(self, index: int, floating, integer) -> None:
        """One sample's outputs, float and int8, element by element (the top classes marked)."""
        self.outputs.setRowCount(len(floating))
        best_f, best_q = int(floating.argmax()), int(integer.argmax())
        for r, (f, q) in enumerate(zip(floating.tolist(), integer.tolist())):
            mark = (" ◀ float" if r == best_f else "") + (" ◀ int8" if r == best_q else "")
            for c, text in enumerate((f"{r}{mark}", f"{f:.6g}", f"{q:.6g}", f"{q - f:+.3g}")):
                self.outputs.setItem(r, c, QTableWidgetItem(text))
        agree = "the same class" if best_f == best_q else "different classes"
        self.outputs_note.setText(f"sample {index}: {agree} (float {best_f}, int8 {best_q})")

    def selected_tensor(self) -> str | None:
        """The tensor of the selected table row."""
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self.model.rows[self.proxy.mapToSource(rows[0]).row()].tensor

    def select_tensor(self, tensor: str | None) -> None:
        """Select `tensor`'s row (None clears) and scroll to it."""
        row = self.model.row_of(tensor) if tensor is not None else None
        if row is None:
            self.table.clearSelection()
            return
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if index.isValid():
            self.table.selectRow(index.row())
            self.table.scrollTo(index)


def _labelled(title: str, widget: QWidget) -> QWidget:
    """`title:` and `widget` side by side, kept together when a flow layout wraps."""
    pair = QWidget()
    row = QHBoxLayout(pair)
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(QLabel(f"{title}:"))
    row.addWidget(widget)
    return pair
