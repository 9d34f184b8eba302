"""What the user did not edit is never overwritten, and what a session holds is never lost.

Enter on the unsaved-changes question rewrites a model only when its graph was edited;
ranges alone are saved as a session that names the model by path and hash instead of copying
it. A session keeps the inputs-and-outputs-in-the-arena choice both ways. The dialogs that
write start in a writable folder, and the Quantization dock starts each model afresh.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.document.sessions import file_hash, save_session
from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from app.window.mainwindow import MainWindow
from compiler import edit
from compiler.quant.calibrate import METHODS
from compiler.quant.calibration_data import Normalization
from tests.gui.helpers import (
    click_row,
    copy_sample,
    make_window,
    node_id,
    open_and_wait,
    refuse_file_dialogs,
)

TIMEOUT = 120000
DIGITS = CalibrationRequest("digits:train", "digits:test", Normalization())


@pytest.fixture(autouse=True)
def no_file_dialog(monkeypatch):
    """A file dialog no test answers would wait forever: it fails the test instead."""
    refuse_file_dialogs(monkeypatch)


def _press_enter_on_questions(monkeypatch, qtbot) -> list[str]:
    """Questions become real boxes answered by the Enter key; returns the defaults pressed."""
    pressed: list[str] = []

    def question(parent, title, text, buttons, default=QMessageBox.StandardButton.NoButton):
        box = QMessageBox(QMessageBox.Icon.Question, title, text, buttons, parent)
        box.setDefaultButton(default)

        def enter():
            pressed.append(box.standardButton(box.defaultButton()).name)
            qtbot.keyClick(box, Qt.Key.Key_Return)

        QTimer.singleShot(0, enter)
        box.exec()
        return box.standardButton(box.clickedButton())

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    return pressed


def _state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_enter_on_the_question_never_rewrites_a_model_nobody_edited(qtbot, tmp_path,
                                                                    monkeypatch):
    model = copy_sample(tmp_path)
    other = Path(shutil.copy(model, tmp_path / "other.onnx"))
    window = make_window(qtbot, model)
    doc = window.document
    calibrate_now(window.quant, DIGITS)
    window.quant.set_range(0.0, 2.25, "relu1_out")  # unsaved, but the graph is the file's
    assert doc.is_dirty() and not doc.graph_edited()
    before = _state(model)
    pressed = _press_enter_on_questions(monkeypatch, qtbot)
    asked_where = []  # a Save Session dialog, if Enter had meant Save: answered Cancel
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(
        lambda *args, **kwargs: asked_where.append(args) or ("", "")))
    assert window.open_file(other) is None  # Enter kept the model and its range
    assert pressed == ["Cancel"] and not asked_where and _state(model) == before
    assert doc.path == model and doc.quant.session.profile.overrides["relu1_out"]["max"] == 2.25

    # An edited graph is the user's own: there Enter saves it, as before.
    doc.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    assert doc.graph_edited()
    with qtbot.waitSignal(window.modelLoaded, timeout=TIMEOUT):
        assert window.open_file(other) is not None
    assert pressed == ["Cancel", "Save"] and _state(model) != before
    assert b"conv_two" in model.read_bytes() and doc.path == other


def test_save_on_ranges_alone_writes_a_session_and_leaves_the_model(qtbot, tmp_path,
                                                                    message_boxes, monkeypatch):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    calibrate_now(window.quant, DIGITS)
    window.quant.set_range(0.0, 2.25, "relu1_out")
    before = _state(model)
    chosen = tmp_path / "kept" / "tuned.kiln"
    chosen.parent.mkdir()
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *args, **kwargs: (str(chosen), "")))
    message_boxes.answer = QMessageBox.StandardButton.Save
    window.close()
    assert not window.isVisible() and _state(model) == before
    saved = json.loads(chosen.read_text())
    overrides = saved["quantization"]["recipe"]["profile"]["overrides"]
    assert overrides["relu1_out"] == {"min": 0.0, "max": 2.25} and saved["edited"] is None
    assert "unchanged" in message_boxes.shown[-1][2]  # the question said what Save does


def test_a_session_of_an_unedited_graph_names_the_model_instead_of_copying_it(qtbot, tmp_path):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    doc = window.document
    calibrate_now(window.quant, DIGITS)
    window.quant.set_range(0.0, 2.25, "relu1_out")
    session = save_session(window, tmp_path / "ranges.kiln")
    saved = json.loads(session.read_text())
    assert saved["edited"] is None and not list(tmp_path.glob("*.edited.onnx"))
    assert saved["model"] == {"path": str(model.resolve()), "sha256": file_hash(model)}
    # An edit, undone again, leaves the graph the file's: still no copy.
    doc.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    window.actions_.undo.trigger()
    assert json.loads(save_session(window, tmp_path / "undone.kiln").read_text())["edited"] \
        is None
    window.actions_.redo.trigger()  # the edit: now the graph is written beside the session
    edited = json.loads(save_session(window, tmp_path / "edited.kiln").read_text())["edited"]
    assert edited["file"] == "edited.digits_cnn.edited.onnx"
    assert b"conv_two" in (tmp_path / edited["file"]).read_bytes()

    again = MainWindow(remember=False)
    qtbot.addWidget(again, before_close_func=lambda w: w.document.undo_stack.setClean())
    again.show()
    with qtbot.waitSignal(again.sessions.restored, timeout=TIMEOUT):
        assert again.sessions.open_session(session)
    assert again.document.path == model and not again.document.is_dirty()
    assert again.quant.session.profile.overrides["relu1_out"] == {"min": 0.0, "max": 2.25}


@pytest.mark.parametrize("on", [True, False])
def test_a_session_keeps_inputs_and_outputs_in_the_arena(qtbot, tmp_path, on):
    window = make_window(qtbot, copy_sample(tmp_path))
    if on:
        window.memory.panel.io_in_arena.click()  # as the user ticks it in the Memory panel
    assert window.document.io_in_arena is on
    session = save_session(window, tmp_path / "arena.kiln")

    again = make_window(qtbot, None)
    again.document.set_io_in_arena(not on)  # the other way: the session must set it back
    with qtbot.waitSignal(again.sessions.restored, timeout=TIMEOUT):
        assert again.sessions.open_session(session)
    assert again.document.io_in_arena is on
    assert again.document.options().io_in_arena is on  # what the plan and export use


def _record_start(monkeypatch, answer: Path) -> list[Path]:
    """Save dialogs answer `answer`; returns the folders they were started in."""
    starts: list[Path] = []

    def dialog(parent, caption, start="", *args, **kwargs):
        starts.append(Path(start).parent)
        return str(answer), ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(dialog))
    return starts


@pytest.mark.parametrize("kind", ["session", "walkthrough"])
def test_writing_dialogs_start_in_a_writable_folder_then_the_last_one(qtbot, tmp_path,
                                                                      monkeypatch, kind):
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOCUMENTS_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    model = Path(shutil.copy(copy_sample(tmp_path), shipped / "digits_cnn.onnx"))
    os.chmod(shipped, 0o555)  # a model from a package: its folder cannot be written
    try:
        window = make_window(qtbot, model)
        chosen = tmp_path / "work" / ("day.kiln" if kind == "session" else "lesson")
        chosen.parent.mkdir()
        starts = _record_start(monkeypatch, chosen)

        def ask():
            if kind == "session":
                assert window.sessions.save_dialog()
            else:
                with qtbot.waitSignal(window.walkthrough.written, timeout=TIMEOUT):
                    assert window.walkthrough.export() is not None
                shutil.rmtree(chosen)  # the next export may use the same name again

        ask()
        ask()
    finally:
        os.chmod(shipped, 0o755)
    assert [p.resolve() for p in starts] == [(home / "Documents").resolve(),
                                             chosen.parent.resolve()]


def test_another_model_opens_with_the_quantization_docks_filter_and_method_reset(
        qtbot, tmp_path, message_boxes):
    window = make_window(qtbot, copy_sample(tmp_path))
    quant, panel = window.quant, window.quant.panel
    calibrate_now(quant, DIGITS)
    click_row(qtbot, panel, "relu2_out")
    qtbot.keyClicks(panel.filter, "relu2")
    assert panel.proxy.rowCount() == 1
    assert panel.method.currentText() == METHODS[0]
    panel.method.setFocus()
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):  # the range it picks is an edit
        qtbot.keyClick(panel.method, Qt.Key.Key_Down)
    assert panel.method.currentText() == METHODS[1]

    message_boxes.answer = QMessageBox.StandardButton.Discard
    other = Path(shutil.copy(copy_sample(tmp_path), tmp_path / "other.onnx"))
    open_and_wait(qtbot, window, other)
    assert panel.filter.text() == "" and panel.method.currentText() == METHODS[0]
    calibrate_now(quant, DIGITS)  # every tensor of the new model is listed, none filtered
    assert panel.proxy.rowCount() == panel.model.rowCount() > 1


def test_the_dock_says_a_sessions_calibration_is_coming_not_that_there_is_none(qtbot, tmp_path):
    window = make_window(qtbot, copy_sample(tmp_path))
    calibrate_now(window.quant, DIGITS)
    window.quant.set_range(0.0, 2.25, "relu1_out")
    session = save_session(window, tmp_path / "day.kiln")

    again = make_window(qtbot, None)
    status = again.quant.panel.status
    seen = []
    again.modelLoaded.connect(lambda _path: seen.append(status.text()))  # after the restore began
    with qtbot.waitSignal(again.sessions.restored, timeout=TIMEOUT):
        assert again.sessions.open_session(session)
    assert seen and seen[0].startswith("Restoring the session's calibration (")
    assert "Not calibrated" not in seen[0]
    assert again.document.quant.restoring == ""
    assert again.quant.session.profile.overrides["relu1_out"] == {"min": 0.0, "max": 2.25}
    assert "quantized" in status.text() and not status.text().startswith("Restoring")
