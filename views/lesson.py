"""A lesson's widgets: the teacher's note editor of a stage, and the presentation screen."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QFont, QKeyEvent, QKeySequence, QTextCursor
from PySide6.QtWidgets import QFrame, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from views.canvas import GraphCanvas
from views.signals import signals_blocked

# Zoom of the presentation canvas: box titles (12 px at 1.0) read from the back of a room at
# about 30 px; below 1.6 a big change is shown in part rather than in type too small to read.
ROOM_ZOOM = 2.5
MIN_ROOM_ZOOM = 1.6
CAPTION_BG, CAPTION_FG, NOTE_FG, HINT_FG = "#1f2933", "#ffffff", "#ffe9a8", "#b8c2cc"


class NoteEditor(QWidget):
    """The teacher's note on the selected stage: plain text, saved with the session.

    Signals:
        noteEdited(text): the user changed the note (every keystroke; the app merges them).
    """

    noteEdited = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = QLabel()
        self.editor = QPlainTextEdit()
        # The document's undo history holds note edits, so Ctrl+Z undoes them like any edit.
        self.editor.setUndoRedoEnabled(False)
        self.editor.installEventFilter(self)
        self.editor.setTabChangesFocus(True)
        self.editor.setMinimumHeight(36)
        self.editor.textChanged.connect(lambda: self.noteEdited.emit(self.editor.toPlainText()))
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 2, 0, 0)
        column.setSpacing(2)
        column.addWidget(self.title)
        column.addWidget(self.editor)
        self.set_stage(None, "")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: D102 (Qt override)
        # The editor claims Ctrl+Z even with its own undo off: leave it to Edit > Undo.
        if watched is self.editor and event.type() == QEvent.Type.ShortcutOverride and (
                event.matches(QKeySequence.StandardKey.Undo)
                or event.matches(QKeySequence.StandardKey.Redo)):
            event.ignore()
            return True
        return super().eventFilter(watched, event)

    def set_stage(self, stage: str | None, text: str) -> None:
        """Edit the note on `stage` (None: no pass selected, nothing to write on)."""
        self.editor.setEnabled(stage is not None)
        if stage is None:
            self.title.setText("Teacher's note")
            self.editor.setPlaceholderText("Select a pass to write a note on it for the "
                                           "class (shown in presentation mode)")
        else:
            self.title.setText(f"Teacher's note on <b>{stage}</b>")
            self.editor.setPlaceholderText("What to say about this pass (saved in the session, "
                                           "shown in presentation mode)")
        self.set_text(text)

    def set_text(self, text: str) -> None:
        """Show `text` (an undo, another stage), without emitting noteEdited."""
        if text == self.editor.toPlainText():
            return  # the user's own typing: the cursor stays where it is
        with signals_blocked(self.editor):
            self.editor.setPlainText(text)
            self.editor.moveCursor(QTextCursor.MoveOperation.End)

    def text(self) -> str:
        """The note as typed."""
        return self.editor.toPlainText()


class PresentationView(QWidget):
    """A stage's graph in large type under a caption with its name and the teacher's note.

    Keys: Right, Down, Page Down or Space go to the next stage (a presenter's clicker sends
    Page Down), Left, Up, Page Up or Backspace to the previous one, Esc leaves.

    Signals:
        stepRequested(delta): the next (1) or previous (-1) stage was asked for.
        leaveRequested(): the presenter pressed Esc.
    """

    stepRequested = Signal(int)
    leaveRequested = Signal()

    FORWARD = (Qt.Key.Key_Right, Qt.Key.Key_Down, Qt.Key.Key_PageDown, Qt.Key.Key_Space)
    BACK = (Qt.Key.Key_Left, Qt.Key.Key_Up, Qt.Key.Key_PageUp, Qt.Key.Key_Backspace)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Kiln presentation")
        self.canvas = GraphCanvas()
        # The arrows step through stages here; the canvas would walk its boxes with them.
        self.canvas.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.canvas.setFrameShape(QFrame.Shape.NoFrame)
        self.canvas.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.canvas.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.heading = QLabel()
        self.detail = QLabel()
        self.note = QLabel()
        self.hint = QLabel("→ next stage · ← previous · Esc ends the presentation")
        for label, color in ((self.heading, CAPTION_FG), (self.detail, HINT_FG),
                             (self.note, NOTE_FG), (self.hint, HINT_FG)):
            label.setStyleSheet(f"color: {color};")
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)
        caption = QFrame()
        caption.setObjectName("presentationCaption")
        caption.setStyleSheet(f"#presentationCaption {{ background: {CAPTION_BG}; }}")
        rows = QVBoxLayout(caption)
        rows.setContentsMargins(28, 14, 28, 14)
        rows.setSpacing(6)
        for label in (self.heading, self.detail, self.note, self.hint):
            rows.addWidget(label)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.canvas, 1)
        column.addWidget(caption)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self._region: QRectF | None = None
        self._first: QRectF | None = None
        self._fonts()

    def set_caption(self, heading: str, detail: str, note: str) -> None:
        """The stage's name, what the pass did, and the teacher's note (hidden when empty)."""
        self.heading.setText(heading)
        self.detail.setText(detail)
        self.note.setText(note)
        self.note.setVisible(bool(note.strip()))

    def frame(self, region: QRectF | None, first: QRectF | None = None) -> None:
        """Show `region` of the scene (the stage's changes) as large as the room needs.

        None shows the graph from its top. A region too big for the screen at a readable
        zoom is shown around `first` (the first change), in type still readable.
        """
        self._region, self._first = region, first
        canvas = self.canvas
        rect = region if region is not None and not region.isEmpty() \
            else canvas.scene().sceneRect()
        if rect.isEmpty():
            return
        view = canvas.viewport().rect()
        margin = 60.0
        fit = min((view.width() - margin) / rect.width(), (view.height() - margin) / rect.height())
        canvas.set_zoom(max(MIN_ROOM_ZOOM, min(ROOM_ZOOM, fit)))
        if fit >= MIN_ROOM_ZOOM:
            centre = rect.center()
        elif first is not None:
            centre = first.center()
        else:  # the top of the graph, its middle column
            zoom = canvas.zoom_level()
            centre = QPointF(rect.center().x(), rect.top() + view.height() / 2 / zoom - 20)
        canvas.centerOn(centre)
        canvas.viewportChanged.emit()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: D102 (Qt override)
        key = event.key()
        if key in self.FORWARD:
            self.stepRequested.emit(1)
        elif key in self.BACK:
            self.stepRequested.emit(-1)
        elif key == Qt.Key.Key_Escape:
            self.leaveRequested.emit()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def resizeEvent(self, event) -> None:  # noqa: D102 (Qt override)
        super().resizeEvent(event)
        self._fonts()
        if self.canvas.graph() is not None:  # a window going full screen: frame it again
            self.layout().activate()
            self.frame(self._region, self._first)

    def _fonts(self) -> None:
        """Type sized to the screen: a line of caption is about a 24th of its height."""
        unit = max(16, self.height() // 24)
        for label, scale, bold in ((self.heading, 1.25, True), (self.detail, 0.7, False),
                                   (self.note, 1.0, False), (self.hint, 0.55, False)):
            font = QFont(label.font())
            font.setPixelSize(max(12, int(unit * scale)))
            font.setBold(bold)
            label.setFont(font)
