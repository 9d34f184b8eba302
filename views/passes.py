"""The pass panel (stages of a pipeline run, what each pass did, stepping) and the stage view."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from views.canvas import GraphCanvas
from views.graph_items import DIFF_COLORS
from views.signals import signals_blocked

COLUMNS = ("#", "stage", "+", "−", "~", "ms", "verify")
OK, BAD = "#2e7d32", "#c62828"


@dataclass
class StageRow:
    """One line of the panel: the loaded graph (index 0), a pass run or a lowering pass.

    A lowering row (`lowering` is its pass's name) has a check box that switches the pass on
    or off; `tip` says what it did to the arena (`effect`) or why it did not run.
    """

    name: str
    changed: bool = True
    added: int = 0
    removed: int = 0
    modified: int = 0
    ms: float | None = None
    verified: bool = False
    matches: bool | None = None
    max_abs_err: float | None = None
    nodes: int = 0
    lowering: str = ""
    enabled: bool = True
    tip: str = ""
    effect: str = ""


def verify_text(row: StageRow) -> tuple[str, str]:
    """(cell text, tooltip) of the verify column: a check mark or a cross with the max error."""
    if row.matches is None:
        return "", "not verified"
    err = f"{row.max_abs_err:.2g}" if row.max_abs_err is not None else "?"
    how = "checked after this pass" if row.verified else "unchanged: same as the stage before"
    if row.matches:
        return f"✓ {err}", f"outputs match the loaded model (max abs error {err}); {how}"
    return f"✗ {err}", f"outputs differ from the loaded model (max abs error {err}); {how}"


class PassPanel(QWidget):
    """Stages as a table with diff badges, the selected pass's documentation, and controls.

    Signals:
        stageSelected(index): the user picked a stage (0 is the loaded graph).
        playToggled(on): the play button was pressed or released.
        verifyToggled(on): the user switched verification on or off.
        runRequested(): the user asked for the pipeline to run again.
        loweringToggled(name, on): the user switched a lowering pass on or off.
    """

    stageSelected = Signal(int)
    loweringToggled = Signal(str, bool)
    playToggled = Signal(bool)
    verifyToggled = Signal(bool)
    runRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._rows: list[StageRow] = []
        self._lowering: list[StageRow] = []
        self.status = QLabel("No pipeline run yet")
        self.status.setWordWrap(True)
        self.hide_unchanged = QCheckBox("Hide unchanged")
        self.hide_unchanged.setToolTip("List only the passes that changed the graph")
        self.hide_unchanged.toggled.connect(self._apply_filter)
        self.verify_box = QCheckBox("Verify each pass")
        self.verify_box.setToolTip("Run the interpreter after every pass that changed the graph "
                                   "and compare with the loaded model (on by default for small "
                                   "models)")
        self.verify_box.clicked.connect(self.verifyToggled)
        self.prev_button = QToolButton()
        self.prev_button.setText("◀")
        self.prev_button.setToolTip("Previous stage (Alt+Up)")
        self.prev_button.clicked.connect(lambda: self.step(-1))
        self.play_button = QToolButton()
        self.play_button.setText("▶ Play")
        self.play_button.setCheckable(True)
        self.play_button.setToolTip("Step through the stages one after another")
        self.play_button.toggled.connect(self._play_toggled)
        self.next_button = QToolButton()
        self.next_button.setText("▶")
        self.next_button.setToolTip("Next stage (Alt+Down)")
        self.next_button.clicked.connect(lambda: self.step(1))
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Run the pipeline again (F5)")
        self.run_button.clicked.connect(self.runRequested)

        self.table = QTreeWidget()
        self.table.setColumnCount(len(COLUMNS))
        self.table.setHeaderLabels(COLUMNS)
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setAlternatingRowColors(True)
        header = self.table.header()
        header.setStretchLastSection(False)
        for column in range(len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column, tip in ((2, "nodes added"), (3, "nodes removed"), (4, "nodes modified"),
                            (5, "time of the pass"), (6, "outputs checked against the loaded "
                                                       "model")):
            self.table.headerItem().setToolTip(column, tip)
        self.table.currentItemChanged.connect(self._current_changed)
        self.table.itemChanged.connect(self._item_changed)
        self.table.setMinimumHeight(48)

        self.doc = QTextBrowser()
        self.doc.setOpenLinks(False)
        self.doc.setMinimumHeight(24)
        self.provenance = QLabel()
        self.provenance.setWordWrap(True)
        self.provenance.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        controls = QHBoxLayout()
        for widget in (self.prev_button, self.play_button, self.next_button):
            controls.addWidget(widget)
        controls.addStretch(1)
        controls.addWidget(self.run_button)
        lower = QWidget()
        lower_box = QVBoxLayout(lower)
        lower_box.setContentsMargins(0, 0, 0, 0)
        lower_box.addWidget(self.doc, 1)
        lower_box.addWidget(self.provenance)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self._split = split
        column = QVBoxLayout(self)
        column.setContentsMargins(4, 4, 4, 4)
        column.addWidget(self.status)
        column.addLayout(controls)
        options = QHBoxLayout()
        options.addWidget(self.hide_unchanged)
        options.addWidget(self.verify_box)
        options.addStretch(1)
        column.addLayout(options)
        column.addWidget(split, 1)

    def add_below(self, widget: QWidget) -> None:
        """Put `widget` under the pass's documentation (the teacher's note editor).

        In the splitter, so the user shares the height between the list, the text and it.
        """
        self._split.addWidget(widget)
        self._split.setStretchFactor(self._split.count() - 1, 1)

    # -- content ------------------------------------------------------------------------------

    def set_stages(self, rows: list[StageRow]) -> None:
        """Show a new run's stages (nothing selected); the lowering rows stay after them."""
        self._rows = list(rows)
        self._fill()

    def set_lowering(self, rows: list[StageRow]) -> None:
        """Show the lowering passes after the stages (the selection stays on its index)."""
        current = self.current()
        self._lowering = list(rows)
        self._fill()
        if current is not None:
            self.set_current(current)

    def lowering_offset(self) -> int:
        """Index of the first lowering row (the number of graph stages)."""
        return len(self._rows)

    def _fill(self) -> None:
        rows = self._rows + self._lowering
        with signals_blocked(self.table):
            self.table.clear()
            colors = {2: DIFF_COLORS["added"], 3: DIFF_COLORS["removed"], 4: "#b07400"}
            for index, row in enumerate(rows):
                if row.lowering:
                    self.table.addTopLevelItem(self._lowering_item(index, row))
                    continue
                check, tip = verify_text(row)
                cells = [str(index), row.name,
                         f"+{row.added}" if row.added else "", f"−{row.removed}" if row.removed
                         else "", f"~{row.modified}" if row.modified else "",
                         f"{row.ms:.1f}" if row.ms is not None else "", check]
                item = QTreeWidgetItem(cells)
                item.setData(0, Qt.ItemDataRole.UserRole, index)
                for column, color in colors.items():
                    item.setForeground(column, QBrush(QColor(color)))
                    item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight)
                item.setTextAlignment(5, Qt.AlignmentFlag.AlignRight)
                item.setForeground(6, QBrush(QColor(OK if row.matches else BAD)))
                item.setToolTip(6, tip)
                if index and not row.changed:
                    item.setForeground(1, QBrush(QColor("#8a939c")))
                    item.setToolTip(1, "changed nothing")
                self.table.addTopLevelItem(item)
        self._apply_filter()

    def _lowering_item(self, index: int, row: StageRow) -> QTreeWidgetItem:
        """A lowering pass's line: a check box by its number to switch it.

        Its effect stays in the tooltip: a byte count in a column would squeeze the names.
        """
        item = QTreeWidgetItem([str(index), row.name, "", "", "", "", ""])
        item.setData(0, Qt.ItemDataRole.UserRole, index)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(0, Qt.CheckState.Checked if row.enabled
                           else Qt.CheckState.Unchecked)
        item.setToolTip(0, "Untick to compile without this lowering pass")
        item.setToolTip(1, f"{row.tip} ({row.effect})" if row.effect else row.tip)
        if not row.changed:
            item.setForeground(1, QBrush(QColor("#8a939c")))
        return item

    def rows(self) -> list[StageRow]:
        """The graph stages shown (the lowering passes follow them: `lowering_rows`)."""
        return list(self._rows)

    def lowering_rows(self) -> list[StageRow]:
        """The lowering passes shown after the stages."""
        return list(self._lowering)

    def lowering_check(self, name: str) -> QTreeWidgetItem | None:
        """The table line of lowering pass `name` (its check box is in column 0)."""
        for k, row in enumerate(self._lowering):
            if row.lowering == name:
                return self.table.topLevelItem(len(self._rows) + k)
        return None

    def _item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        index = item.data(0, Qt.ItemDataRole.UserRole)
        k = index - len(self._rows) if index is not None else -1
        if column == 0 and 0 <= k < len(self._lowering):
            on = item.checkState(0) == Qt.CheckState.Checked
            if on != self._lowering[k].enabled:
                self._lowering[k].enabled = on
                self.loweringToggled.emit(self._lowering[k].lowering, on)

    def set_status(self, text: str) -> None:
        """The line above the table (run summary, verify mode, errors)."""
        self.status.setText(text)

    def set_verify(self, on: bool) -> None:
        """Show whether the run verified (without emitting verifyToggled)."""
        self.verify_box.setChecked(on)

    def set_doc(self, html: str) -> None:
        """What the selected pass does."""
        self.doc.setHtml(html)

    def set_provenance(self, text: str) -> None:
        """Where the node selected on the canvas came from (or what it became)."""
        self.provenance.setText(text)

    # -- selection and stepping ----------------------------------------------------------------

    def current(self) -> int | None:
        """Index of the selected stage, or None."""
        item = self.table.currentItem()
        return item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None

    def set_current(self, index: int | None) -> None:
        """Select a stage without emitting stageSelected (None clears)."""
        with signals_blocked(self.table):
            if index is None or not 0 <= index < self.table.topLevelItemCount():
                self.table.setCurrentItem(None)
            else:
                self.table.setCurrentItem(self.table.topLevelItem(index))

    def visible(self) -> list[int]:
        """Indices of the stages listed (all, or the changed ones and the loaded graph)."""
        return [i for i in range(self.table.topLevelItemCount()) if not self._hidden(i)]

    def step(self, delta: int) -> bool:
        """Select the next (1) or previous (-1) listed stage; False at either end."""
        shown = self.visible()
        if not shown:
            return False
        current = self.current()
        if current is None:
            target = shown[0] if delta > 0 else shown[-1]
        else:
            later = [i for i in shown if (i > current if delta > 0 else i < current)]
            if not later:
                return False
            target = later[0] if delta > 0 else later[-1]
        self.table.setCurrentItem(self.table.topLevelItem(target))  # emits stageSelected
        return True

    def _hidden(self, index: int) -> bool:
        rows = self._rows + self._lowering
        return bool(self.hide_unchanged.isChecked() and index > 0 and index < len(rows)
                    and not rows[index].changed and not rows[index].lowering)

    def _apply_filter(self) -> None:
        for index in range(self.table.topLevelItemCount()):
            self.table.topLevelItem(index).setHidden(self._hidden(index))

    def _current_changed(self, item, _previous) -> None:
        if item is not None:
            self.stageSelected.emit(item.data(0, Qt.ItemDataRole.UserRole))

    def _play_toggled(self, on: bool) -> None:
        self.play_button.setText("⏸ Pause" if on else "▶ Play")
        self.playToggled.emit(on)

    def stop_playing(self) -> None:
        """Release the play button (at the last stage, or when the run changes)."""
        self.play_button.setChecked(False)


