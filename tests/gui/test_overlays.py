"""The Overlay menu and Layer Metrics dock: chosen, computed, painted and navigated by mouse."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from compiler.layer_metrics import macs
from tests.codegen import firmware as test_firmware
from tests.codegen.test_int8_kernels import _conv_tflite
from tests.gui.helpers import make_window
from views.metric_table import VALUE


def _choose_with_mouse(qtbot, combo, text: str) -> None:
    """Open the combo box's list with a click and click the entry `text`."""
    qtbot.mouseClick(combo, Qt.MouseButton.LeftButton)
    view = combo.view()
    qtbot.waitUntil(view.isVisible)
    # The list ignores a release for a double-click interval after it opens (a press-drag-
    # release on the box would otherwise choose whatever lies under the pointer).
    qtbot.wait(QApplication.doubleClickInterval() + 50)
    index = view.model().index(combo.findText(text), 0)
    view.scrollTo(index)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.visualRect(index).center())
    qtbot.waitUntil(lambda: combo.currentText() == text)


def _wait_shown(qtbot, overlays) -> None:
    qtbot.waitUntil(lambda: not overlays.is_busy() and overlays.current is not None,
                    timeout=120000)


def test_choosing_instructions_paints_counts_and_a_row_click_selects_its_node(qtbot, tmp_path):
    test_firmware.require_tools()
    model = tmp_path / "conv.tflite"
    model.write_bytes(_conv_tflite(False, 2, 1, 3))
    window = make_window(qtbot, model)
    overlays = window.overlays
    _choose_with_mouse(qtbot, overlays.panel.metric_box, "Instructions on cortex-m7")
    _wait_shown(qtbot, overlays)
    metric = overlays.current
    assert metric.name == "instructions" and overlays.dock.isVisible()
    assert sum(r.value for r in metric.rows) == metric.total
    painted = window.canvas.overlay()
    assert set(painted) == set(metric.values()) and painted
    assert overlays.actions["instructions:cortex-m7"].isChecked()
    # A layer's row: a click selects its node and brings it to the middle of the canvas.
    table = overlays.table
    row = next(i for i, r in enumerate(table.rows_shown()) if r.nodes)
    index = table.proxy.index(row, 0)
    window.canvas.select(None)
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.visualRect(index).center())
    key = table.rows_shown()[row].nodes[0]
    assert window.canvas.selected_key() == key
    center = window.canvas.visible_scene_rect().center()
    assert window.canvas.box_rect(key).contains(center)


def test_the_macs_table_sorts_by_a_header_click_and_threshold_mode_paints_two_fills(qtbot):
    window = make_window(qtbot)
    overlays = window.overlays
    overlays.choose("macs")
    _wait_shown(qtbot, overlays)
    graph = window.document.graph
    assert overlays.current.rows == macs(window.document.compilation(), graph).rows
    table = overlays.table
    values = [r.value for r in table.rows_shown()]
    assert values == sorted(values, reverse=True)  # the most MACs first
    header = table.horizontalHeader()
    qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton,
                     pos=header.rect().topLeft() + _section_center(header, VALUE))
    values = [r.value for r in table.rows_shown()]
    assert values == sorted(values)
    gradient = set(window.canvas.overlay().values())
    assert len(gradient) >= 3
    _choose_with_mouse(qtbot, overlays.panel.mode, "Threshold")
    fills = {fill for fill, _ in window.canvas.overlay().values()}
    assert len(fills) == 2
    overlays.choose("")
    assert window.canvas.overlay() == {}


def _section_center(header, section):
    from PySide6.QtCore import QPoint

    x = header.sectionViewportPosition(section) + header.sectionSize(section) // 2
    return QPoint(x, header.height() // 2)


def test_host_time_per_layer_paints_every_kernel(qtbot):
    """Overlay > Host time: the timed build's milliseconds, each layer on its node."""
    import pytest

    from compiler.driver import Options

    if not Options("host").resolved_target().triple.startswith("x86_64"):
        pytest.skip("host time per layer reads the x86 time-stamp counter")
    window = make_window(qtbot)
    overlays = window.overlays
    _choose_with_mouse(qtbot, overlays.panel.metric_box, "Host time")
    _wait_shown(qtbot, overlays)
    metric = overlays.current
    assert metric.name == "host_time" and metric.unit == "ms"
    assert sum(r.value for r in metric.rows) == pytest.approx(metric.total)
    convs = [n.id for n in window.document.graph.nodes if n.op == "Conv"]
    painted = window.canvas.overlay()
    assert convs and all(c in painted and metric.values()[c] > 0 for c in convs)


def test_a_calibrated_documents_instructions_are_the_int8_models(qtbot):
    """Calibrated, the overlay counts the int8 model the export builds, on the float nodes."""
    from app.quant.calibrate_dialog import CalibrationRequest
    from compiler.driver import compilation
    from compiler.harness.cortex_m_bench import bench_compilation
    from compiler.layer_instructions import INLINED
    from compiler.quant.calibration_data import Normalization
    from compiler.quant.recipe import quantize_with

    test_firmware.require_tools()
    window = make_window(qtbot)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=120000):
        quant.calibrate(CalibrationRequest("digits:train", "", Normalization(), samples=20))
    overlays = window.overlays
    _choose_with_mouse(qtbot, overlays.panel.metric_box, "Instructions on cortex-m7")
    _wait_shown(qtbot, overlays)
    metric = overlays.current
    assert metric.title.endswith("(int8 model)") and "int8 model" in overlays.panel.status.text()
    graph = window.document.graph
    integer = compilation(quantize_with(graph, window.document.quant.recipe()))
    floating = compilation(graph)
    counted = bench_compilation(integer, "cortex-m7", peer=False).kiln.total
    assert metric.total == counted == sum(r.value for r in metric.rows)
    assert counted != bench_compilation(floating, "cortex-m7", peer=False).kiln.total
    ids = {n.id for n in graph.nodes}
    layers = [r for r in metric.rows if r.label != INLINED and r.nodes]
    assert layers and all(set(r.nodes) <= ids for r in layers)  # on the float graph's nodes
    weighted = [n.id for n in graph.nodes if n.op in ("Conv", "Gemm")]
    assert set(weighted) <= {i for r in layers for i in r.nodes}
