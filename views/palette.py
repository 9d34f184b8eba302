"""The operator palette: operators that can be inserted on the selected edge."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from compiler import ops


class OperatorPalette(QWidget):
    """A filterable list of operators; double-click or "Insert" asks to insert one.

    The application says which edge is the target (`set_target`); without one the insert button
    is disabled and the hint says to select an edge.

    Signals:
        insertRequested(op): insert `op` on the target edge.
    """

    insertRequested = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("OperatorPalette")
        self._target: str | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter operators")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)
        layout.addWidget(self.filter)
        self.list = QListWidget()
        self.list.itemDoubleClicked.connect(lambda _item: self._insert())
        self.list.currentItemChanged.connect(lambda *_: self._update())
        layout.addWidget(self.list, 1)
        self.hint = QLabel()
        self.hint.setWordWrap(True)
        layout.addWidget(self.hint)
        self.insert_button = QPushButton("Insert on Edge")
        self.insert_button.clicked.connect(self._insert)
        layout.addWidget(self.insert_button)
        self._update()

    def set_operators(self, names: list[str], colors: dict[str, QColor] | None = None) -> None:
        """The operators offered, in order; `colors` maps a category to its canvas colour.

        Each operator shows a swatch of its category's colour, as on the canvas.
        """
        self.list.clear()
        for name in names:
            opdef = ops.get(name)
            category = opdef.category if opdef else ""
            item = QListWidgetItem(name)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setToolTip(f"{name} ({category}): {opdef.doc}" if opdef and opdef.doc else name)
            if colors and category in colors:
                item.setIcon(_swatch(colors[category]))
            self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(0)
        self._apply_filter(self.filter.text())

    def set_target(self, description: str | None) -> None:
        """The edge an insert goes to (a short description), or None when no edge is selected."""
        self._target = description
        self._update()

    def current_operator(self) -> str | None:
        """The highlighted operator."""
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item and not item.isHidden() else None

    def _apply_filter(self, text: str) -> None:
        needle = text.strip().casefold()
        for row in range(self.list.count()):
            item = self.list.item(row)
            item.setHidden(bool(needle) and needle not in item.text().casefold())
        visible = [self.list.item(r) for r in range(self.list.count())
                   if not self.list.item(r).isHidden()]
        # Typing a name's beginning picks that operator (Sigmoid before HardSigmoid).
        prefixed = [i for i in visible if needle and i.text().casefold().startswith(needle)]
        current = self.list.currentItem()
        if prefixed:
            self.list.setCurrentItem(prefixed[0])
        elif current is None or current.isHidden():
            self.list.setCurrentItem(visible[0] if visible else None)
        self._update()

    def _update(self) -> None:
        op = self.current_operator()
        self.insert_button.setEnabled(self._target is not None and op is not None)
        if self._target is None:
            self.hint.setText("Select an edge on the canvas to insert an operator on it.")
        else:
            self.hint.setText(f"Target: {self._target}")

    def _insert(self) -> None:
        op = self.current_operator()
        if op is not None and self._target is not None:
            self.insertRequested.emit(op)


def _swatch(color: QColor) -> QIcon:
    pixmap = QPixmap(14, 14)
    pixmap.fill(QColor(0, 0, 0, 0))
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(color.darker(130))
    painter.setBrush(color)
    painter.drawRoundedRect(1, 1, 12, 12, 3, 3)
    painter.end()
    return QIcon(pixmap)
