"""Saving (atomic, checked, runnable) and the unsaved-changes prompt on close and open."""

import numpy as np
import onnx
from PySide6.QtWidgets import QMessageBox

from compiler.frontends.onnx import load_onnx
from compiler.interpreter import run
from compiler.ir.dump import dump
from tests.conftest import SAMPLE_MODEL
from tests.gui.helpers import copy_sample, make_window, node_id, open_and_wait
from tests.helpers import assert_close, ort_run

DIGIT = SAMPLE_MODEL.parent / "digit_2.npy"


def _digit():
    return {"image": np.load(DIGIT).astype(np.float32).reshape(1, 1, 8, 8)}


def test_save_without_edits_runs_like_the_original(qtbot, tmp_path):
    window = make_window(qtbot)
    target = tmp_path / "copy.onnx"
    assert window.save_as(target)
    assert window.document.path == target and window.windowTitle() == "copy.onnx — Kiln"
    onnx.checker.check_model(str(target), full_check=True)
    want = ort_run(onnx.load(str(SAMPLE_MODEL)), _digit())
    got = ort_run(onnx.load(str(target)), _digit())
    assert_close(got[0], want[0], rtol=0, atol=0, what="logits")
    assert int(np.argmax(got[0])) == 2


def test_edited_save_reloads_and_runs_like_the_reference(qtbot, tmp_path):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    window.canvas.select_edge("conv1_out")
    assert window.editing.insert_on_edge("Relu")
    window.canvas.select_edge("flatten_out")
    assert window.editing.insert_on_edge("Identity")
    edited = window.document.graph
    assert window.save()
    assert not window.document.is_dirty() and window.windowTitle() == "digits_cnn.onnx — Kiln"
    reference = run(edited, _digit())["logits"]
    saved = ort_run(onnx.load(str(model)), _digit())[0]
    assert_close(saved, reference, what="logits")
    ops = [n.op_type for n in onnx.load(str(model)).graph.node]
    assert ops.count("Relu") == 4 and ops.count("Identity") == 1
    open_and_wait(qtbot, window, model)
    assert dump(window.document.graph) == dump(load_onnx(model))
    assert [n.op for n in window.document.graph.nodes] == [n.op for n in edited.nodes]


def test_save_of_an_invalid_graph_is_refused_and_the_file_kept(qtbot, tmp_path, message_boxes):
    model = copy_sample(tmp_path)
    original = model.read_bytes()
    window = make_window(qtbot, model)
    window.editing.set_attribute_text(node_id(window, "conv1"), "kernel_shape", "[5, 5]")
    assert not window.save()
    kind, title, text = message_boxes.shown[-1]
    assert kind == "critical" and title == "Cannot save model"
    assert "conv1 is invalid" in text and "\n" not in text
    assert model.read_bytes() == original and window.document.is_dirty()


def _edited_window(qtbot, tmp_path):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    assert window.editing.rename_node(node_id(window, "conv1"), "stem")
    assert window.windowTitle() == "digits_cnn.onnx* — Kiln"
    return window, model


def test_close_with_unsaved_edits_cancel_keeps_the_window(qtbot, tmp_path, message_boxes):
    window, model = _edited_window(qtbot, tmp_path)
    message_boxes.answer = QMessageBox.StandardButton.Cancel
    assert not window.close()
    assert window.isVisible() and window.document.is_dirty()
    assert message_boxes.kinds() == ["question"] and "unsaved" in message_boxes.shown[0][2]


def test_close_with_unsaved_edits_discard_closes_without_saving(qtbot, tmp_path,
                                                                  message_boxes):
    window, model = _edited_window(qtbot, tmp_path)
    before = model.read_bytes()
    message_boxes.answer = QMessageBox.StandardButton.Discard
    assert window.close()
    assert not window.isVisible() and model.read_bytes() == before


def test_close_with_unsaved_edits_save_writes_then_closes(qtbot, tmp_path, message_boxes):
    window, model = _edited_window(qtbot, tmp_path)
    message_boxes.answer = QMessageBox.StandardButton.Save
    assert window.close()
    assert "stem" in {n.name for n in load_onnx(model).nodes}


def test_close_without_edits_does_not_ask(qtbot, message_boxes):
    window = make_window(qtbot)
    assert window.close()
    assert message_boxes.shown == []


def test_opening_another_model_asks_first(qtbot, tmp_path, message_boxes):
    window, model = _edited_window(qtbot, tmp_path)
    message_boxes.answer = QMessageBox.StandardButton.Cancel
    assert window.open_file(SAMPLE_MODEL) is None
    assert window.document.path == model and window.document.is_dirty()
    message_boxes.answer = QMessageBox.StandardButton.Discard
    open_and_wait(qtbot, window, SAMPLE_MODEL)
    assert not window.document.is_dirty()


def test_save_keeps_no_temporary_files(qtbot, tmp_path):
    window = make_window(qtbot)
    assert window.save_as(tmp_path / "out")  # the suffix is added
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.onnx"]


def test_close_keeps_the_window_when_the_save_fails(qtbot, tmp_path, message_boxes):
    model = copy_sample(tmp_path)
    window = make_window(qtbot, model)
    window.editing.set_attribute_text(node_id(window, "conv1"), "kernel_shape", "[5, 5]")
    message_boxes.answer = QMessageBox.StandardButton.Save
    assert not window.close()
    assert window.isVisible() and window.document.is_dirty()
    assert message_boxes.kinds() == ["question", "critical"]