class StageView(QWidget):
    """A read-only canvas under a banner saying which stage it shows and how to leave.

    Signals:
        backRequested(): the user asked to return to the model (button or Esc).
    """

    backRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.canvas = GraphCanvas()
        self.banner = QLabel()
        self.banner.setStyleSheet("color: #5a3b00; font-weight: bold;")
        self.banner.setWordWrap(True)  # a narrow window wraps it instead of growing
        legend = QLabel(" ".join(
            f"<span style='color:{DIFF_COLORS[kind]}'>■</span> {kind}"
            for kind in ("added", "modified", "removed")) + " · faded: unused, left for dce")
        legend.setStyleSheet("color: #5a3b00;")
        legend.setWordWrap(True)
        self.clean_final = QCheckBox("Clean final graph")
        self.clean_final.setChecked(True)
        self.clean_final.setToolTip("On the last stage, lay the final graph out afresh, without "
                                    "the nodes the passes removed (uncheck to see them)")
        back = QPushButton("Back to the model")
        back.setToolTip("Leave the stage view and edit the model again (Esc)")
        back.clicked.connect(self.backRequested)
        bar = QFrame()
        bar.setObjectName("stageBanner")  # the style must not reach the labels (QFrames too)
        bar.setStyleSheet("#stageBanner { background: #ffe9b0; "
                          "border-bottom: 1px solid #e0b040; }")
        # Two rows: in one, the four parts set a minimum width that kept a small window from
        # being 800 pixels wide, and squeezed the labels into tall columns of words.
        rows = QVBoxLayout(bar)
        rows.setContentsMargins(10, 4, 6, 4)
        rows.setSpacing(2)
        for left, right in ((self.banner, back), (legend, self.clean_final)):
            row = QHBoxLayout()
            row.addWidget(left, 1)
            row.addWidget(right)
            rows.addLayout(row)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(bar)
        column.addWidget(self.canvas, 1)
        escape_key = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        escape_key.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        escape_key.activated.connect(self.backRequested)
