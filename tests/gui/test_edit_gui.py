"""Selecting, searching and editing in the window; each edit undone and redone exactly."""

import pytest
from PySide6.QtCore import Qt

from tests.gui.helpers import fingerprint, make_window, node_id


def _click_box(qtbot, window, key):
    canvas = window.canvas
    canvas.center_on(key)
    centre = canvas.mapFromScene(canvas.box_rect(key).center())
    qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=centre)


def test_clicking_a_node_shows_its_properties(qtbot):
    window = make_window(qtbot)
    conv2 = node_id(window, "conv2")
    _click_box(qtbot, window, conv2)
    assert window.canvas.selected_key() == conv2
    props = window.properties
    assert "Conv" in props.title.text() and props.name_edit.text() == "conv2"
    assert props.info_labels["MACs"].text() == "73,728"
    assert props.weights_box.isVisible() and props.current_weight() == "conv2.weight"
    assert window.actions_.delete.isEnabled()


def test_selecting_an_input_and_an_edge(qtbot):
    window = make_window(qtbot)
    window.select_and_center("in:image")
    assert "graph input" in window.properties.title.text()
    assert not window.actions_.delete.isEnabled() and window.actions_.rename.isEnabled()
    window.canvas.select_edge("relu1_out")
    assert "relu1_out" in window.properties.title.text()
    assert window.palette.insert_button.isEnabled()
    assert window.actions_.insert.isEnabled()


def _visible_centre_distance(window, key):
    canvas = window.canvas
    box = canvas.box_rect(key).center()
    view = canvas.visible_scene_rect().center()
    return abs(box.x() - view.x()), abs(box.y() - view.y())


def test_search_highlights_and_centres_on_each_match(qtbot):
    window = make_window(qtbot)
    window.canvas.set_zoom(2.0)  # room to scroll, so every match can be centred
    window.canvas.setFocus()
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    bar = window.search_bar
    assert bar.isVisible()
    qtbot.keyClicks(bar.query, "relu")
    bar.search_now()
    relus = [node_id(window, f"relu{i}") for i in (1, 2, 3)]
    assert window.canvas.highlighted() == set(relus)
    assert bar.status.text() == "1 of 3"
    for expected in relus[1:] + relus[:1]:
        bar.next()
        assert window.canvas.selected_key() == expected
        dx, dy = _visible_centre_distance(window, expected)
        assert dx < 5 and dy < 5, (dx, dy)  # scene units; scrolling moves whole pixels
    bar.previous()
    assert window.canvas.selected_key() == relus[2] and bar.status.text() == "3 of 3"
    bar.close_bar()
    assert window.canvas.highlighted() == set()


def test_search_with_a_regex_and_a_bad_one(qtbot):
    window = make_window(qtbot)
    window.open_search()
    bar = window.search_bar
    bar.regex.setChecked(True)
    bar.query.setText("^conv[12]$")
    bar.search_now()
    assert window.canvas.highlighted() == {node_id(window, "conv1"), node_id(window, "conv2")}
    bar.query.setText("conv[")
    bar.search_now()
    assert bar.status.text() == "bad regex" and window.canvas.highlighted() == set()


# Each edit kind through the window: (what to select, how to edit).
def _delete(window):
    window.canvas.select(node_id(window, "relu2"))
    return window.editing.delete_selected()


def _attribute(window):
    return window.editing.set_attribute_text(node_id(window, "pool1"), "strides", "[1, 1]")


def _rename_node(window):
    return window.editing.rename_node(node_id(window, "conv1"), "stem")


def _rename_tensor(window):
    return window.editing.rename_tensor("relu1_out", "features")


def _insert(window):
    window.canvas.select_edge("conv2_out")
    return window.editing.insert_on_edge("Clip", "0, 6")


def _input_shape(window):
    return window.editing.set_input_shape_text("image", "2, 1, 8, 8")


EDITS = {"delete": _delete, "attribute": _attribute, "rename node": _rename_node,
         "rename tensor": _rename_tensor, "insert": _insert, "input shape": _input_shape}


@pytest.mark.parametrize("kind", list(EDITS))
def test_each_edit_then_undo_and_redo_restore_the_exact_graph(qtbot, kind):
    window = make_window(qtbot)
    doc = window.document
    original = fingerprint(doc.graph)
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        assert EDITS[kind](window)
    edited = fingerprint(doc.graph)
    assert edited != original
    assert window.windowTitle() == "digits_cnn.onnx* — Kiln"
    assert window.canvas.graph() is doc.graph
    window.actions_.undo.trigger()
    assert fingerprint(doc.graph) == original and window.canvas.graph() is doc.graph
    assert window.windowTitle() == "digits_cnn.onnx — Kiln"
    window.actions_.redo.trigger()
    assert fingerprint(doc.graph) == edited and window.canvas.graph() is doc.graph


