"""Lessons: a teacher's note per pipeline stage, and presentation mode that steps through them.

The note editor sits in the Passes panel under the selected pass's documentation; notes live in
the document (`Document.stage_notes`, by stage key), each burst of typing is one undo step, and
the session file keeps them. View > Present Stages shows the stage on a full-screen canvas in
large type with the note under it; the arrow keys step through the stages that changed the graph
(through the Passes panel's own stepping, so the panel follows), Esc returns to the window.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, QRectF, Qt
from PySide6.QtGui import QAction, QKeySequence, QUndoCommand

from app.window.actions import view_menu
from compiler.passes.base import get_pass
from compiler.stage_notes import change_summary, first_sentence, stage_keys
from views.lesson import NoteEditor, PresentationView

BURST_S = 2.0  # keystrokes closer together than this are one undo step
PRESENT_SHORTCUT = "Shift+F5"  # F5 runs the pipeline; Shift+F5 presents, as in slide software
CONTEXT = 80.0  # scene units around a stage's changes, so their neighbours show too


class NoteCommand(QUndoCommand):
    """One burst of typing in a stage's note: merged with the next keystroke if it comes soon."""

    ID = 0x4E4F7465  # any id of this command type: only note edits merge with note edits

    def __init__(self, document, key: str, before: str, after: str):
        super().__init__(f"Note on {key}")
        self.document, self.key, self.before, self.after = document, key, before, after
        self.time = time.monotonic()

    def id(self) -> int:  # noqa: D102 (Qt override)
        return self.ID

    def mergeWith(self, other: QUndoCommand) -> bool:  # noqa: D102 (Qt override)
        if not isinstance(other, NoteCommand) or other.key != self.key \
                or other.time - self.time > BURST_S:
            return False
        self.after, self.time = other.after, other.time
        self.setObsolete(self.after == self.before)  # typed and deleted again: no step
        return True

    def redo(self) -> None:  # noqa: D102 (Qt override)
        self.document.set_stage_note(self.key, self.after)

    def undo(self) -> None:  # noqa: D102 (Qt override)
        self.document.set_stage_note(self.key, self.before)


