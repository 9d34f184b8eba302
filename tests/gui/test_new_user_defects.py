"""Defects found when the app was tried as a new user would, one test each (numbers as filed)."""

import os
import stat

import onnx
import pytest
from onnx import TensorProto, helper
from PySide6.QtWidgets import QApplication

from app.export.controller import default_bundles_folder
from compiler import edit
from compiler.passes.cleanup import dce
from tests.conftest import SAMPLE_MODEL
from tests.gui.helpers import copy_sample, make_window, node_id, open_and_wait
from views.export_dialog import ExportOptions
from views.layout import compute_layout

TIMEOUT = 60000


def _export(qtbot, window, options):
    window.export.open_dialog()
    job = window.export.start(options)
    with qtbot.waitSignal(job.succeeded, timeout=TIMEOUT):
        pass
    return window.export.dialog


def _other_model(tmp_path):
    """A second model with another name and other nodes than the sample."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="only_relu")], "other",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    path = tmp_path / "other_model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_1_export_dialog_forgets_the_previous_model(qtbot, tmp_path):
    window = make_window(qtbot)
    dialog = _export(qtbot, window, ExportOptions("host", None, "net", "embedded", False,
                                                  tmp_path / "digits_bundle"))
    assert dialog.pages.currentIndex() == 1  # the result page with the sample's report
    open_and_wait(qtbot, window, _other_model(tmp_path))
    again = window.export.open_dialog()
    assert again.pages.currentIndex() == 0  # options, not the old report
    assert again.options().folder.name == "other_model_bundle"
    assert window.export.last is None


def test_2_edits_never_widen_the_window(qtbot):
    window = make_window(qtbot)
    window.memory.dock.show()
    qtbot.waitUntil(lambda: window.memory.current is not None, timeout=TIMEOUT)
    width = window.width()
    for _ in range(3):
        window.document.apply(edit.insert_operator, "Insert Transpose", "relu2_out",
                              "Transpose", {"perm": (0, 1, 3, 2)})
        qtbot.waitUntil(lambda: window.memory.current is not None and not window.memory.is_busy()
                        and window.memory.current.graph is window.document.graph,
                        timeout=TIMEOUT)
        QApplication.processEvents()
        assert "After the edit" in window.memory.panel.delta.text()
        assert window.width() == width


def test_3_an_invalid_graph_is_not_run(qtbot, capfd):
    window = make_window(qtbot)
    stepping = window.stepping
    qtbot.waitUntil(lambda: stepping.result is not None, timeout=TIMEOUT)
    conv1 = node_id(window, "conv1")
    with qtbot.waitSignal(stepping.runFailed, timeout=TIMEOUT) as blocker:
        assert window.editing.set_attribute_text(conv1, "kernel_shape", "[5, 5]")
    assert "conv1 is invalid" in blocker.args[0] and "unexpected" not in blocker.args[0]
    assert "conv1 is invalid" in stepping.panel.status.text()
    assert stepping.result is None and stepping.panel.rows() == []
    assert stepping.run() is None
    assert "Traceback" not in capfd.readouterr().err


def test_4_no_provenance_of_the_previous_model(qtbot, tmp_path):
    window = make_window(qtbot)
    stepping = window.stepping
    qtbot.waitUntil(lambda: stepping.result is not None, timeout=TIMEOUT)
    stepping.show_stage(len(stepping.stages) - 2)
    conv = next(n for n in stepping.stages[stepping.index].graph.nodes if n.op == "Conv")
    stepping.select_on_stage(conv.id)
    assert "From loaded node" in stepping.panel.provenance.text()
    open_and_wait(qtbot, window, _other_model(tmp_path))
    assert stepping.panel.provenance.text() == ""
    assert stepping.index is None and "conv" not in stepping.panel.status.text()


def test_5_a_stage_node_shows_its_properties_read_only(qtbot):
    window = make_window(qtbot)
    stepping = window.stepping
    qtbot.waitUntil(lambda: stepping.result is not None, timeout=TIMEOUT)
    stepping.show_stage(3)
    node = next(n for n in stepping.stages[3].graph.nodes if n.op == "Conv")
    stepping.select_on_stage(node.id)
    properties = window.properties
    assert properties.current_node_id() == node.id and properties.read_only
    assert properties.name_edit.isReadOnly() and "Read-only" in properties.title.text()
    stepping.leave_stage()
    assert not properties.read_only


def test_6_the_final_stage_is_a_clean_layout(qtbot):
    window = make_window(qtbot)
    stepping = window.stepping
    qtbot.waitUntil(lambda: stepping.result is not None, timeout=TIMEOUT)
    last = len(stepping.stages) - 1
    stepping.show_stage(last)
    final = stepping.stages[last].graph
    live = final.snapshot()
    dce(live)
    assert stepping.canvas.diff_state() == {} and stepping.canvas.faded() == set()
    assert set(stepping.canvas.graph_layout().boxes) == set(compute_layout(live).boxes)
    stepping.view.clean_final.setChecked(False)  # the removed nodes, on request
    assert stepping.canvas.graph_layout() is stepping.stages[last].placed.layout


def test_7_f5_gives_feedback(qtbot):
    window = make_window(qtbot)
    stepping = window.stepping
    window.docks["palette"].raise_()  # the Passes tab is behind the palette
    # F5 is disabled while the run the load started is still going (a loaded machine).
    qtbot.waitUntil(stepping.run_action.isEnabled, timeout=TIMEOUT)
    stepping.run_action.trigger()
    assert not stepping.dock.visibleRegion().isEmpty() or stepping.dock.isVisible()
    assert "Running the pass pipeline" in window.statusBar().currentMessage()
    qtbot.waitUntil(lambda: "Pass pipeline done" in window.statusBar().currentMessage(),
                    timeout=TIMEOUT)


@pytest.mark.parametrize("existing", [None, 0o640])
def test_8_save_as_keeps_the_mode(qtbot, tmp_path, existing):
    window = make_window(qtbot, copy_sample(tmp_path))
    target = tmp_path / "saved.onnx"
    old = os.umask(0o022)
    try:
        if existing is not None:
            target.write_bytes(b"")
            target.chmod(existing)
        assert window.save_as(target)
    finally:
        os.umask(old)
    mode = stat.S_IMODE(target.stat().st_mode)
    assert mode == (existing if existing is not None else 0o644)


def _big_io_model(tmp_path):
    """1 MiB in and out: over the RAM of every small board unless the arena holds them."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "big_io",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 128, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 128, 128])])
    path = tmp_path / "big_io.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_10_the_size_report_hints_at_io_in_arena(qtbot, tmp_path):
    window = make_window(qtbot, _big_io_model(tmp_path))
    dialog = _export(qtbot, window, ExportOptions("cortex-m7", "stm32f746g-disco", "net",
                                                  "embedded", False, tmp_path / "b"))
    verdict = dialog.report_view.verdict.text()
    assert "Does not fit" in verdict and "Hint:" in verdict and "--io-in-arena" in verdict


def test_11_the_export_folder_is_per_user_and_writable(qtbot, tmp_path):
    read_only = tmp_path / "ro"
    read_only.mkdir()
    model = read_only / "digits_cnn.onnx"
    model.write_bytes(SAMPLE_MODEL.read_bytes())
    read_only.chmod(0o555)
    try:
        window = make_window(qtbot, model)
        folder = window.export.open_dialog().options().folder
        assert folder.parent == default_bundles_folder()
        assert not str(folder).startswith(str(read_only))
        # Remembered: the next export proposes the folder the user chose last.
        chosen = tmp_path / "mine" / "x_bundle"
        _export(qtbot, window, ExportOptions("host", None, "net", "embedded", False, chosen))
        second = make_window(qtbot, model)
        assert second.export.open_dialog().options().folder.parent == chosen.parent
    finally:
        read_only.chmod(0o755)


def test_12_a_tflite_file_is_named_as_such(qtbot, tmp_path, message_boxes):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(64))
    window = make_window(qtbot, None)
    with qtbot.waitSignal(window.loadFailed, timeout=TIMEOUT) as blocker:
        window.open_file(path)
    assert "TFLite" in blocker.args[0] and "truncated" not in blocker.args[0]
