"""Lessons: notes typed on stages survive a session; presentation mode is driven by its keys."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.document.sessions import read_session, save_session
from app.window.mainwindow import MainWindow
from compiler.stage_notes import change_summary
from tests.gui.helpers import copy_sample, make_window, open_and_wait
from views.lesson import MIN_ROOM_ZOOM

TIMEOUT = 120000
FUSE_NOTE = "Conv and Relu become one kernel: the activation is applied in the store."
DCE_NOTE = "The second dce sweeps away what the fusions left behind."


def _window(qtbot, model):
    """A window with `model` open and its pipeline run."""
    window = make_window(qtbot, None)
    with qtbot.waitSignal(window.stepping.resultReady, timeout=TIMEOUT):
        open_and_wait(qtbot, window, model)
    return window


def _row(window, key: str) -> int:
    """The Passes panel's row of stage `key`."""
    lessons = window.lessons
    return next(i for i in range(1, len(window.stepping.stages)) if lessons.stage_key(i) == key)


def _click_stage(qtbot, window, key: str) -> int:
    """Click stage `key` in the pass list with the mouse; returns its row."""
    table = window.stepping.panel.table
    index = _row(window, key)
    item = table.topLevelItem(index)
    table.scrollToItem(item)
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.visualItemRect(item).center())
    assert window.stepping.index == index and window.lessons.key == key
    return index


def _type_note(qtbot, window, text: str) -> None:
    """Click into the note editor and type `text` key by key."""
    editor = window.lessons.editor.editor
    assert editor.isEnabled()
    qtbot.mouseClick(editor.viewport(), Qt.MouseButton.LeftButton)
    qtbot.keyClicks(editor, text)


def test_notes_typed_on_two_stages_come_back_with_the_session(qtbot, tmp_path):
    window = _window(qtbot, copy_sample(tmp_path))
    doc = window.document
    _click_stage(qtbot, window, "fuse_activations")
    _type_note(qtbot, window, FUSE_NOTE)
    _click_stage(qtbot, window, "dce#2")
    start = doc.undo_stack.index()
    _type_note(qtbot, window, DCE_NOTE)
    assert doc.stage_notes == {"fuse_activations": FUSE_NOTE, "dce#2": DCE_NOTE}
    assert doc.is_dirty() and window.windowTitle().find("*") >= 0
    # A burst of typing is one undo step; undo takes the note away from the editor too.
    # Ctrl+Z in the editor is Edit > Undo: it takes the note away from the document too.
    assert doc.undo_stack.index() == start + 1
    editor = window.lessons.editor.editor
    qtbot.keyClick(editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert "dce#2" not in doc.stage_notes and window.lessons.editor.text() == ""
    qtbot.keyClick(editor, Qt.Key.Key_Y, Qt.KeyboardModifier.ControlModifier)  # Edit > Redo
    assert window.lessons.editor.text() == DCE_NOTE and doc.stage_notes["dce#2"] == DCE_NOTE
    # The autosave keeps them, so a crash does not cost them.
    recovered = json.loads(window.recovery.autosave().read_text())
    assert recovered["notes"] == {"fuse_activations": FUSE_NOTE, "dce#2": DCE_NOTE}
    # Back on the first stage, the editor shows its note.
    _click_stage(qtbot, window, "fuse_activations")
    assert window.lessons.editor.text() == FUSE_NOTE

    session = save_session(window, tmp_path / "lesson")
    saved = json.loads(session.read_text())
    assert saved["kiln_session"] == 2
    assert saved["notes"] == {"fuse_activations": FUSE_NOTE, "dce#2": DCE_NOTE}
    assert saved["edited"] is None  # only notes changed: the session names the model itself
    assert read_session(session)[0]["notes"] == saved["notes"]
    doc.undo_stack.setClean()
    window.close()

    again = MainWindow(remember=False)
    qtbot.addWidget(again, before_close_func=lambda w: w.document.undo_stack.setClean())
    again.show()
    with qtbot.waitSignals([again.sessions.restored, again.stepping.resultReady],
                           timeout=TIMEOUT):
        assert again.sessions.open_session(session)
    assert again.document.stage_notes == {"fuse_activations": FUSE_NOTE, "dce#2": DCE_NOTE}
    assert again.document.path == tmp_path / "digits_cnn.onnx"
    _click_stage(qtbot, again, "dce#2")
    assert again.lessons.editor.text() == DCE_NOTE
    _click_stage(qtbot, again, "fuse_activations")
    assert again.lessons.editor.text() == FUSE_NOTE
    _click_stage(qtbot, again, "to_nhwc")
    assert again.lessons.editor.text() == ""
    # The reopened notes go into the exported walkthrough, from the window and from the CLI.
    from html import escape

    from PySide6.QtWidgets import QFileDialog

    from app.cli import main

    folder = tmp_path / "from-window"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QFileDialog, "getSaveFileName",
                      staticmethod(lambda *a, **k: (str(folder), "")))
        with qtbot.waitSignal(again.walkthrough.written, timeout=TIMEOUT):
            again.walkthrough.action.trigger()
    cli_folder = tmp_path / "from-cli"
    assert main(["walkthrough", str(tmp_path / "digits_cnn.onnx"), "--session", str(session),
                 "-o", str(cli_folder)]) == 0
    for out in (folder, cli_folder):
        pages = {s["key"]: s["page"] for s in
                 json.loads((out / "walkthrough.json").read_text())["stages"]}
        for key, note in (("fuse_activations", FUSE_NOTE), ("dce#2", DCE_NOTE)):
            first = note.splitlines()[0]
            assert escape(first) in (out / pages[key]).read_text(), (out, key)


