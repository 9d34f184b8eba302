"""The quantization workbench, driven with the mouse: calibrate, drag a range, undo, overlay.

The readouts must say what `kiln quantize --report` says for the same profile, the selection
must follow between the canvas and the table both ways, a cancelled calibration must change
nothing, and the overlay's colours must be the report's SQNR bins.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QDialogButtonBox

from app.cli import main
from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.session import profile_path
from compiler.quant.calibration_data import CalibrationData, Normalization, load_calibration
from compiler.quant.evaluate import evaluate
from compiler.quant.quantize import quantize
from tests.conftest import shared_models
from tests.gui.helpers import click_row, copy_sample, make_window, node_id, open_and_wait
from views.graph_items import EdgeItem
from views.quant_colors import sqnr_color

TIMEOUT = 120000


def _calibrate_with_the_dialog(qtbot, window):
    quant = window.quant
    qtbot.mouseClick(quant.panel.calibrate_button, Qt.MouseButton.LeftButton)
    dialog = quant.dialog
    assert dialog is not None and dialog.data.text() == "digits:train"
    assert dialog.evaluate.text() == "digits:test"
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        qtbot.mouseClick(ok, Qt.MouseButton.LeftButton)
    assert ended.args == [True]
    return quant


def _row(panel, tensor):
    return panel.model.rows[panel.model.row_of(tensor)]


def _drag(qtbot, view, start: float, end: float):
    y = int(view.plot_rect().center().y())
    qtbot.mousePress(view, Qt.MouseButton.LeftButton, pos=QPoint(int(round(start)), y))
    for x in np.linspace(start, end, 8)[1:]:
        qtbot.mouseMove(view, pos=QPoint(int(round(x)), y))
    qtbot.mouseRelease(view, Qt.MouseButton.LeftButton, pos=QPoint(int(round(end)), y))


def _report_accuracy(profile, tmp_path, name="p.json"):
    path = tmp_path / name
    profile.save(path)
    from tests.conftest import SAMPLE_MODEL

    assert main(["quantize", str(SAMPLE_MODEL), "--profile", str(path), "-o",
                 str(tmp_path / "q.onnx"), "--report", "digits:test", "--json"]) == 0


def test_drag_a_range_see_the_report_figures_and_undo(qtbot, tmp_path, capsys):
    window = make_window(qtbot)
    quant = _calibrate_with_the_dialog(qtbot, window)
    panel = quant.panel
    tensor = "relu3_out"
    click_row(qtbot, panel, tensor)
    before = _row(panel, tensor)
    accuracy_before = panel.accuracy.text()
    view = panel.histogram
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        _drag(qtbot, view, view.x_of(view.high), view.x_of(view.high * 0.12))
    after = _row(panel, tensor)
    assert after.high < 0.2 * before.high and after.clipped > before.clipped
    assert "clipped" in panel.live.text()
    assert quant.session.profile.overrides[tensor]["max"] == pytest.approx(after.high, rel=0.02)
    capsys.readouterr()
    _report_accuracy(quant.session.profile, tmp_path)
    report = json.loads(capsys.readouterr().out)
    expected = f"{100 * report['accuracy_quantized']:.2f} %"
    assert panel.accuracy.text().startswith(expected)
    assert panel.accuracy.text() != accuracy_before
    print(f"clipped {before.clipped:.4f} -> {after.clipped:.4f}; accuracy {accuracy_before} -> "
          f"{panel.accuracy.text()}")
    qtbot.mouseClick(panel.overlay, Qt.MouseButton.LeftButton)  # edges tell scale and zero point
    tips = [item.toolTip() for item in window.canvas.scene().items()
            if isinstance(item, EdgeItem) and item.value == tensor]
    assert tips and all(f"scale {after.scale:.6g}, zero point -128" in tip for tip in tips)
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        window.actions_.undo.trigger()
    restored = _row(panel, tensor)
    assert (restored.high, restored.clipped) == (before.high, before.clipped)
    assert panel.accuracy.text() == accuracy_before
    assert tensor not in quant.session.profile.overrides


def _box_centre(window, name: str):
    """Show node `name` and return its box's centre in viewport coordinates."""
    key, canvas = node_id(window, name), window.canvas
    canvas.center_on(key)
    return canvas.mapFromScene(canvas.box_rect(key).center())


