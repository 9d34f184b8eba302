"""The main journey through the window, with the mouse and keyboard, on KWS and ResNet-8.

Open the float model, calibrate from the Calibrate dialog on a folder of .npy samples, drag a
range on the histogram, keep one layer float, export int8 for Cortex-M7 counting instructions
under QEMU (the object it wrote, run in firmware under QEMU, gives the interpreter's bytes),
export int8 for the host and `make run` it: the program prints the bytes of Kiln's
interpreter on the same quantized graph. Screenshots of the dialog, the export report and the
stale banner after an edit go to KILN_JOURNEY_SHOTS when it is set (to look at them).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.export.controller import driver_options
from compiler.codegen.targets import BOARDS
from compiler.driver import compilation
from compiler.interpreter import run
from tests.codegen import firmware as firmware_tests
from tests.conftest import require_tools
from tests.gui.helpers import click_box, click_row, make_window
from tests.journeys.data import data_of, model_path
from tests.journeys.window_steps import (
    TIMEOUT,
    calibrate,
    drag,
    export,
    samples_folder,
    shot,
    type_into,
)
from views.export_dialog import ExportOptions


@pytest.mark.slow
@pytest.mark.parametrize("model,tensors", [
    ("kws_ref_model_float32", 2), ("pretrainedResnet", 2)])
def test_calibrate_tune_keep_float_export_and_run(model, tensors, qtbot, tmp_path, monkeypatch):
    path = model_path(model, tmp_path)
    window = make_window(qtbot, path)
    window.resize(1400, 900)
    calibrate(qtbot, window, samples_folder(model, tmp_path / "samples"), model)
    quant, panel = window.quant, window.quant.panel
    names = [row.tensor for row in panel.model.rows]
    assert len(names) > tensors
    # Drag the high end of one tensor's range down to a third.
    tuned = names[len(names) // 2]
    click_row(qtbot, panel, tuned)
    view = panel.histogram
    qtbot.waitUntil(lambda: not window.dock_sizes.busy(), timeout=5000)
    assert view.height() >= 120
    before = quant.session.profile.range_of(tuned)
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        drag(qtbot, view, view.x_of(view.high), view.x_of(view.low + (view.high - view.low) / 3))
    assert quant.session.profile.range_of(tuned)[1] < before[1]
    assert tuned in quant.session.profile.overrides
    # Keep another tensor (and its layer) float.
    kept = names[1]
    click_row(qtbot, panel, kept)
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        qtbot.mouseClick(panel.keep_float, Qt.MouseButton.LeftButton)
    assert kept in quant.session.profile.keep_float
    assert panel.model.row_of(kept) is not None and panel.keep_float.isChecked()
    qdq = quant.quantized()
    final = compilation(qdq).final
    assert any(n.op in ("Conv", "FullyConnected", "Gemm", "MatMul") for n in final.nodes)
    assert any(n.op == "QLinearConv" for n in final.nodes)

    # int8 for Cortex-M7, instructions counted under QEMU.
    from compiler.mcu import firmware

    if firmware.missing_tools():
        require_tools(*firmware.missing_tools())
    m7 = ExportOptions("cortex-m7", "stm32f746g-disco", "net", "embedded", False, tmp_path / "m7")
    dialog = export(qtbot, window, m7, True)
    counts = window.export.last.counts
    assert set(counts) == {"int8", "float"} and counts["int8"] > 10_000
    assert dialog.precision_label.text().startswith("Precision: int8")
    assert "int8" in dialog.written.text()
    shot(dialog, f"{model}_int8_export_report")
    assert dialog.height() <= 1000
    dialog.close()
    # The object it wrote, built into firmware and run under QEMU: the interpreter's bytes.
    options, _ = compilation(qdq).layout_that_fits(driver_options(m7),
                                                   BOARDS["stm32f746g-disco"])
    m7_net = compilation(qdq).net(options)
    assert (tmp_path / "m7" / "net.o").read_bytes() == m7_net.object
    # The count is the exported build's (its weight layout and lowering), not the defaults'.
    from compiler.harness.cortex_m_bench import bench_compilation

    assert counts["int8"] == bench_compilation(compilation(qdq), "cortex-m7", peer=False,
                                               options=options).kiln.total
    _, held = data_of(model)
    x = compilation(qdq).prepared.inputs[0]
    firmware_tests.assert_exact(m7_net, compilation(qdq).final, {x.name: held.samples[:1]},
                       "mps2-an500", tmp_path / "m7-run", "exported for Cortex-M7")

    # int8 for the host, built and run with make: the interpreter's bytes.
    require_tools("cc", "make")
    folder = tmp_path / "host"
    dialog = export(qtbot, window, ExportOptions("host", None, "net", "embedded", False,
                                                  folder), False)
    dialog.close()
    prepared = compilation(qdq).prepared
    _, held = data_of(model)
    x = prepared.inputs[0]
    feeds = {x.name: held.samples[:1]}
    want = run(compilation(qdq).final, feeds)
    held.samples[:1].astype(np.float32).tofile(tmp_path / "x.bin")
    done = subprocess.run(["make", "-s", "-C", str(folder), "run", f"INPUT={tmp_path / 'x.bin'}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("output")))
    printed = np.array(lines[start + 1].split(), np.float32)
    (expected,) = want.values()
    np.testing.assert_array_equal(printed, np.asarray(expected, np.float32).reshape(-1))

    # An edit after calibration: the profile follows the graph and says what is stale.
    _delete_a_relu(qtbot, window)
    qtbot.waitUntil(lambda: not quant.is_busy(), timeout=TIMEOUT)
    assert panel.stale_banner.isVisible()
    assert tuned in quant.session.profile.overrides  # the hand-tuned range stays
    shot(quant.dock, f"{model}_stale_banner_after_an_edit")
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        qtbot.mouseClick(panel.reprofile_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not quant.is_busy(), timeout=TIMEOUT)
    assert not panel.stale_banner.isVisible()

    # Another model opened mid-flow (its unsaved edit discarded): no panel shows the first.
    # Inspect the first model: an overlay, and a comparison with its int8 quantization.
    window.overlays.choose("macs")
    qtbot.waitUntil(lambda: window.overlays.current is not None
                    and not window.overlays.is_busy(), timeout=TIMEOUT)
    assert window.canvas.overlay()
    with qtbot.waitSignal(window.compare.shown, timeout=TIMEOUT):
        window.compare.int8_action.trigger()
    assert window.compare.window.isVisible() and window.compare.result is not None
    _explore(qtbot, window, tmp_path / "samples")
    _open_another(qtbot, window, monkeypatch, model, tmp_path)


def _explore(qtbot, window, samples: Path) -> None:
    """A short exploration of the edited model from the Explore panel (trials in the tool's
    process): its points on the scatter, the edited graph written for the tool."""
    explore = window.explore
    explore.action.trigger()
    p = explore.panel
    type_into(qtbot, p.calibration, str(samples))
    type_into(qtbot, p.evaluation, str(samples))
    p.target.setCurrentText("cortex-m7")
    p.trials.setValue(2)
    p.workers.setValue(0)
    with qtbot.waitSignal(explore.runEnded, timeout=TIMEOUT) as ended:
        qtbot.mouseClick(p.start, Qt.MouseButton.LeftButton)
    assert ended.args == ["complete"], p.status.text()
    assert len(p.scatter.points) == 2 and explore.record is not None
    edited = explore.output().with_name(f"{window.document.path.stem}.onnx")
    assert edited.is_file()  # the edited graph, named as the user's file


def _open_another(qtbot, window, monkeypatch, model: str, tmp_path) -> None:
    """Open the other journey model over the calibrated, edited one and check every panel."""
    from PySide6.QtWidgets import QMessageBox

    other = "pretrainedResnet" if model != "pretrainedResnet" else "kws_ref_model_float32"
    monkeypatch.setattr(QMessageBox, "question",
                        lambda *a, **k: QMessageBox.StandardButton.Discard)
    with qtbot.waitSignal(window.modelLoaded, timeout=TIMEOUT):
        assert window.open_file(model_path(other, tmp_path)) is not None
    graph, quant = window.document.graph, window.quant
    qtbot.waitUntil(lambda: not any((quant.is_busy(), window.memory.is_busy(),
                                     window.code.is_busy())), timeout=TIMEOUT)
    assert window.document.path.stem == other and window.document.undo_stack.count() == 0
    assert window.document.quant.session is None and quant.quantized() is None
    assert quant.panel.model.rows == [] and not quant.panel.stale_banner.isVisible()
    canvas = window.canvas
    assert canvas.graph() is graph
    # Every node is on the canvas: its own box, or inside a closed group's.
    assert all(canvas.box_rect(window.grouping.shown_as(n.id)) is not None for n in graph.nodes)
    current = window.memory.current
    assert current is None or current.graph is graph
    # The inspection panels: no overlay, activations or comparison of the first model.
    assert window.overlays.current is None and not window.canvas.overlay()
    assert window.activations.result is None
    assert window.compare.result is None and not window.compare.window.isVisible()
    assert window.explore.record is None and window.explore.panel.scatter.points == []
    assert window.canvas.graph_layout().grouping is None or \
        window.canvas.graph_layout().grouping.graph is graph
    dialog = window.export.open_dialog()
    assert not dialog.precision.model().item(1).isEnabled(), "int8 without a calibration"
    dialog.close()


def _delete_a_relu(qtbot, window) -> None:
    """Click a Relu in the middle of the graph on the canvas and press Delete."""
    relus = [n for n in window.document.graph.nodes if n.op == "Relu"]
    assert relus
    node, canvas = relus[len(relus) // 2], window.canvas
    window.activateWindow()  # the export dialog was the active window until it closed
    qtbot.waitUntil(window.isActiveWindow)
    click_box(qtbot, window, node.id)
    qtbot.keyClick(canvas.viewport(), Qt.Key.Key_Delete)
    assert all(n.id != node.id for n in window.document.graph.nodes)
