"""The document: every edit is one undo step, and undo/redo restore the exact graph."""

import numpy as np
import onnx
import pytest

from app.document.document import Document, SaveError
from compiler import edit
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.ir.dump import dump
from tests.conftest import SAMPLE_MODEL


def _make_document(qtbot=None):
    doc = Document()
    doc.load(load_onnx(SAMPLE_MODEL), SAMPLE_MODEL)
    return doc


def _id(doc, name):
    return next(n.id for n in doc.graph.nodes if n.name == name)


def _fingerprint(graph):
    """Dump text plus every constant's payload (by identity and value)."""
    payloads = {name: (id(c.data), c.data.tobytes()) for name, c in graph.constants.items()}
    return dump(graph), payloads


EDITS = {
    "delete": lambda d: (edit.delete_node, "Delete", _id(d, "conv2")),
    "bypass": lambda d: (edit.delete_node, "Delete", _id(d, "relu1")),
    "attribute": lambda d: (edit.set_attribute, "Attr", _id(d, "conv1"), "kernel_shape", (5, 5)),
    "rename node": lambda d: (edit.rename_node, "Rename", _id(d, "conv1"), "first"),
    "rename tensor": lambda d: (edit.rename_value, "Rename", "conv1.weight", "w"),
    "insert relu": lambda d: (edit.insert_operator, "Insert", "conv1_out", "Relu"),
    "insert reshape": lambda d: (edit.insert_operator, "Insert", "flatten_out", "Reshape"),
    "input shape": lambda d: (edit.set_input_shape, "Shape", "image", (2, 1, 8, 8)),
}


@pytest.mark.parametrize("kind", list(EDITS))
def test_edit_then_undo_and_redo_restore_the_exact_graph(qtbot, kind):
    doc = _make_document()
    fn, text, *args = EDITS[kind](doc)
    original = _fingerprint(doc.graph)
    with qtbot.waitSignal(doc.graphChanged):
        doc.apply(fn, text, *args)
    edited = _fingerprint(doc.graph)
    edited_problems = dict(doc.problems)
    assert edited != original
    assert doc.is_dirty() and doc.title() == "digits_cnn.onnx*"
    doc.undo_stack.undo()
    assert _fingerprint(doc.graph) == original
    assert doc.problems == {} and not doc.is_dirty()
    doc.undo_stack.redo()
    assert _fingerprint(doc.graph) == edited
    assert doc.problems == edited_problems


def test_invalid_edit_reports_problems_and_undo_clears_them(qtbot):
    doc = _make_document()
    conv1 = _id(doc, "conv1")
    with qtbot.waitSignal(doc.problemsChanged):
        doc.apply(edit.set_attribute, "Set kernel", conv1, "kernel_shape", (5, 5))
    assert list(doc.problems) == [conv1]
    with qtbot.waitSignal(doc.problemsChanged):
        doc.undo_stack.undo()
    assert doc.problems == {}


def test_refused_edit_leaves_history_alone(qtbot):
    doc = _make_document()
    before = doc.graph
    with pytest.raises(KilnError):
        doc.apply(edit.rename_node, "Rename", _id(doc, "conv1"), "conv2")
    assert doc.graph is before and doc.undo_stack.count() == 0 and not doc.is_dirty()


def test_dirty_signal_follows_the_clean_state(qtbot):
    doc = _make_document()
    seen = []
    doc.dirtyChanged.connect(seen.append)
    conv1 = _id(doc, "conv1")
    doc.apply(edit.rename_node, "Rename", conv1, "a")
    doc.apply(edit.rename_node, "Rename", conv1, "b")
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert seen == [True, False]


def test_save_marks_clean_and_writes_a_checked_file(qtbot, tmp_path):
    doc = _make_document()
    doc.apply(edit.insert_operator, "Insert", "conv1_out", "Identity")
    target = tmp_path / "edited.onnx"
    with qtbot.waitSignal(doc.pathChanged):
        doc.save(target)
    assert not doc.is_dirty() and doc.path == target and doc.title() == "edited.onnx"
    onnx.checker.check_model(str(target), full_check=True)
    assert [n.op for n in load_onnx(target).nodes].count("Identity") == 1
    doc.undo_stack.undo()
    assert doc.is_dirty()


def test_save_refuses_a_graph_with_invalid_nodes_and_keeps_the_file(qtbot, tmp_path):
    doc = _make_document()
    target = tmp_path / "model.onnx"
    doc.save(target)
    original = target.read_bytes()
    doc.apply(edit.set_attribute, "Set kernel", _id(doc, "conv1"), "kernel_shape", (5, 5))
    with pytest.raises(SaveError, match="node conv1 is invalid") as info:
        doc.save()
    assert "\n" not in str(info.value)
    assert target.read_bytes() == original and doc.is_dirty()


def test_save_into_a_missing_folder_is_one_line(qtbot, tmp_path):
    doc = _make_document()
    with pytest.raises(SaveError, match="cannot save") as info:
        doc.save(tmp_path / "nope" / "x.onnx")
    assert "\n" not in str(info.value)
    assert doc.path == SAMPLE_MODEL


def test_load_clears_history(qtbot):
    doc = _make_document()
    doc.apply(edit.rename_node, "Rename", _id(doc, "conv1"), "a")
    doc.load(load_onnx(SAMPLE_MODEL), SAMPLE_MODEL)
    assert doc.undo_stack.count() == 0 and not doc.is_dirty()
    assert np.all([n.name != "a" for n in doc.graph.nodes])