def test_selection_follows_between_canvas_and_table(qtbot):
    window = make_window(qtbot)
    quant = _calibrate_with_the_dialog(qtbot, window)
    qtbot.mouseClick(window.canvas.viewport(), Qt.MouseButton.LeftButton,
                     pos=_box_centre(window, "conv2"))
    assert quant.panel.selected_tensor() == "relu2_out"  # conv2's range is its Relu's
    assert window.document.selection == node_id(window, "conv2")  # the canvas keeps its own
    click_row(qtbot, quant.panel, "pool1_out")
    assert window.canvas.selected_key() == node_id(window, "pool1")


def test_a_cancelled_calibration_changes_nothing(qtbot):
    window = make_window(qtbot)
    quant = _calibrate_with_the_dialog(qtbot, window)
    session, rows = quant.session, list(quant.panel.model.rows)
    job = quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    assert job is not None and job.is_active()
    button = quant.panel.calibrate_button
    assert button.text() == "Cancel"
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert button.text() == "Calibrate…"
    assert ended.args == [False]
    assert quant.session is session and quant.panel.model.rows == rows
    assert not window.document.is_dirty()


def test_keep_float_and_the_typed_range_are_undoable(qtbot):
    window = make_window(qtbot)
    quant = _calibrate_with_the_dialog(qtbot, window)
    panel = quant.panel
    click_row(qtbot, panel, "relu1_out")
    calibrated = _row(panel, "relu1_out")
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        qtbot.mouseClick(panel.keep_float, Qt.MouseButton.LeftButton)
    row = panel.model.rows[panel.model.row_of("relu1_out")]  # the row stays, marked float
    assert row.state == "float" and "relu1_out" in quant.session.profile.keep_float
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        window.actions_.undo.trigger()
    # Undone in the document: the tensor is quantized again, its row back to the calibration's
    # figures (range, scale, zero point, errors), the box unticked.
    assert window.document.quant.session.profile.keep_float == []
    assert _row(panel, "relu1_out") == calibrated and calibrated.state == ""
    assert not panel.keep_float.isChecked()
    click_row(qtbot, panel, "relu1_out")
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        panel.high.setValue(2.0)  # typed: the spin box emits on Enter
    assert _row(panel, "relu1_out").high == pytest.approx(2.0, rel=0.01)
    assert window.document.is_dirty()


def test_the_profile_is_saved_beside_the_model(qtbot, tmp_path):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    quant.set_range(0.0, 3.0, "relu1_out")
    assert window.save()
    saved = profile_path(model)
    assert json.loads(saved.read_text())["overrides"]["relu1_out"] == {"max": 3.0, "min": 0.0}
    open_and_wait(qtbot, window, model)  # opened again: the session starts empty
    assert window.document.quant.session is None and quant.panel.model.rows == []
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.load_profile(saved)
    assert quant.session.profile.overrides["relu1_out"] == {"min": 0.0, "max": 3.0}
    assert quant.session.request.data == "digits:train"  # so a saved session keeps the ranges