class LessonsController(QObject):
    """The note editor of the Passes panel and presentation mode."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.stepping = window.stepping
        self.key: str | None = None  # the stage whose note the editor shows
        self.editor = NoteEditor()
        self.stepping.panel.add_below(self.editor)
        self.view = PresentationView(window)
        self.view.setWindowFlag(Qt.WindowType.Window)  # its own full-screen window
        self.view.hide()
        self._pending_present = False
        self.editor.noteEdited.connect(self._edited)
        self.view.stepRequested.connect(self.step)
        self.view.leaveRequested.connect(self.leave)
        self.stepping.stageChanged.connect(self._stage_changed)
        self.stepping.resultReady.connect(self._result_ready)
        self.document.notesChanged.connect(self._notes_changed)
        self.present_action = QAction("&Present Stages", window)
        self.present_action.setShortcut(QKeySequence(PRESENT_SHORTCUT))
        self.present_action.setStatusTip("Show the stages full screen in large type with your "
                                         "notes; arrow keys step, Esc returns")
        self.present_action.triggered.connect(self.present)
        menu = view_menu(window)
        menu.addSeparator()
        menu.addAction(self.present_action)

    # -- notes --------------------------------------------------------------------------------

    def stage_key(self, index: int | None) -> str | None:
        """The key of graph stage `index` (None for the loaded graph and lowering passes)."""
        stages = self.stepping.stages
        if index is None or not 0 < index < len(stages):
            return None
        return stage_keys([s.name for s in stages[1:]])[index - 1]

    def note(self, index: int | None) -> str:
        """The teacher's note on stage `index` ("" when none)."""
        key = self.stage_key(index)
        return self.document.stage_notes.get(key, "") if key else ""

    def _stage_changed(self, index: int) -> None:
        self.key = self.stage_key(index if index >= 0 else None)
        self.editor.set_stage(self.key, self.document.stage_notes.get(self.key, "")
                              if self.key else "")
        if self.is_presenting() and 0 <= index < len(self.stepping.stages):
            self._draw(index)

    def _result_ready(self, _result) -> None:
        if self._pending_present:
            self._pending_present = False
            self.present()

    def _edited(self, text: str) -> None:
        key = self.key
        if key is None:
            return
        before = self.document.stage_notes.get(key, "")
        if text != before:
            self.document.undo_stack.push(NoteCommand(self.document, key, before, text))

    def _notes_changed(self, key) -> None:
        """An undo, a redo or a restored session: the editor and the caption follow."""
        if self.key is not None and key in (None, self.key):
            self.editor.set_text(self.document.stage_notes.get(self.key, ""))
        index = self.stepping.index
        if self.is_presenting() and index is not None and 0 <= index < len(self.stepping.stages):
            self._caption(index)

    # -- presentation ---------------------------------------------------------------------------

    def is_presenting(self) -> bool:
        """True while the presentation screen is up."""
        return self.view.isVisible()

    def sequence(self) -> list[int]:
        """The stages presented: the loaded graph, then each pass that changed the graph."""
        stages = self.stepping.stages
        return [0] + [i for i, s in enumerate(stages) if s.record is not None and s.record.changed]

    def present(self) -> bool:
        """View > Present Stages: full screen from the selected stage (or the loaded graph).

        Without a pipeline run yet, the run starts and the presentation follows it.
        """
        stepping = self.stepping
        if not stepping.stages:
            self._pending_present = stepping.run_from_menu() is not None or \
                stepping.is_running()
            return False
        start = stepping.index if stepping.index in self.sequence() else 0
        self.view.setScreen(self.window.screen())
        self.view.showFullScreen()
        self.view.raise_()
        self.view.activateWindow()
        self.view.setFocus()
        stepping.show_stage(start)  # the panel follows; stageChanged draws it here too
        return True

    def step(self, delta: int) -> bool:
        """The next (1) or previous (-1) changed stage; False at either end."""
        current = self.stepping.index
        order = self.sequence()
        if current is None or current >= len(self.stepping.stages):
            return False
        later = [i for i in order if (i > current if delta > 0 else i < current)]
        if not later:
            return False
        self.stepping.show_stage(later[0] if delta > 0 else later[-1])
        return True

    def leave(self) -> None:
        """Esc: back to the window, the Passes panel on the stage presented last."""
        self.view.showNormal()
        self.view.hide()
        self.window.raise_()
        self.window.activateWindow()

    def _draw(self, index: int) -> None:
        self.stepping.draw_stage(self.view.canvas, index)
        self._caption(index)
        self.view.frame(*self._region(index))

    def _caption(self, index: int) -> None:
        stage = self.stepping.stages[index]
        order = self.sequence()
        where = f"{order.index(index) + 1}/{len(order)}" if index in order else f"{index}"
        record = stage.record
        if record is None:
            heading = f"{where} · The loaded model"
            detail = f"{len(stage.graph.nodes)} nodes, before any pass"
        else:
            heading = f"{where} · {self.stage_key(index)}"
            detail = f"{change_summary(record)}. {first_sentence(get_pass(record.name).doc)}"
        self.view.set_caption(heading, detail, self.note(index))

    def _region(self, index: int) -> tuple[QRectF | None, QRectF | None]:
        """The scene rectangle of what stage `index` changed, and of its first change.

        (None, None) shows the whole graph: the loaded model, the clean final graph.
        """
        stage = self.stepping.stages[index]
        record = stage.record
        if record is None or self.stepping.is_clean(index):
            return None, None
        canvas = self.view.canvas
        removed = set(record.removed)
        groups = [[canvas.box_rect(k) for k in record.added],
                  [canvas.box_rect(k) for k in record.modified],
                  [QRectF(g.box.x, g.box.y, g.box.w, g.box.h)
                   for k, g in stage.placed.ghosts.items() if k in removed]]
        groups = [[r for r in group if r is not None] for group in groups]
        rects = [r for group in groups for r in group]
        if not rects:
            return None, None
        region = rects[0]
        for rect in rects[1:]:
            region = region.united(rect)
        # What a reader looks for first: the topmost box the pass added (else modified).
        first = min(next(group for group in groups if group), key=lambda r: (r.top(), r.left()))
        return region.adjusted(-CONTEXT, -CONTEXT, CONTEXT, CONTEXT), first


def install(window) -> LessonsController:
    """Add the note editor to the Passes panel and View > Present Stages."""
    return LessonsController(window)


def screenshots(window, save) -> None:
    """presentation.png: a fusion stage in presentation mode, with an example note."""
    controller: LessonsController = window.lessons
    stepping = window.stepping
    if not stepping.stages:
        return
    order = controller.sequence()
    fused = [i for i in order if stepping.stages[i].record is not None
             and stepping.stages[i].record.category == "fuse"]
    index = fused[0] if fused else order[-1]
    view = controller.view
    view.resize(1280, 720)  # a projector's size, whatever screen the screenshot runs on
    stepping.draw_stage(view.canvas, index)
    controller._caption(index)
    if not controller.note(index):
        view.note.setText("Ask the class: which nodes does this pass remove, and why is the "
                          "result still the same function?")
        view.note.show()
    view.frame(*controller._region(index))
    save(view, "presentation.png")
