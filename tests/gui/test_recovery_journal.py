"""The recovery journal: every change is on disk within a second, and a restore leaks nowhere.

A Kiln in a child process drags a range on the histogram with real mouse events and is killed
two seconds later; the next start finds that range. A restored session is unsaved work on its
own model only: the models opened after it are not marked modified.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox

from app.document import recovery
from app.document.sessions import save_session
from app.inspect.lessons import NoteCommand
from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from app.window.mainwindow import MainWindow
from compiler import edit
from compiler.quant.calibration_data import Normalization
from tests.gui.helpers import (
    CHILD_OPENS_MODEL,
    copy_sample,
    make_window,
    node_id,
    open_and_wait,
    refuse_file_dialogs,
)

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120000
KILL_AFTER_S = 2.0


@pytest.fixture(autouse=True)
def no_file_dialog(monkeypatch):
    """A file dialog no test answers would wait forever: it fails the test instead."""
    refuse_file_dialogs(monkeypatch)

# A Kiln window in another process: calibrate, tune relu1_out (journaled at once, so the drag
# is not the first unsaved change), then click relu2_out's row and drag its top handle to
# half its height with the mouse; print the range the document took, and wait to be killed.
CHILD_DRAGS = CHILD_OPENS_MODEL + """
import numpy
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
NONE = Qt.KeyboardModifier.NoModifier
LEFT = Qt.MouseButton.LeftButton
calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test", Normalization()))
panel = window.quant.panel
window.quant.set_range(0.0, 2.25, "relu1_out")
window.recovery.autosave()
row = panel.proxy.mapFromSource(panel.model.index(panel.model.row_of("relu2_out"), 0))
panel.table.scrollTo(row)
QTest.mouseClick(panel.table.viewport(), LEFT, NONE, panel.table.visualRect(row).center())
assert panel.selected_tensor() == "relu2_out", panel.selected_tensor()
view = panel.histogram
y = int(view.plot_rect().center().y())
start, end = view.x_of(view.high), view.x_of(view.high * 0.5)
QTest.mousePress(view, LEFT, NONE, QPoint(round(start), y))
for x in numpy.linspace(start, end, 8)[1:]:
    QTest.mouseMove(view, QPoint(round(x), y))
QTest.mouseRelease(view, LEFT, NONE, QPoint(round(end), y))
dragged = window.document.quant.session.profile.overrides["relu2_out"]
print("dragged", json.dumps(dragged), flush=True)
while True:
    app.processEvents(); time.sleep(0.01)
