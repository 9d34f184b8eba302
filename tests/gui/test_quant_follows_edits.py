"""Quantization follows the graph: edits, undo, Save and a crash keep the calibration honest.

The calibrated sample CNN is edited with the mouse and keyboard; the Quantization table, the
Producer column, the overlay, the evaluation, the profile written by Ctrl+S and the session a
killed Kiln leaves behind must all describe the edited graph, keeping the ranges (measured and
hand-tuned) of the tensors that remain.
"""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.document import recovery
from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from app.quant.session import profile_path
from app.window.mainwindow import MainWindow
from compiler.frontends.load import load_model
from compiler.quant.calibration_data import Normalization
from compiler.quant.profile import graph_hash, load_profile
from compiler.quant.profiler import calibration_graph
from tests.gui.helpers import (
    CHILD_OPENS_MODEL,
    click_box,
    click_row,
    copy_sample,
    make_window,
    node_id,
    run_and_kill,
)
from views.quant_panel import NOT_PROFILED, STALE

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60000
DIGITS = CalibrationRequest("digits:train", "digits:test", Normalization())


def _calibrated(qtbot, model=None):
    window = make_window(qtbot, model) if model is not None else make_window(qtbot)
    calibrate_now(window.quant, DIGITS)
    return window, window.quant


def _settle(qtbot, quant):
    """Wait until the quantization worker has delivered all it was given (an evaluation)."""
    qtbot.waitUntil(lambda: not quant.is_busy(), timeout=TIMEOUT)


def _delete_relu3(qtbot, window):
    """Click relu3 on the canvas and press Delete; returns once the worker is idle again."""
    click_box(qtbot, window, node_id(window, "relu3"))
    qtbot.keyClick(window.canvas.viewport(), Qt.Key.Key_Delete)
    assert not any(n.name == "relu3" for n in window.document.graph.nodes)
    _settle(qtbot, window.quant)


def _type_range(qtbot, window, tensor, high):
    """Select `tensor` in the table and type its maximum in the Max box (Enter commits)."""
    panel = window.quant.panel
    click_row(qtbot, panel, tensor)
    panel.high.setFocus()
    panel.high.selectAll()
    with qtbot.waitSignal(window.quant.evaluated, timeout=TIMEOUT):
        qtbot.keyClicks(panel.high, str(high))
        qtbot.keyClick(panel.high, Qt.Key.Key_Return)


def _rows(panel):
    return {row.tensor: row for row in panel.model.rows}


def test_deleting_relu3_removes_its_row_and_shows_the_stale_banner(qtbot):
    window, quant = _calibrated(qtbot)
    panel = quant.panel
    measured = quant.session.profile.tensors["relu1_out"]
    assert "relu3_out" in _rows(panel)
    _delete_relu3(qtbot, window)
    rows = _rows(panel)
    assert "relu3_out" not in rows
    assert rows["flatten_out"].state == STALE and rows["logits"].state == STALE
    assert rows["relu1_out"].state == "" and quant.session.profile.tensors["relu1_out"] == measured
    assert panel.stale_banner.isVisible() and panel.reprofile_button.isVisible()
    assert "flatten_out" in panel.stale_text.text()
    # The evaluation runs on the edited graph: its QDQ model has no relu3, conv3_out is
    # quantized now that no Relu takes its range.
    session = quant.session
    assert session.graph is window.document.graph and session.evaluator.graph is session.graph
    evaluated = session.evaluation.tensors
    assert "relu3_out" not in evaluated and "conv3_out" in evaluated
    assert not any(n.name == "relu3" for n in session.evaluator.qdq.nodes)


def test_reprofile_measures_the_edited_graph_and_keeps_the_hand_tuned_range(qtbot):
    window, quant = _calibrated(qtbot)
    panel = quant.panel
    _type_range(qtbot, window, "relu1_out", 2.5)
    _delete_relu3(qtbot, window)
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        qtbot.mouseClick(panel.reprofile_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.stale_banner.isVisible()
                    and quant.session.profile.overrides.get("relu1_out", {}).get("max") == 2.5,
                    timeout=TIMEOUT)
    profile = quant.session.profile
    assert profile.stale == [] and quant.session.unprofiled == []
    assert profile.graph_hash == graph_hash(calibration_graph(window.document.graph))
    assert all(row.state == "" for row in panel.model.rows)
    # Undo the delete: relu3_out comes back with the range it had, measured before the delete.
    window.actions_.undo.trigger()
    _settle(qtbot, quant)
    assert "relu3_out" in _rows(panel) and "relu3_out" in quant.session.profile.tensors