def test_a_version_1_session_without_notes_still_opens(qtbot, tmp_path):
    window = _window(qtbot, copy_sample(tmp_path))
    session = save_session(window, tmp_path / "old")
    old = json.loads(session.read_text())
    old["kiln_session"] = 1
    del old["notes"]
    session.write_text(json.dumps(old))
    with qtbot.waitSignal(window.sessions.restored, timeout=TIMEOUT):
        assert window.sessions.open_session(session)
    assert window.document.stage_notes == {}


def test_a_session_with_a_malformed_note_is_refused_in_one_line(qtbot, tmp_path, message_boxes):
    window = _window(qtbot, copy_sample(tmp_path))
    session = save_session(window, tmp_path / "bad")
    doc = json.loads(session.read_text())
    doc["notes"] = {"fuse_activations": ["not", "text"]}
    session.write_text(json.dumps(doc))
    assert not window.sessions.open_session(session)
    assert message_boxes.kinds() == ["critical"]
    assert "the note on fuse_activations is not text" in message_boxes.shown[0][2]


def test_presentation_steps_through_changed_stages_with_their_notes(qtbot, tmp_path):
    window = _window(qtbot, copy_sample(tmp_path))
    lessons, stepping = window.lessons, window.stepping
    order = lessons.sequence()
    first, second = (lessons.stage_key(i) for i in order[1:3])
    notes = {first: f"First, {first}: watch the green boxes.",
             second: f"Then {second}, which the class should predict."}
    for key, text in notes.items():
        _click_stage(qtbot, window, key)
        _type_note(qtbot, window, text)
    stepping.leave_stage()
    geometry, state = window.geometry(), window.windowState()
    view = lessons.view

    window.activateWindow()
    qtbot.keyClick(window, Qt.Key.Key_F5, Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is view)  # the keys go to it
    assert view.windowState() & Qt.WindowState.WindowFullScreen
    assert stepping.index == 0 and "loaded model" in view.heading.text()
    assert not view.note.isVisibleTo(view)

    def shows(index: int) -> None:
        record = stepping.stages[index].record
        key = lessons.stage_key(index)
        assert stepping.index == index and stepping.panel.current() == index
        assert key in view.heading.text() and change_summary(record) in view.detail.text()
        assert view.note.text() == notes[key] and view.note.isVisibleTo(view)
        assert view.canvas.graph() is record.snapshot
        diff = {i: "added" for i in record.added}
        diff.update({i: "modified" for i in record.modified})
        diff.update({i: "removed" for i in record.removed})
        assert view.canvas.diff_state() == diff
        assert view.canvas.zoom_level() >= MIN_ROOM_ZOOM  # type for a room

    qtbot.keyClick(view, Qt.Key.Key_Right)
    shows(order[1])
    qtbot.keyClick(view, Qt.Key.Key_Right)
    shows(order[2])
    qtbot.keyClick(view, Qt.Key.Key_Left)
    shows(order[1])
    qtbot.keyClick(view, Qt.Key.Key_Escape)
    assert not view.isVisible() and window.isVisible()
    assert window.geometry() == geometry and window.windowState() == state
    assert stepping.index == order[1]  # the panel stays on the stage presented last


def test_presentation_stops_at_both_ends(qtbot, tmp_path):
    window = _window(qtbot, copy_sample(tmp_path))
    lessons, stepping = window.lessons, window.stepping
    order = lessons.sequence()
    assert lessons.present()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is lessons.view)
    qtbot.keyClick(lessons.view, Qt.Key.Key_Left)
    assert stepping.index == 0
    for _ in order:
        qtbot.keyClick(lessons.view, Qt.Key.Key_PageDown)  # a presenter's clicker
    assert stepping.index == order[-1]
    qtbot.keyClick(lessons.view, Qt.Key.Key_Escape)
    assert not lessons.is_presenting()