def test_insert_selects_the_new_node(qtbot):
    window = make_window(qtbot)
    _insert(window)
    key = window.canvas.selected_key()
    assert window.document.graph.node(key).op == "Clip"
    assert "Clip" in window.properties.title.text()


def test_bad_attribute_turns_the_node_red(qtbot, message_boxes):
    window = make_window(qtbot)
    conv1 = node_id(window, "conv1")
    window.canvas.select(conv1)
    assert window.editing.set_attribute_text(conv1, "kernel_shape", "[5, 5]")
    reason = window.document.problems[conv1]
    assert "does not match the weights" in reason
    assert window.canvas.problems() == {conv1: reason}
    assert window.problems_panel.count() == 1 and window.docks["problems"].isVisible()
    assert window.properties.problem.isVisible() and reason in window.properties.problem.text()
    assert window.problems_label.text() == "1 invalid"
    assert message_boxes.shown == []
    window.actions_.undo.trigger()
    assert window.canvas.problems() == {} and window.problems_panel.count() == 0
    assert window.problems_label.text() == ""


def test_refused_edits_show_one_line_and_change_nothing(qtbot, message_boxes):
    window = make_window(qtbot)
    before = window.document.graph
    assert not window.editing.rename_node(node_id(window, "conv1"), "conv2")
    assert not window.editing.set_attribute_text(node_id(window, "conv1"), "group", "two")
    window.canvas.select(node_id(window, "flatten"))
    assert window.editing.delete_selected()  # bypassed: Flatten has one data input
    window.actions_.undo.trigger()
    assert window.document.graph is before and window.document.undo_stack.index() == 0
    kinds = [kind for kind, _, _ in message_boxes.shown]
    assert kinds == ["warning", "warning"]
    assert all("\n" not in text for _, _, text in message_boxes.shown)
    assert "already named" in message_boxes.shown[0][2]


def test_attribute_typed_into_the_properties_panel(qtbot):
    window = make_window(qtbot)
    pool = node_id(window, "pool1")
    window.canvas.select(pool)
    table = window.properties.attributes
    row = [table.item(r, 0).text() for r in range(table.rowCount())].index("strides")
    with qtbot.waitSignal(window.layoutReady, timeout=5000):
        table.item(row, 1).setText("1, 1")
    assert window.document.graph.node(pool).attrs["strides"] == (1, 1)
    assert window.canvas.selected_key() == pool
    assert window.document.undo_stack.undoText() == "Set strides of pool1"


def test_delete_key_deletes_the_selected_node(qtbot):
    window = make_window(qtbot)
    relu = node_id(window, "relu3")
    window.activateWindow()
    window.canvas.setFocus()
    window.canvas.select(relu)
    window.actions_.delete.trigger()
    assert relu not in {n.id for n in window.document.graph.nodes}
    assert window.canvas.selected_key() is None
    assert "Select a node" in window.properties.title.text()


def test_show_constants_as_nodes(qtbot):
    window = make_window(qtbot)
    window.actions_.show_constants.setChecked(True)
    assert "const:conv1.weight" in window.canvas.graph_layout().boxes
    window.select_and_center("const:conv1.weight")
    assert window.properties.weights_box.isVisible()
    window.actions_.show_constants.setChecked(False)
    assert "const:conv1.weight" not in window.canvas.graph_layout().boxes


def test_export_weight(qtbot, tmp_path):
    import numpy as np

    window = make_window(qtbot)
    target = tmp_path / "w.npy"
    assert window.editing.export_constant("conv1.weight", target)
    np.testing.assert_array_equal(np.load(target),
                                  window.document.graph.constants["conv1.weight"].data)


def test_undo_reuses_the_layout_it_had(qtbot):
    window = make_window(qtbot)
    layout = window.canvas.graph_layout()
    _rename_node(window)
    assert window.canvas.graph_layout() is not layout
    window.actions_.undo.trigger()
    assert window.canvas.graph_layout() is layout


def test_editing_a_big_model_lays_out_in_the_background(qtbot):
    from tests.gui.helpers import DENSENET

    window = make_window(qtbot, DENSENET)
    graph = window.document.graph
    relu = next(n.id for n in graph.nodes if n.op == "Relu")
    window.canvas.select(relu)
    with qtbot.waitSignal(window.layoutReady, timeout=30000):
        assert window.editing.delete_selected()
        # The document has the new graph at once; the canvas follows when the layout is ready.
        assert window.document.graph is not graph and window.canvas.graph() is graph
        assert window.editing.selected_node() is None  # the deleted node is not editable
    assert window.canvas.graph() is window.document.graph
    assert relu not in window.canvas.graph_layout().boxes
    window.actions_.undo.trigger()  # the old layout is reused: no waiting
    assert window.canvas.graph() is graph
