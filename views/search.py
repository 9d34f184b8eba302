"""The search bar (Ctrl+F): a query, a regex switch, next/previous, and "3 of 12"."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QToolButton,
    QWidget,
)


class SearchBar(QWidget):
    """Holds the matches of the current query and which one is current.

    The bar does not search: it asks (`queryChanged`) and the application answers with
    `set_matches` or `set_error`. Moving between matches emits `currentChanged(key)`.

    Signals:
        queryChanged(text, regex): the query changed (debounced while typing).
        currentChanged(key): the current match moved; the canvas should centre on it.
        closed(): the bar was closed (Escape or the close button).
    """

    queryChanged = Signal(str, bool)
    currentChanged = Signal(object)
    closed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("SearchBar")
        self.matches: list = []
        self.index = -1
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 3, 6, 3)
        layout.addWidget(QLabel("Find"))
        self.query = QLineEdit()
        self.query.setPlaceholderText("node name, op type or tensor name")
        self.query.setClearButtonEnabled(True)
        self.query.setMinimumWidth(60)  # the bar must fit over the canvas of a small window
        self.query.textChanged.connect(self._debounce)
        self.query.returnPressed.connect(self._return)
        layout.addWidget(self.query, 1)
        self.regex = QCheckBox("Regex")
        self.regex.setToolTip("Treat the query as a regular expression")
        self.regex.toggled.connect(lambda _on: self._emit_query())
        layout.addWidget(self.regex)
        self.previous_button = self._button("◀", "Previous match (Shift+Enter, Shift+F3)",
                                            self.previous)
        self.next_button = self._button("▶", "Next match (Enter, F3)", self.next)
        layout.addWidget(self.previous_button)
        layout.addWidget(self.next_button)
        self.status = QLabel()
        self.status.setMinimumWidth(64)  # "12 of 345"
        # A long "no match" sentence is cut rather than widening the bar past a small canvas.
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.status)
        close = self._button("✕", "Close (Escape)", self.close_bar)
        layout.addWidget(close)
        for keys, slot in (("F3", self.next), ("Shift+F3", self.previous),
                           ("Escape", self.close_bar), ("Shift+Return", self.previous)):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(150)
        self._timer.timeout.connect(self._emit_query)
        self._update()

    def _button(self, text: str, tip: str, slot) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setToolTip(tip)
        button.setAutoRaise(True)
        button.clicked.connect(slot)
        return button

    # -- from the application -----------------------------------------------------------------

    def open(self) -> None:
        """Show the bar and select the query for typing."""
        self.show()
        self.query.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.query.selectAll()

    def set_matches(self, keys: list) -> None:
        """The matches of the query; the first becomes current."""
        self.matches = list(keys)
        self.index = 0 if self.matches else -1
        self.query.setStyleSheet("" if self.matches or not self.query.text() else
                                 "QLineEdit { background: #fde8e8; }")
        self.query.setToolTip("")
        self._update()
        if self.matches:
            self.currentChanged.emit(self.matches[0])

    def refresh_matches(self, keys: list) -> None:
        """New matches of the same query (the graph changed): keep the position, do not move."""
        self.matches = list(keys)
        self.index = min(max(self.index, 0), len(self.matches) - 1)
        self._update()

    def set_error(self, message: str) -> None:
        """The query cannot be used (a bad regular expression)."""
        self.matches, self.index = [], -1
        self.query.setStyleSheet("QLineEdit { background: #fde8e8; }")
        self.query.setToolTip(message)
        self._update()
        self.status.setText("bad regex")
        self.status.setToolTip(message)

    def current(self):
        """The current match's key, or None."""
        return self.matches[self.index] if self.matches else None

    # -- navigation ---------------------------------------------------------------------------

    def next(self) -> None:
        """Move to the next match, wrapping around."""
        self._step(1)

    def previous(self) -> None:
        """Move to the previous match, wrapping around."""
        self._step(-1)

    def _step(self, delta: int) -> None:
        if self._timer.isActive():  # typing not yet searched: search first, then move
            self._timer.stop()
            self._emit_query()
            return
        if not self.matches:
            return
        self.index = (self.index + delta) % len(self.matches)
        self._update()
        self.currentChanged.emit(self.matches[self.index])

    def close_bar(self) -> None:
        """Hide the bar; the application clears the highlight."""
        self.hide()
        self.closed.emit()

    def _return(self) -> None:
        self.next()

    def _debounce(self) -> None:
        self._timer.start()

    def _emit_query(self) -> None:
        self._timer.stop()
        self.queryChanged.emit(self.query.text(), self.regex.isChecked())

    def search_now(self) -> None:
        """Run the pending query at once (tests, and Enter right after typing)."""
        self._emit_query()

    def _update(self) -> None:
        count = len(self.matches)
        if not self.query.text():
            self.status.setText("")
        elif count == 0:
            self.status.setText("no match")
        else:
            self.status.setText(f"{self.index + 1} of {count}")
        self.status.setToolTip("")
        self.previous_button.setEnabled(count > 1)
        self.next_button.setEnabled(count > 1)
