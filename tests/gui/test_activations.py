"""The Activations dock: run a digit through the sample model, click an edge, read its values."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QFileDialog

from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.screens import calibrate_now
from compiler import edit
from compiler.driver import compilation
from compiler.interpreter import run
from compiler.quant.calibration_data import Normalization, load_calibration
from compiler.quant.metrics import sqnr_db
from tests.conftest import SAMPLE_MODEL
from tests.gui.helpers import make_window, node_id, open_and_wait
from views.graph_items import EdgeItem
from views.heat_maps import _lut

TIMEOUT = 60000


def _run_sample(qtbot, window, source: str, index: int):
    """Choose `source` #`index` in the dock and press Run sample with the mouse."""
    controller = window.activations
    controller.dock.show()
    panel = controller.panel
    panel.source.setCurrentIndex(panel.source.findData(source))
    panel.index.setValue(index)
    with qtbot.waitSignal(controller.ran, timeout=TIMEOUT):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert controller.result is not None, panel.status.text()
    return controller


def _click_edge(qtbot, window, value: str) -> None:
    """Click the middle of the canvas edge carrying `value`, as a user does."""
    canvas = window.canvas
    item = next(i for i in canvas.scene().items() if isinstance(i, EdgeItem) and i.value == value)
    middle = item.path().pointAtPercent(0.5)
    canvas.centerOn(middle)
    with qtbot.waitSignal(window.activations.shown, timeout=TIMEOUT,
                          check_params_cb=lambda name: name == value):
        qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                         pos=canvas.mapFromScene(middle))
    assert canvas.selected_edge() == value


def _reference(window, index: int) -> dict[str, np.ndarray]:
    graph = window.document.graph
    feeds = {"image": load_calibration("digits:test", graph).samples[index:index + 1]}
    return run(graph, feeds, keep_all=True)


def _pixel_of(grid, channel: int, row: int, column: int) -> QColor:
    """The colour drawn for one element of one channel's map."""
    rect = grid.channel_rect(channel)
    rows, columns = grid.maps.shape[1:]
    x = rect.left() + (column + 0.5) * rect.width() / columns
    y = rect.top() + (row + 0.5) * rect.height() / rows
    return grid.grab().toImage().pixelColor(int(x), int(y))


def test_a_clicked_edge_shows_the_interpreters_tensor(qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot)
    controller = _run_sample(qtbot, window, "digits:test", 5)
    _click_edge(qtbot, window, "relu2_out")
    want = _reference(window, 5)["relu2_out"]
    panel = controller.panel
    # The heat maps: channel c is want[0, c] (NCHW), element for element.
    assert panel.grid.maps.shape == (16, 8, 8) and panel.grid.count == 16
    for c in range(16):
        assert panel.grid.maps[c].tobytes() == want[0, c].tobytes()
    # And each element is drawn in its colour on the tensor's scale.
    low, high = float(want.min()), float(want.max())
    for c, r, k in ((0, 0, 0), (7, 3, 5), (15, 7, 7), (9, 4, 2)):
        index = int(round((want[0, c, r, k] - low) / (high - low) * 255))
        drawn = _pixel_of(panel.grid, c, r, k)
        assert max(abs(a - b) for a, b in zip(drawn.getRgb()[:3], _lut("viridis")[index])) <= 2
    rows = dict(panel.rows())
    assert rows["min"] == [f"{want.min():.5g}"] and rows["max"] == [f"{want.max():.5g}"]
    assert rows["mean"] == [f"{want.astype(np.float64).mean():.5g}"]
    assert rows["std"] == [f"{want.astype(np.float64).std():.5g}"]
    assert rows["zeros"] == [f"{100 * np.count_nonzero(want == 0) / want.size:.1f} %"]
    counts = panel.histogram.axes.patches[0]  # the float histogram, all elements
    assert counts is not None and panel.activation.stats.counts.sum() == want.size
    # Export .npy…: the file dialog answers with a path; the file holds the exact tensor.
    target = tmp_path / "relu2_out.npy"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    qtbot.mouseClick(panel.export_button, Qt.MouseButton.LeftButton)
    back = np.load(target)
    assert back.dtype == want.dtype and back.shape == want.shape
    assert back.tobytes() == want.tobytes()
    # A click on a channel's map selects it.
    qtbot.mouseClick(panel.grid, Qt.MouseButton.LeftButton,
                     pos=panel.grid.channel_rect(6).center())
    assert panel.channel.value() == 6 and panel.grid.selected == 6


def test_an_edit_drops_the_values_and_runs_the_sample_again(qtbot):
    window = make_window(qtbot)
    controller = _run_sample(qtbot, window, "digits:test", 2)
    _click_edge(qtbot, window, "relu3_out")
    before = controller.panel.grid.maps.copy()
    doc = window.document
    with qtbot.waitSignal(controller.ran, timeout=TIMEOUT):
        doc.apply(edit.delete_node, "Delete relu2", node_id(window, "relu2"))
        assert controller.result is None and controller.panel.activation is None  # dropped now
    assert controller.result.graph is doc.graph
    # The edge stays selected on the edited graph, and the panel shows its new values.
    assert window.canvas.selected_edge() == "relu3_out"
    assert controller.panel.activation.name == "relu3_out"
    want = _reference(window, 2)["relu3_out"]
    assert controller.panel.activation.array.tobytes() == want.tobytes()
    assert not np.array_equal(controller.panel.grid.maps, before)  # without relu2: other values
    with qtbot.waitSignal(controller.ran, timeout=TIMEOUT):
        window.actions_.undo.trigger()
    assert controller.result.graph is doc.graph and controller.panel.activation is not None
    np.testing.assert_array_equal(controller.panel.grid.maps, before)
    open_and_wait(qtbot, window, SAMPLE_MODEL)  # another model: nothing of this one stays
    assert controller.result is None and controller.panel.activation is None
    assert not controller.is_busy()


