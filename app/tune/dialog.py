"""The Tune Kernels dialog: target and trials, Start or Resume, progress with Cancel.

It draws what the controller gives it and emits requests; the `kiln tune` process, the log
and the document's last tuning belong to the controller. Closing it while a run goes on asks
for a cancel: the tool keeps every finished round in the log.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from views import screen_fit, style

WANTED = QSize(720, 330)
# (target, label): the cores QEMU counts instructions on, then this machine's clock.
TARGETS = (("cortex-m7", "cortex-m7 (instructions under QEMU)"),
           ("cortex-m4", "cortex-m4 (instructions under QEMU)"),
           ("cortex-m33", "cortex-m33 (instructions under QEMU)"),
           ("cortex-m55", "cortex-m55 (instructions under QEMU)"),
           ("cortex-m3", "cortex-m3 (instructions under QEMU)"),
           ("host", "host (time on this machine)"))
FIRST = "Choose the target and the trials, then Start."


class TuneDialog(QDialog):
    """Target, trials; Start (Resume once the log has entries); progress and Cancel.

    Signals:
        startRequested(str, int): Start or Resume, with the target and the trials.
        cancelRequested(): Cancel, or the dialog closed while a run goes on.
        showRequested(str): Show on Canvas: the tuned overlay of this target, please.
        targetChosen(str): another target: its log, please (the controller says what it has).
    """

    startRequested = Signal(str, int)
    cancelRequested = Signal()
    showRequested = Signal(str)
    targetChosen = Signal(str)

    def __init__(self, parent: QWidget | None, target: str = "cortex-m7", trials: int = 16):
        super().__init__(parent)
        self.setWindowTitle("Tune Kernels")
        self.busy = False
        self.target = QComboBox()
        for key, label in TARGETS:
            self.target.addItem(label, key)
        self.target.setCurrentIndex(max(0, self.target.findData(target)))
        self.target.setToolTip("The core whose instructions QEMU counts for each candidate "
                               "schedule, or this machine's clock")
        self.trials = QSpinBox()
        self.trials.setRange(1, 10000)
        self.trials.setValue(trials)
        self.trials.setToolTip("Builds of the network this run measures, each with one "
                               "candidate schedule per kernel workload")
        self.log = QLabel("")
        self.log.setObjectName("log")
        self.log.setWordWrap(True)
        self.log.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form = QFormLayout()
        form.addRow("Target:", _row(self.target))
        form.addRow("Trials:", _row(self.trials))
        form.addRow("Log:", self.log)
        choices = QGroupBox("Kernel schedules to search")
        choices.setLayout(form)

        self.start = QPushButton("Start")
        self.start.setDefault(True)
        self.progress = QProgressBar()
        self.progress.setFixedWidth(200)
        self.progress.setFormat("%v of %m trials")
        self.cancel = QPushButton("Cancel")
        self.cancel.setToolTip("Stop after saving the log: Resume goes on from it")
        self.status = QLabel(FIRST)
        self.status.setObjectName("status")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.show_on_canvas = QPushButton("Show on Canvas")
        self.show_on_canvas.setToolTip("Colour the graph's kernels by their tuned cost, the "
                                       "default schedule's beside it")
        self.close_button = QPushButton("Close")

        layout = QVBoxLayout(self)
        layout.addWidget(choices)
        layout.addWidget(_row(self.start, self.progress, self.cancel))
        layout.addWidget(self.status, 1)
        layout.addWidget(_row(self.show_on_canvas, None, self.close_button))

        self.start.clicked.connect(
            lambda: self.startRequested.emit(self.target.currentData(), self.trials.value()))
        self.cancel.clicked.connect(self.cancelRequested)
        self.show_on_canvas.clicked.connect(
            lambda: self.showRequested.emit(self.target.currentData()))
        self.close_button.clicked.connect(self.close)
        self.target.currentIndexChanged.connect(
            lambda _i: self.targetChosen.emit(self.target.currentData()))
        self.set_busy(False)
        self.set_log("", 0)
        self.resize(screen_fit.share_of_screen(self, WANTED, 0.95))

    # -- what the controller sets ---------------------------------------------------------------

    def set_log(self, where: str, entries: int) -> None:
        """The chosen target's log: where it is and how many schedules it holds.

        With entries, Start resumes from them and Show on Canvas has something to show.
        """
        held = f" ({entries:,} measured schedules)" if entries else " (none yet)"
        self.log.setText(f"{where}{held}" if where else "")
        self.start.setText("Resume" if entries else "Start")
        self.start.setToolTip("Go on from the log's schedules: none is measured twice" if
                              entries else "Measure the default schedules, then search")
        self.show_on_canvas.setEnabled(entries > 0 and not self.busy)

    def set_busy(self, busy: bool) -> None:
        """Progress and Cancel while `kiln tune` runs; the choices wait."""
        self.busy = busy
        for widget in (self.progress, self.cancel):
            widget.setVisible(busy)
        for widget in (self.start, self.target, self.trials):
            widget.setEnabled(not busy)
        if busy:
            self.progress.setRange(0, 0)  # moving until the first round ends
            self.show_on_canvas.setEnabled(False)

    def set_progress(self, done: int, total: int, text: str) -> None:
        """A round ended: `done` of `total` trials, the tool's own line."""
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.say(text)

    def say(self, text: str, error: bool = False) -> None:
        """One sentence under the buttons (an error in the problem colour)."""
        self.status.setStyleSheet(f"color: {style.PROBLEM};" if error else "")
        self.status.setText(text)

    # -- closing --------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: D102 (Qt override)
        self._stop_running()
        super().closeEvent(event)

    def reject(self) -> None:  # noqa: D102 (Escape: as closing)
        self._stop_running()
        super().reject()

    def _stop_running(self) -> None:
        if self.busy:
            self.cancelRequested.emit()


def _row(*widgets) -> QWidget:
    """Widgets side by side, then a stretch; None is a stretch in its place instead."""
    holder = QWidget()
    row = QHBoxLayout(holder)
    row.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        if widget is None:
            row.addStretch(1)
        else:
            row.addWidget(widget)
    if None not in widgets:
        row.addStretch(1)
    return holder