def test_undo_and_redo_of_a_delete_restore_the_ranges_exactly(qtbot):
    window, quant = _calibrated(qtbot)
    before = quant.session.profile.to_json()
    _delete_relu3(qtbot, window)
    qtbot.keyClick(window.canvas.viewport(), Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    _settle(qtbot, quant)
    assert quant.session.profile.to_json() == before  # relu3_out's range back, nothing stale
    assert not quant.panel.stale_banner.isVisible()
    window.actions_.redo.trigger()
    _settle(qtbot, quant)
    assert "relu3_out" not in _rows(quant.panel) and quant.panel.stale_banner.isVisible()


def test_renaming_fc_updates_the_producer_and_keeps_the_overlay_and_range(qtbot):
    window, quant = _calibrated(qtbot)
    panel = quant.panel
    _type_range(qtbot, window, "logits", 9.5)
    qtbot.mouseClick(panel.overlay, Qt.MouseButton.LeftButton)
    fc = node_id(window, "fc")
    assert fc in window.canvas.overlay()
    assert _rows(panel)["logits"].producer == "Gemm fc"
    tuned = _rows(panel)["logits"]
    click_box(qtbot, window, node_id(window, "fc"))
    name = window.properties.name_edit
    name.setFocus()
    qtbot.keyClick(name, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(name, "classifier")
    qtbot.keyClick(name, Qt.Key.Key_Return)  # the panel asks for the rename once idle
    qtbot.waitUntil(lambda: window.document.graph.node(fc).name == "classifier")
    _settle(qtbot, quant)
    assert _rows(panel)["logits"].producer == "Gemm classifier"
    assert panel.overlay.isChecked() and fc in window.canvas.overlay()  # still coloured
    assert quant.session.profile.overrides["logits"]["max"] == 9.5
    assert (_rows(panel)["logits"].low, _rows(panel)["logits"].high) == (tuned.low, tuned.high)
    assert not panel.stale_banner.isVisible()  # the same computation: nothing to measure


def test_ctrl_s_writes_the_profile_of_the_edited_graph(qtbot, tmp_path):
    model = copy_sample(tmp_path)
    window, quant = _calibrated(qtbot, model)
    _type_range(qtbot, window, "relu1_out", 2.25)
    _delete_relu3(qtbot, window)
    qtbot.keyClick(window.canvas.viewport(), Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert not window.document.is_dirty()
    saved = load_profile(profile_path(model))
    reopened = load_model(model)
    saved.check_graph(calibration_graph(reopened))  # the edited model's hash: accepted
    assert "relu3_out" not in saved.tensors and saved.stale == ["flatten_out", "logits"]
    assert saved.overrides["relu1_out"] == {"min": 0.0, "max": 2.25}
    assert saved.tensors["relu1_out"] == quant.session.profile.tensors["relu1_out"]


def test_an_inserted_node_is_listed_as_not_profiled(qtbot):
    window, quant = _calibrated(qtbot)
    window.canvas.select_edge("pool1_out")
    assert window.editing.insert_on_edge("Relu")
    _settle(qtbot, quant)
    new = window.document.graph.node(window.canvas.selected_key()).output.name
    rows = _rows(quant.panel)
    assert rows[new].state == NOT_PROFILED and rows["relu2_out"].state == ""
    assert rows["relu3_out"].state == STALE  # conv3 reads the new Relu now
    assert "1 tensor is not profiled" in quant.panel.stale_text.text()
    click_row(qtbot, quant.panel, new)
    assert "Re-profile" in quant.panel.histogram.message
    qtbot.mouseClick(quant.panel.keep_float, Qt.MouseButton.LeftButton)
    assert quant.session.profile.keep_float == []  # not profiled: float already, no command


# A Kiln window in another process: calibrate, tune a range, then edit the graph, let the
# autosave write, say so, then wait to be killed.
CHILD = CHILD_OPENS_MODEL + """
calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test", Normalization()))
window.quant.set_range(0.0, 2.25, "relu1_out")
doc = window.document
ids = {n.name: n.id for n in doc.graph.nodes}
doc.apply(edit.delete_node, "Delete relu3", ids["relu3"])
doc.apply(edit.rename_node, "Rename fc", ids["fc"], "classifier")
window.recovery.autosave()
print("saved", flush=True)
while True:
    app.processEvents(); time.sleep(0.05)
"""


def test_after_a_kill_the_edits_come_back_with_the_calibration_and_hand_tuned_range(
        qtbot, tmp_path, message_boxes):
    pid = run_and_kill(CHILD, copy_sample(tmp_path))
    left = recovery.orphans()
    assert [p.name for p in left] == [f"{pid}.kiln"]
    kept = json.loads(left[0].read_text())["quantization"]["recipe"]["profile"]

    window = MainWindow(remember=False)
    qtbot.addWidget(window, before_close_func=lambda w: w.document.undo_stack.setClean())
    window.show()
    message_boxes.answer = QMessageBox.StandardButton.Open
    restored = []
    window.sessions.restored.connect(lambda: restored.append(True))
    assert window.recovery.offer() == recovery.RESTORE
    qtbot.waitUntil(lambda: bool(restored) or len(message_boxes.shown) > 1, timeout=TIMEOUT)
    assert message_boxes.shown[1:] == []  # no "measured on another graph" refusal
    assert restored
    doc, quant = window.document, window.quant
    names = {n.name for n in doc.graph.nodes}
    assert "classifier" in names and "relu3" not in names  # the edits
    session = quant.session
    assert session is not None and session.graph is doc.graph  # the calibration
    assert session.profile.overrides["relu1_out"] == {"min": 0.0, "max": 2.25}  # by hand
    assert session.profile.tensors["relu1_out"].max == kept["tensors"]["relu1_out"]["max"]
    assert abs(_rows(quant.panel)["relu1_out"].high - 2.25) < 1e-6  # as evaluated
    assert _rows(quant.panel)["logits"].producer == "Gemm classifier"
    assert quant.panel.stale_banner.isVisible()  # flatten_out, logits: measured before