""".replace("import numpy", "import json, numpy")


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _drag_then_kill(model: Path, home: Path) -> tuple[int, dict]:
    """Run CHILD_DRAGS on `model` and SIGKILL it KILL_AFTER_S after its drag.

    The child has a home, settings and data folder of its own (the data folder is this
    test's, where the next start looks for recovery files). Returns (PID, range dragged).
    """
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT),
           "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
           "XDG_DATA_HOME": str(recovery.recovery_dir().parents[1])}
    child = subprocess.Popen([sys.executable, "-c", CHILD_DRAGS, str(model)], cwd=home,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, deadline = "", time.monotonic() + 120
        while not line.startswith("dragged") and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line and child.poll() is not None:
                raise AssertionError(child.stderr.read())
        assert line.startswith("dragged"), "the child never dragged"
        time.sleep(KILL_AFTER_S)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    return child.pid, json.loads(line.split(" ", 1)[1])


def _restarted(qtbot, message_boxes) -> MainWindow:
    """The next start: a new window whose recovery offer is answered Open, fully restored."""
    window = MainWindow(remember=False)
    qtbot.addWidget(window, before_close_func=lambda w: w.document.undo_stack.setClean())
    window.show()
    message_boxes.answer = QMessageBox.StandardButton.Open
    with qtbot.waitSignal(window.sessions.restored, timeout=TIMEOUT):
        assert window.recovery.offer() == recovery.RESTORE
    return window


def test_a_range_dragged_two_seconds_before_a_kill_comes_back(qtbot, tmp_path, message_boxes):
    model = copy_sample(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    pid, dragged = _drag_then_kill(model, home)
    # The drag moved the top handle to about half the measured top: a real range of its own.
    window = _restarted(qtbot, message_boxes)
    profile = window.quant.session.profile
    measured = profile.tensors["relu2_out"].max
    assert dragged["min"] == 0.0 and dragged["max"] == pytest.approx(measured * 0.5, rel=0.05)
    assert profile.overrides["relu2_out"] == dragged  # the very range, to the last bit
    assert profile.overrides["relu1_out"] == {"min": 0.0, "max": 2.25}  # and what came before
    assert message_boxes.kinds() == ["question"] and f"{pid}.kiln" not in str(message_boxes.shown)
    assert window.document.is_dirty() and not window.document.graph_edited()


def _journaled(window) -> dict | None:
    """The window's recovery file as it is on disk now (None while there is none)."""
    try:
        return json.loads(window.recovery.path.read_text())
    except (OSError, ValueError):
        return None


def _seconds_until(qtbot, window, check) -> float:
    """How long until the recovery file on disk satisfies `check` (fails after 5 s)."""
    start = time.monotonic()
    qtbot.waitUntil(lambda: (doc := _journaled(window)) is not None and check(doc),
                    timeout=5000)
    return time.monotonic() - start


def _profile(doc: dict) -> dict:
    return doc["quantization"]["recipe"]["profile"]


def test_each_kind_of_change_is_on_disk_within_a_second(qtbot, tmp_path):
    window = make_window(qtbot, copy_sample(tmp_path))
    doc, quant = window.document, window.quant
    calibrate_now(quant, CalibrationRequest("digits:train", "digits:test", Normalization()))
    waits = {}
    quant.set_range(0.0, 2.25, "relu1_out")  # the first unsaved change
    waits["range"] = _seconds_until(
        qtbot, window, lambda d: _profile(d)["overrides"].get("relu1_out", {}).get("max") == 2.25)
    quant.set_range(0.0, 3.5, "relu2_out")  # a later one: not left to a 30 s timer
    waits["second range"] = _seconds_until(
        qtbot, window, lambda d: _profile(d)["overrides"].get("relu2_out", {}).get("max") == 3.5)
    quant.set_keep_float("pool1_out", True)
    waits["keep float"] = _seconds_until(
        qtbot, window, lambda d: "pool1_out" in _profile(d)["keep_float"])
    doc.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    waits["edit"] = _seconds_until(qtbot, window, lambda d: d["edited"] is not None)
    # A note typed on merges into one undo step: the step's index stays, its text changes.
    stack = doc.undo_stack
    stack.push(NoteCommand(doc, "fuse_activations", "", "w"))
    index = stack.index()
    waits["note"] = _seconds_until(qtbot, window, lambda d: d["notes"] == {"fuse_activations": "w"})
    stack.push(NoteCommand(doc, "fuse_activations", "w", "why"))
    assert stack.index() == index  # merged
    waits["note typed on"] = _seconds_until(
        qtbot, window, lambda d: d["notes"] == {"fuse_activations": "why"})
    # Ctrl+Z and at once another range: the undo index is the one written last, the
    # content is not.
    window.actions_.undo.trigger()
    quant.set_range(0.0, 1.5, "relu1_out")
    assert stack.index() == index
    waits["undo then range"] = _seconds_until(
        qtbot, window, lambda d: d["notes"] == {} and
        _profile(d)["overrides"]["relu1_out"]["max"] == 1.5)
    slow = {what: round(s, 2) for what, s in waits.items() if s >= 1.0}
    assert not slow, f"journaled a second or more after the change: {slow}"


def test_a_restored_session_leaves_the_next_two_models_unmodified(qtbot, tmp_path,
                                                                 message_boxes):
    crash = recovery.recovery_dir() / f"{_dead_pid()}.kiln"
    crash.parent.mkdir(parents=True, exist_ok=True)
    window = make_window(qtbot, copy_sample(tmp_path))
    window.document.apply(edit.rename_node, "Rename", node_id(window, "conv2"), "conv_two")
    save_session(window, crash)  # what a crashed Kiln's journal left
    window.document.undo_stack.setClean()
    window.close()

    again = _restarted(qtbot, message_boxes)
    doc = again.document
    assert doc.is_dirty() and again.windowTitle().startswith("digits_cnn.onnx*")
    models = []
    for name in ("second", "third"):
        folder = tmp_path / name
        folder.mkdir()
        models.append(Path(shutil.copy(copy_sample(tmp_path), folder / "str_ww.onnx")))
    message_boxes.answer = QMessageBox.StandardButton.Discard  # the restored work: dropped
    asked = len(message_boxes.shown)
    for model in models:
        open_and_wait(qtbot, again, model)
        assert doc.path == model
        assert not doc.is_dirty() and not doc.graph_edited()
        assert again.windowTitle() == "str_ww.onnx — Kiln"
        assert not again.actions_.undo.isEnabled()
    # Only leaving the restored work asked; the second model was dropped without a word.
    assert len(message_boxes.shown) == asked + 1
    # The third model's history works as any model's: an edit is undone back to clean.
    doc.apply(edit.rename_node, "Rename", node_id(again, "conv1"), "first")
    assert doc.is_dirty() and again.actions_.undo.isEnabled()
    again.actions_.undo.trigger()
    assert not doc.is_dirty() and again.windowTitle() == "str_ww.onnx — Kiln"


def test_a_recovered_range_alone_is_unsaved_work_on_an_unedited_model(qtbot, tmp_path,
                                                                      message_boxes):
    crash = recovery.recovery_dir() / f"{_dead_pid()}.kiln"
    crash.parent.mkdir(parents=True, exist_ok=True)
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test",
                                                   Normalization()))
    window.quant.set_range(0.0, 2.25, "relu1_out")
    save_session(window, crash)
    window.document.undo_stack.setClean()
    window.close()

    again = _restarted(qtbot, message_boxes)
    doc = again.document
    assert again.quant.session.profile.overrides["relu1_out"] == {"min": 0.0, "max": 2.25}
    # Unsaved (close asks) but no graph edit: the model is the file's, named by it.
    assert doc.path == model and doc.is_dirty() and not doc.graph_edited()
    # At once (no event loop ran since): this window's journal holds it, the crash's is gone,
    # so no moment passed with neither on disk.
    assert _journaled(again) is not None and not recovery.orphans()
    assert _profile(_journaled(again))["overrides"]["relu1_out"]["max"] == 2.25
    assert _journaled(again)["edited"] is None
    assert again.windowTitle().startswith("digits_cnn.onnx*")