def test_float_and_int8_side_by_side_once_calibrated(qtbot):
    window = make_window(qtbot)
    controller = _run_sample(qtbot, window, "digits:test", 9)
    with qtbot.waitSignal(controller.ran, timeout=TIMEOUT):  # the sample runs again with int8
        calibrate_now(window.quant, CalibrationRequest("digits:train", "digits:test",
                                                       Normalization()))
    assert controller.result.int8
    _click_edge(qtbot, window, "relu1_out")
    panel = controller.panel
    assert panel.compare.isVisible() and panel.activation.int8 is not None
    # The oracle: the calibrated model's integer graph, run here, its NHWC int8 tensor.
    qdq = window.document.quant.quantized()
    integer = compilation(qdq).final
    feeds = {"image": load_calibration("digits:test", window.document.graph).samples[9:10]}
    ints = run(integer, feeds, keep_all=True)
    conv = next(n for n in integer.nodes if n.op == "QLinearConv")
    codes = ints[conv.output.name].transpose(0, 3, 1, 2)  # NHWC -> the float graph's NCHW
    quant = conv.output.type.quant
    real = (codes.astype(np.float64) - quant.zero_point[0]) * quant.scale[0]
    floats = _reference(window, 9)["relu1_out"]
    panel.channel.setValue(3)
    assert panel.int8_map.first == 3 and panel.float_map.first == 3
    np.testing.assert_array_equal(panel.int8_map.maps[3], real[0, 3])
    np.testing.assert_array_equal(panel.float_map.maps[3], floats[0, 3])
    np.testing.assert_allclose(panel.diff_map.maps[3], real[0, 3] - floats[0, 3], atol=1e-12)
    rows = dict(panel.rows())
    assert rows["SQNR"] == [f"{sqnr_db(floats, real):.1f} dB"]
    assert float(rows["SQNR"][0].split()[0]) > 30  # a calibrated digit quantizes well
    assert rows["max"] == [f"{floats.max():.5g}", f"{real.max():.5g}"]


def test_a_bad_sample_file_is_one_line_in_the_panel(qtbot, tmp_path):
    bad = "nothing.npy"
    window = make_window(qtbot)
    controller = window.activations
    controller.dock.show()
    controller.panel.add_source(bad, str(tmp_path / bad))
    with qtbot.waitSignal(controller.ran, timeout=TIMEOUT):
        qtbot.mouseClick(controller.panel.run_button, Qt.MouseButton.LeftButton)
    text = controller.panel.status.text()
    assert controller.result is None and bad in text and "no such file" in text
    assert "\n" not in text and "Traceback" not in text


def test_cancel_stops_the_run_and_keeps_nothing(qtbot):
    window = make_window(qtbot)
    controller = window.activations
    controller.dock.show()
    panel = controller.panel
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert controller.is_busy() and panel.cancel_button.isVisible()
    assert not panel.run_button.isEnabled()
    with qtbot.waitSignal(controller.ran, timeout=TIMEOUT):
        qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    assert panel.status.text() == "Cancelled." and controller.result is None
    assert panel.run_button.isEnabled() and not panel.cancel_button.isVisible()
    qtbot.wait(200)  # the worker's late result, if any, is not taken
    assert controller.result is None


def test_a_clicked_node_shows_its_output(qtbot):
    """A click on a box shows the value leaving it, as a click on its outgoing edge does."""
    from tests.gui.helpers import click_box

    window = make_window(qtbot)
    controller = _run_sample(qtbot, window, "digits:test", 2)
    node = next(n for n in window.document.graph.nodes if n.name == "relu1")
    with qtbot.waitSignal(controller.shown, timeout=TIMEOUT,
                          check_params_cb=lambda name: name == node.output.name):
        click_box(qtbot, window, node.id)
    want = _reference(window, 2)[node.output.name]
    maps = controller.panel.grid.maps
    assert maps.shape[0] == want.shape[1]
    assert all(maps[c].tobytes() == want[0, c].tobytes() for c in range(maps.shape[0]))


def test_view_activations_brings_its_tab_to_the_front(qtbot):
    window = make_window(qtbot)
    dock = window.activations.dock
    dock.hide()
    window.docks["properties"].raise_()
    action = dock.toggleViewAction()
    view = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert action in view.actions()
    action.trigger()  # View > Activations
    qtbot.waitUntil(lambda: not dock.visibleRegion().isEmpty())
    tabbed = [d for d in window.tabifiedDockWidgets(dock) if d.isVisible()]
    assert tabbed and all(d.visibleRegion().isEmpty() for d in tabbed)
