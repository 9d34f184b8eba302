"""The Validate on Device dialog: the choices, progress with Cancel, and the result's tables.

It draws what the controller gives it and emits requests; the validation itself, and the
last result, belong to the controller and the document. Closing it asks for a cancel.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.device import results
from app.device.state import ValidateRequest
from compiler.device.validate import Validation
from views import screen_fit, style

WANTED = QSize(960, 780)  # enough for every row of the sample's tables at once
PASSED = "#2e7d32"  # the pass view's green
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def _table(columns: tuple[str, ...] | list[str], name: str) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setWordWrap(False)
    table.horizontalHeader().setStretchLastSection(True)
    table.setMinimumHeight(80)
    rows = table.verticalHeader()
    rows.setDefaultSectionSize(table.fontMetrics().height() + 8)
    rows.setMinimumSectionSize(table.fontMetrics().height() + 4)
    return table


def _fill(table: QTableWidget, rows: list[list[str]], right: range | tuple = ()) -> None:
    """Put `rows` in `table`, the columns in `right` aligned right (figures)."""
    table.setRowCount(len(rows))
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if c in right:
                item.setTextAlignment(RIGHT)
            table.setItem(r, c, item)
    table.resizeColumnsToContents()


def _fit_rows(table: QTableWidget) -> None:
    """Just tall enough for its rows: the room left goes to the tables that scroll."""
    frame = 2 * table.frameWidth()
    bar = table.horizontalScrollBar().sizeHint().height()
    height = table.horizontalHeader().height() + frame + bar + sum(
        table.rowHeight(r) for r in range(table.rowCount()))
    table.setFixedHeight(max(height, table.minimumHeight()))


class ValidateDialog(QDialog):
    """Core, port, inputs and count; Validate; progress and Cancel; the result.

    Signals:
        validateRequested(request): the Validate button with the form's choices.
        cancelRequested(): Cancel, or the dialog closed while a validation runs.
        showRequested(): Show on Canvas: the device overlay, please.
        refreshRequested(): look for serial ports again.
    """

    validateRequested = Signal(object)
    cancelRequested = Signal()
    showRequested = Signal()
    refreshRequested = Signal()

    def __init__(self, parent: QWidget | None, cores: list[tuple[str, str]],
                 ports: list[tuple[str, str]], core: str = "cortex-m7", folder: str = ""):
        super().__init__(parent)
        self.setWindowTitle("Validate on Device")
        self.folder = folder
        self.busy = False
        self.core = QComboBox()
        for key, label in cores:
            self.core.addItem(label, key)
        self.core.setCurrentIndex(max(0, self.core.findData(core)))
        self.core.setToolTip("The core the runner firmware is built for; under QEMU, the "
                             "board named runs it")
        self.port = QComboBox()
        self.port.setEditable(True)  # a pyserial URL (socket://host:port) may be typed
        self.port.setMinimumContentsLength(24)
        self.port.setToolTip("A serial port with Kiln's runner firmware flashed, a pyserial "
                             "URL, or QEMU, which builds the firmware and runs it itself")
        self.set_ports(ports)
        self.refresh = QPushButton("Refresh")
        self.refresh.setToolTip("Look for serial ports again")
        self.random = QRadioButton("Seeded random inputs, seed")
        self.random.setChecked(True)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.from_file = QRadioButton("Samples from")
        choice = QButtonGroup(self)
        choice.addButton(self.random)
        choice.addButton(self.from_file)
        self.source = QLineEdit()
        self.source.setPlaceholderText("a folder of .npy files or images, .npz, .npy, or "
                                       "digits:test")
        self.pick_file = QPushButton("File…")
        self.pick_folder = QPushButton("Folder…")
        self.count = QSpinBox()
        self.count.setRange(1, 100000)
        self.count.setValue(10)
        self.count.setToolTip("How many inputs to send (the first is also timed per layer)")

        form = QFormLayout()
        form.addRow("Core:", self.core)
        form.addRow("Port:", _row(self.port, self.refresh, stretch=0))
        form.addRow("Inputs:", _row(self.random, self.seed))
        form.addRow("", _row(self.from_file, self.source, self.pick_file, self.pick_folder,
                             stretch=1))
        form.addRow("Count:", _row(self.count))
        choices = QGroupBox("Board and inputs")
        choices.setLayout(form)

        self.validate = QPushButton("Validate")
        self.validate.setDefault(True)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setFixedWidth(220)
        self.cancel = QPushButton("Cancel")
        self.status = QLabel("Choose the core and the port, then Validate.")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setObjectName("status")

        self.summary = _table(["Check", "Result"], "summary")
        self.evaluation = _table(results.EVALUATION_COLUMNS, "evaluation")
        self.evaluation.horizontalHeader().setStretchLastSection(False)
        self.layers = _table(("Ticks", "Instructions", "MACs", "Layer"), "layers")
        self.layers_note = QLabel("")
        self.layers_note.setWordWrap(True)
        checks, per_layer = QWidget(), QWidget()
        column = QVBoxLayout(checks)
        column.addWidget(self.summary, 1)
        column.addWidget(self.evaluation)
        column = QVBoxLayout(per_layer)
        column.addWidget(self.layers_note)
        column.addWidget(self.layers, 1)
        self.tabs = QTabWidget()  # one table at a time keeps 800x600 readable
        self.tabs.addTab(checks, "Checks")
        self.tabs.addTab(per_layer, "Per layer")

        self.show_on_canvas = QPushButton("Show on Canvas")
        self.show_on_canvas.setToolTip("Colour the graph's nodes by their device ticks")
        self.close_button = QPushButton("Close")

        layout = QVBoxLayout(self)
        layout.addWidget(choices)
        layout.addWidget(_row(self.validate, self.progress, self.cancel, self.status,
                              stretch=3))
        layout.addWidget(self.tabs, 1)
        layout.addWidget(_row(self.show_on_canvas, None, self.close_button))

        self.validate.clicked.connect(self._validate_clicked)
        self.cancel.clicked.connect(self.cancelRequested)
        self.refresh.clicked.connect(self.refreshRequested)
        self.show_on_canvas.clicked.connect(self.showRequested)
        self.close_button.clicked.connect(self.close)
        self.pick_file.clicked.connect(self._pick_file)
        self.pick_folder.clicked.connect(self._pick_folder)
        self.source.textEdited.connect(lambda _t: self.from_file.setChecked(True))
        self.set_busy(False)
        self.show_result(None)
        self.resize(screen_fit.share_of_screen(self, WANTED, 0.95))

    # -- what the controller sets ---------------------------------------------------------------

    def set_ports(self, ports: list[tuple[str, str]]) -> None:
        """Offer `ports` (port, label), keeping the chosen one when it is still there."""
        chosen = self.port.currentData()
        self.port.clear()
        for key, label in ports:
            self.port.addItem(label, key)
        self.port.setCurrentIndex(max(0, self.port.findData(chosen)))

    def set_busy(self, busy: bool, fraction: float = 0.0, text: str = "") -> None:
        """Progress and Cancel while a validation runs; the choices wait."""
        self.busy = busy
        self.progress.setVisible(busy)
        self.cancel.setVisible(busy)
        self.progress.setValue(int(fraction * 1000))
        self.validate.setEnabled(not busy)
        if busy:
            self.say(text or "Validating…")

    def say(self, text: str, error: bool = False) -> None:
        """One sentence under the buttons (an error in the problem colour)."""
        self.status.setStyleSheet(f"color: {style.PROBLEM};" if error else "")
        self.status.setText(text)

    def show_result(self, v: Validation | None, names: list[str] | None = None) -> None:
        """Fill the tables from `v` (None: empty tables, Show on Canvas off).

        `names`: each layer's nodes as the canvas names them.
        """
        self.show_on_canvas.setEnabled(v is not None)
        if v is None:
            for table in (self.summary, self.evaluation, self.layers):
                table.setRowCount(0)
            _fit_rows(self.evaluation)
            self.layers_note.setText("Per layer: the ticks of the first input, read by the "
                                     "runner firmware around each kernel.")
            return
        _fill(self.summary, [list(r) for r in results.summary(v)])
        self.summary.item(0, 1).setForeground(style.color(PASSED if v.passed else
                                                          style.PROBLEM))
        _fill(self.evaluation, results.evaluation(v), range(1, 6))
        _fit_rows(self.evaluation)
        self.layers.setHorizontalHeaderLabels(list(results.layer_columns(v)))
        rows = [[f"{t:,}", "–" if i is None else f"{i:,}", "" if m is None else f"{m:,}", name]
                for t, i, m, name in results.layers(v, names)]
        _fill(self.layers, rows, range(3))
        for r, la in enumerate(v.layers):
            self.layers.item(r, 3).setToolTip(f"kernel {la.symbol}: "
                                              f"{', '.join(la.nodes) or 'a row-chain driver'}")
        unit = v.tick_unit or "ticks"
        self.layers_note.setText(f"Per layer: {unit} of the first input's inference, read by "
                                 f"the runner firmware around each kernel; instructions from "
                                 f"QEMU's counting plugin where it ran.")

    # -- what it asks for -------------------------------------------------------------------------

    def request(self) -> ValidateRequest:
        """The form's choices."""
        text = self.port.currentText().strip()
        index = self.port.findText(text)
        port = self.port.itemData(index) if index >= 0 else text
        source = self.source.text().strip() if self.from_file.isChecked() else ""
        return ValidateRequest(self.core.currentData(), port, source or None,
                               self.count.value(), self.seed.value())

    def _validate_clicked(self) -> None:
        request = self.request()
        if not request.port:
            self.say("Choose a port: a serial device, a pyserial URL, or QEMU.", True)
            return
        if self.from_file.isChecked() and request.inputs is None:
            self.say("Name the samples' file or folder, or choose seeded random inputs.",
                     True)
            return
        self.validateRequested.emit(request)

    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Samples", self.source.text() or
                                              self.folder, "Samples (*.npz *.npy);;All (*)")
        self._picked(path)

    def _pick_folder(self) -> None:
        self._picked(QFileDialog.getExistingDirectory(self, "Samples folder",
                                                      self.source.text() or self.folder))

    def _picked(self, path: str) -> None:
        if path:
            self.source.setText(path)
            self.from_file.setChecked(True)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: D102 (Qt override)
        self._stop_running()
        super().closeEvent(event)

    def reject(self) -> None:  # noqa: D102 (Escape: as closing)
        self._stop_running()
        super().reject()

    def _stop_running(self) -> None:
        if self.busy:
            self.cancelRequested.emit()


def _row(*widgets, stretch: int | None = None) -> QWidget:
    """Widgets side by side; None is a stretch, `stretch` the index that takes the room."""
    holder = QWidget()
    row = QHBoxLayout(holder)
    row.setContentsMargins(0, 0, 0, 0)
    for i, widget in enumerate(widgets):
        if widget is None:
            row.addStretch(1)
        else:
            row.addWidget(widget, 1 if i == stretch else 0)
    if stretch is None and None not in widgets:
        row.addStretch(1)
    return holder
