"""The pipeline editor: enable, disable and reorder passes; the controller runs and saves them."""

from __future__ import annotations

import copy

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from compiler.passes.pipeline import PassConfig, Pipeline
from views.signals import signals_blocked

ROLE = Qt.ItemDataRole.UserRole


class PipelineEditor(QWidget):
    """A checkable, reorderable list of the pipeline's entries.

    Signals:
        runRequested(): run the edited pipeline.
        loadRequested(), saveRequested(), resetRequested(): the file buttons (the controller
            asks for the file and reports errors with `set_message`).
        edited(): an entry was enabled, disabled or moved.
    """

    runRequested = Signal()
    loadRequested = Signal()
    saveRequested = Signal()
    resetRequested = Signal()
    edited = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.list = QListWidget()
        self.list.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)
        self.list.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.list.setMinimumHeight(48)
        self.list.itemChanged.connect(lambda _item: self.edited.emit())
        self.list.model().rowsMoved.connect(lambda *_args: self.edited.emit())
        self.up_button = QPushButton("Up")
        self.up_button.setToolTip("Move the selected pass earlier")
        self.up_button.clicked.connect(lambda: self.move_current(-1))
        self.down_button = QPushButton("Down")
        self.down_button.setToolTip("Move the selected pass later")
        self.down_button.clicked.connect(lambda: self.move_current(1))
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Run this pipeline on the model and show its stages")
        self.run_button.clicked.connect(self.runRequested)
        self.load_button = QPushButton("Load…")
        self.load_button.clicked.connect(self.loadRequested)
        self.save_button = QPushButton("Save…")
        self.save_button.clicked.connect(self.saveRequested)
        self.reset_button = QPushButton("Default")
        self.reset_button.setToolTip("Back to Kiln's default pipeline")
        self.reset_button.clicked.connect(self.resetRequested)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        moves = QHBoxLayout()
        for button in (self.up_button, self.down_button):
            moves.addWidget(button)
        moves.addStretch(1)
        moves.addWidget(self.run_button)
        files = QHBoxLayout()
        for button in (self.load_button, self.save_button, self.reset_button):
            files.addWidget(button)
        files.addStretch(1)
        column = QVBoxLayout(self)
        column.setContentsMargins(4, 4, 4, 4)
        hint = QLabel("Check a pass to run it; drag or use Up/Down to reorder.")
        hint.setWordWrap(True)
        column.addWidget(hint)
        column.addWidget(self.list, 1)
        column.addLayout(moves)
        column.addLayout(files)
        column.addWidget(self.message)

    def set_pipeline(self, pipeline: Pipeline) -> None:
        """Show `pipeline` (a copy is edited)."""
        with signals_blocked(self.list):
            self.list.clear()
            for config in pipeline:
                self.list.addItem(self._item(copy.copy(config)))

    def _item(self, config: PassConfig) -> QListWidgetItem:
        text = config.name + ("  (to a fixed point)" if config.mode == "fixpoint" else "")
        item = QListWidgetItem(text)
        item.setData(ROLE, config)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable
                      | Qt.ItemFlag.ItemIsDragEnabled)
        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsDropEnabled)
        item.setCheckState(Qt.CheckState.Checked if config.enabled else Qt.CheckState.Unchecked)
        if config.note:
            item.setToolTip(config.note)
        return item

    def pipeline(self) -> Pipeline:
        """The pipeline as edited: the list's order and check marks."""
        out = []
        for row in range(self.list.count()):
            item = self.list.item(row)
            config = copy.copy(item.data(ROLE))
            config.enabled = item.checkState() == Qt.CheckState.Checked
            out.append(config)
        return Pipeline(out)

    def set_enabled_at(self, row: int, enabled: bool) -> None:
        """Check or uncheck the entry at `row`."""
        self.list.item(row).setCheckState(Qt.CheckState.Checked if enabled
                                          else Qt.CheckState.Unchecked)

    def move_current(self, delta: int) -> None:
        """Move the selected entry up (-1) or down (1)."""
        row = self.list.currentRow()
        target = row + delta
        if row < 0 or not 0 <= target < self.list.count():
            return
        item = self.list.takeItem(row)
        self.list.insertItem(target, item)
        self.list.setCurrentRow(target)
        self.edited.emit()

    def set_message(self, text: str, error: bool = False) -> None:
        """One line under the buttons (a saved file, or what went wrong)."""
        self.message.setStyleSheet("color: #c62828;" if error else "")
        self.message.setText(text)
