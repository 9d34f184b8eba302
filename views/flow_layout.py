"""A layout that places its items left to right and wraps to a new row when the width runs out.

Readouts (figure after figure) stay readable in a narrow dock instead of being clipped: Qt's
box layouts only ever use one row, so their minimum width is the sum of all their items.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    """Items in rows, each row as full as fits; height follows the width."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 12, row_spacing: int = 2):
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing, self._row_spacing = spacing, row_spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        """Take ownership of `item` (addWidget lands here)."""
        self._items.append(item)

    def count(self) -> int:
        """The number of items."""
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        """The item at `index`, or None past the end."""
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        """Remove and return the item at `index`."""
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        """Never wider or taller than its rows need."""
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        """The height depends on how many rows the width makes."""
        return True

    def heightForWidth(self, width: int) -> int:
        """The height of the rows at `width`."""
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        """Place the items in `rect`; the owner's minimum height becomes the rows' height.

        Box layouts squeeze a height-for-width item to its one-row minimum when space is
        short, which hides the wrapped rows: the owner's minimum keeps them on screen (a dock
        then scrolls instead).
        """
        super().setGeometry(rect)
        needed = self._place(rect, move=True)
        owner = self.parentWidget()
        if owner is not None and owner.layout() is self and owner.minimumHeight() != needed:
            owner.setMinimumHeight(needed)

    def sizeHint(self) -> QSize:
        """All items on one row."""
        width = sum(i.sizeHint().width() for i in self._items)
        width += self._spacing * max(len(self._items) - 1, 0)
        height = max((i.sizeHint().height() for i in self._items), default=0)
        return QSize(width, height)

    def minimumSize(self) -> QSize:
        """The widest single item: anything wider wraps."""
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        left, top, right, bottom = self.getContentsMargins()
        return size + QSize(left + right, top + bottom)

    def _place(self, rect: QRect, move: bool) -> int:
        """Lay the items out row by row in `rect`; return the height used."""
        left, top, right, bottom = self.getContentsMargins()
        area = rect.adjusted(left, top, -right, -bottom)
        x, y, row_height = area.x(), area.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            if x > area.x() and x + hint.width() > area.right() + 1:
                x, y, row_height = area.x(), y + row_height + self._row_spacing, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._spacing
            row_height = max(row_height, hint.height())
        return y + row_height - rect.y() + bottom
