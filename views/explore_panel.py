"""The Explore dock's widgets: the settings, Start / Cancel / Resume, progress, scatter, front.

The panel only holds widgets and reads its form; the controller (`app.explore.controller`) runs the
exploration and applies, exports or compares points.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from compiler.codegen.targets import BOARDS, get_target
from compiler.mcu.firmware import emulated_targets
from views import style
from views.explore_scatter import ExploreScatter

NO_BOARD = "(none)"
ALL_CORES = -1  # the workers box's value for "a local Ray instance on every core"
COLUMNS = ("#", "score", "instructions", "flash", "RAM", "float", "configuration")



def _row(*buttons: QPushButton) -> QHBoxLayout:
    """Buttons side by side, from the left."""
    row = QHBoxLayout()
    for button in buttons:
        row.addWidget(button)
    row.addStretch(1)
    return row

class ExplorePanel(QWidget):
    """Settings, run buttons, progress, the scatter and the front's table."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        # Empty until the controller fills them from the document's own calibration.
        self.calibration = QLineEdit()
        self.calibration.setPlaceholderText("the document's calibration samples")
        self.calibration.setToolTip("Calibration samples: a .npy/.npz file, a folder of "
                                    "images, or digits:train for the sample model")
        self.evaluation = QLineEdit()
        self.evaluation.setPlaceholderText("held-out samples to measure each point on")
        self.evaluation.setToolTip("The samples every point's accuracy drop is measured on: "
                                   "with labels the score is accuracy, without it is top-1 "
                                   "agreement with the float model. One sample is 100/N "
                                   "points: use more samples than 100 / the bound")
        self.target = QComboBox()
        self.target.addItems(emulated_targets())
        self.target.setCurrentText("cortex-m7")
        self.board = QComboBox()
        self.max_drop = QDoubleSpinBox(decimals=2, minimum=0.0, maximum=99.0, singleStep=0.25,
                                       value=1.0, suffix=" points")
        self.max_drop.setToolTip("Accuracy a point may lose against the float model")
        self.trials = QSpinBox(minimum=1, maximum=10000, value=40)
        self.workers = QSpinBox(minimum=ALL_CORES, maximum=1024, value=ALL_CORES)
        self.workers.setSpecialValueText("every core (local Ray)")
        self.workers.setToolTip("CPUs of the local Ray instance; 0 measures the trials one "
                                "after another in the tool's process, without Ray")
        form = QGridLayout()  # two settings a row: the dock stays short beside the canvas
        pairs = (("Calibration:", self.calibration), ("Evaluation:", self.evaluation),
                 ("Target:", self.target), ("Board:", self.board),
                 ("Max drop:", self.max_drop), ("Trials:", self.trials))
        for i, (label, field) in enumerate(pairs):
            form.addWidget(QLabel(label), i // 2, 2 * (i % 2))
            form.addWidget(field, i // 2, 2 * (i % 2) + 1)
        form.addWidget(QLabel("Workers:"), 3, 0)
        form.addWidget(self.workers, 3, 1)
        form.setColumnStretch(1, 1)
        form.setColumnStretch(3, 1)
        self.hint = QLabel()
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet(f"color: {style.TEXT_MUTED};")
        self.hint.hide()
        self.warning = QLabel()  # beside the form: the dock's bottom may be scrolled away
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet(f"color: {style.PROBLEM};")
        self.warning.hide()
        self.file = QLabel()
        self.file.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.file.setMinimumWidth(40)
        self.choose_file = QPushButton("File…")
        self.choose_file.setToolTip("Keep the exploration in another EXPLORE.json (an "
                                    "existing one is read and can be resumed)")
        row = QHBoxLayout()
        row.addWidget(QLabel("Kept in:"))
        row.addWidget(self.file, 1)
        row.addWidget(self.choose_file)
        self.start = QPushButton("Start")
        self.start.setToolTip("Explore from scratch (the file's trials are replaced)")
        self.cancel = QPushButton("Cancel")
        self.cancel.setToolTip("Stop: every trial measured so far stays in the file")
        self.resume = QPushButton("Resume")
        self.resume.setToolTip("Go on with the file's exploration: nothing measured is "
                               "measured again")
        buttons = _row(self.start, self.cancel, self.resume)
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)
        self.progress = QLabel("Not started.")
        self.progress.setWordWrap(True)
        # Room for two lines: inside the splitter a label is not given its wrapped height.
        self.progress.setMinimumHeight(2 * self.progress.fontMetrics().lineSpacing() + 4)
        self.scatter = ExploreScatter()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.apply = QPushButton("Apply")
        self.apply.setToolTip("Make the point the document's quantization (one undo step)")
        self.export = QPushButton("Export Bundle…")
        self.export.setToolTip("Write the point as a bundle with its compile options")
        self.compare = QPushButton("Compare Two")
        self.compare.setToolTip("Open the two Ctrl+clicked points in the compare view")
        actions = _row(self.apply, self.export, self.compare)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.status = QLabel()
        self.status.setWordWrap(True)
        top = QWidget()
        upper = QVBoxLayout(top)
        upper.setContentsMargins(0, 0, 0, 0)
        upper.addLayout(form)
        upper.addWidget(self.hint)
        upper.addWidget(self.warning)
        upper.addLayout(row)
        upper.addLayout(buttons)
        upper.addWidget(self.bar)
        upper.addWidget(self.progress)
        upper.addWidget(self.scatter, 1)
        bottom = QWidget()
        lower = QVBoxLayout(bottom)
        lower.setContentsMargins(0, 0, 0, 0)
        lower.addWidget(QLabel("Pareto front (a click on a row or a point applies it):"))
        lower.addWidget(self.table, 1)
        lower.addLayout(actions)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setChildrenCollapsible(False)
        self.table.setMinimumHeight(90)
        # The wrapped lines stay out of the splitter, which does not give a label the height
        # its wrapping needs at a narrow width (they were drawn over the buttons).
        outer = QVBoxLayout(self)
        outer.addWidget(split, 1)
        outer.addWidget(self.status)
        outer.addWidget(self.note)
        self.target.currentTextChanged.connect(self._target_changed)
        self._target_changed(self.target.currentText())

    def set_hint(self, text: str) -> None:
        """The muted line under the form (hidden when empty)."""
        self.hint.setText(text)
        self.hint.setVisible(bool(text))

    def set_warnings(self, warnings) -> None:
        """The run's warnings (a coarse evaluation set), in the problem colour; none hides it."""
        self.warning.setText("\n".join(f"Warning: {w}" for w in warnings))
        self.warning.setVisible(bool(warnings))

    def set_file(self, path) -> None:
        """Say where the exploration is kept (the folder and file; the whole path on hover)."""
        if path is None:
            self.file.setText("—")
            self.file.setToolTip("")
            return
        self.file.setText(f"…/{path.parent.name}/{path.name}")
        self.file.setToolTip(str(path))

    def _target_changed(self, target: str) -> None:
        """Offer the boards with the chosen CPU."""
        name = get_target(target).name
        self.board.clear()
        self.board.addItem(NO_BOARD)
        self.board.addItems([b.name for b in BOARDS.values() if b.target == name])

    def chosen_board(self) -> str | None:
        """The board to fit, or None."""
        text = self.board.currentText()
        return None if text in ("", NO_BOARD) else text

    def chosen_workers(self) -> int | None:
        """None for every core (Ray), 0 for in the tool's process, else Ray's CPU count."""
        value = self.workers.value()
        return None if value == ALL_CORES else value

    def set_running(self, running: bool, resumable: bool) -> None:
        """Enable what applies while the tool runs, or after."""
        self.start.setEnabled(not running)
        self.cancel.setEnabled(running)
        self.resume.setEnabled(not running and resumable)
        self.choose_file.setEnabled(not running)
        if not running:
            self.bar.setRange(0, 1)

    def set_rows(self, rows: list[tuple], score: str) -> None:
        """The front's table: (number, score %, instructions, flash, RAM, float, summary)."""
        self.table.setHorizontalHeaderItem(1, QTableWidgetItem(score))
        self.table.setRowCount(len(rows))
        for i, (number, value, instructions, flash, ram, floats, summary) in enumerate(rows):
            cells = (str(number), f"{value:.2f} %", f"{instructions:,}", f"{flash:,}",
                     f"{ram:,}", str(floats), summary)
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, number)
                if j < len(cells) - 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)

    def row_number(self, row: int) -> int | None:
        """The trial number of table row `row`."""
        item = self.table.item(row, 0)
        return None if item is None else item.data(Qt.ItemDataRole.UserRole)