@pytest.mark.slow
def test_the_overlay_on_resnet8_shows_the_report_bins(qtbot, tmp_path):
    from tests.bench.bench_quantizer import _data

    path = shared_models() / "onnx" / "pretrainedResnet.onnx"
    window = make_window(qtbot, path)
    graph = window.document.graph
    calib, _ = _data("pretrainedResnet", graph)
    samples = tmp_path / "resnet_calibration.npy"
    np.save(samples, calib.samples)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest(str(samples), "", Normalization(), samples=48))
    qtbot.mouseClick(quant.panel.overlay, Qt.MouseButton.LeftButton)
    # Residual blocks open closed: each shows its worst member's bin.
    layout = window.layout_
    closed = [k for k in layout.groups if k in layout.boxes]
    assert closed
    for key in closed:
        members = [m for m in layout.grouping.hierarchy.members(key)
                   if m in quant.session.keys.values()]
        worst = min(t.sqnr for name, t in quant.session.evaluation.tensors.items()
                    if quant.session.keys.get(name) in members)
        assert window.canvas.overlay()[key] == sqnr_color(worst)
    window.grouping.expand_all()  # every node on the canvas, in its own bin
    shown = window.canvas.overlay()
    session = quant.session
    data = CalibrationData(calib.input_name, np.load(samples), "resnet")
    report = evaluate(graph, quantize(graph, session.profile, session.options), data, limit=48)
    assert len(report.tensors) == len(session.evaluation.tensors) > 10
    for t in report.tensors:
        key = session.keys[t.name]
        assert shown[key] == sqnr_color(t.sqnr), t.name
    for key, tensor in session.folds.items():
        assert shown[key] == shown[session.keys[tensor]]
    assert load_calibration(str(samples), graph).samples.shape[0] == 48


def test_opening_another_model_mid_evaluation_forgets_the_session(qtbot, message_boxes):
    from PySide6.QtWidgets import QMessageBox

    from tests.conftest import SAMPLE_MODEL

    window = make_window(qtbot)
    quant = _calibrate_with_the_dialog(qtbot, window)
    quant.set_range(0.0, 1.0, "relu2_out")  # an evaluation starts in the worker
    message_boxes.answer = QMessageBox.StandardButton.Discard  # the range edit is unsaved
    open_and_wait(qtbot, window, SAMPLE_MODEL)
    assert message_boxes.kinds() == ["question"]
    panel = quant.panel
    assert quant.session is None and panel.model.rows == []
    # No readout of the first model stays on screen.
    assert [panel.output_sqnr.text(), panel.agreement.text(), panel.accuracy.text()] == ["–"] * 3
    assert panel.worst.count() == 0 and panel.bars.rows == [] and panel.outputs.rowCount() == 0
    assert window.document.undo_stack.count() == 0
    qtbot.waitUntil(lambda: not quant.is_busy(), timeout=TIMEOUT)
    assert quant.session is None and window.canvas.overlay() == {}
    assert panel.model.rows == [] and panel.accuracy.text() == "–"  # the late result too


def test_the_layer_bars_and_one_samples_outputs(qtbot):
    window = make_window(qtbot)
    quant = _calibrate_with_the_dialog(qtbot, window)
    panel = quant.panel
    panel.tabs.setCurrentIndex(1)
    bars = panel.bars
    assert [name for name, _ in bars.rows] == list(quant.session.evaluation.tensors)
    index = [name for name, _ in bars.rows].index("pool1_out")
    centre = bars.bar_rect(index).center().toPoint()
    qtbot.mouseClick(bars, Qt.MouseButton.LeftButton, pos=centre)
    assert panel.selected_tensor() == "pool1_out" and bars.selected == "pool1_out"
    with qtbot.waitSignal(quant.outputsShown, timeout=TIMEOUT):
        panel.tabs.setCurrentIndex(2)
    with qtbot.waitSignal(quant.outputsShown, timeout=TIMEOUT):
        panel.sample.setValue(3)
    data = quant.session.live
    feeds = data.feeds(3, 4)[0]
    qdq = quant.quantized()
    from compiler.driver import compilation
    from compiler.interpreter import run

    want = run(compilation(qdq).final, feeds)["logits"].reshape(-1)
    got = [float(panel.outputs.item(r, 2).text()) for r in range(panel.outputs.rowCount())]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert "sample 3:" in panel.outputs_note.text()


def test_keep_float_from_the_canvas_context_menu(qtbot):
    window = make_window(qtbot)
    quant = _calibrate_with_the_dialog(qtbot, window)
    window.canvas.customContextMenuRequested.emit(_box_centre(window, "conv3"))  # a right click
    menu = quant.context_menu
    keep = next(a for a in menu.actions() if a.text() == "Keep Float")
    assert keep.isEnabled() and not keep.isChecked()
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        keep.trigger()
    assert "relu3_out" in quant.session.profile.keep_float
    assert window.document.undo_stack.undoText().startswith("Keep relu3_out")
    menu.close()
