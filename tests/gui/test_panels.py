"""The dock panels on their own: properties, problems, search bar, operator palette."""

import pytest
from PySide6.QtCore import Qt

from compiler import edit
from compiler.frontends.onnx import load_onnx
from compiler.stats import node_macs
from tests.conftest import SAMPLE_MODEL
from views.palette import OperatorPalette
from views.problems import ProblemsPanel
from views.properties import PropertiesPanel
from views.search import SearchBar


@pytest.fixture(scope="module")
def sample():
    return load_onnx(SAMPLE_MODEL)


def _node(graph, name):
    return next(n for n in graph.nodes if n.name == name)


def _rows(table):
    return [[table.item(r, c).text() for c in range(table.columnCount())]
            for r in range(table.rowCount())]


def _make_properties(qtbot):
    panel = PropertiesPanel()
    qtbot.addWidget(panel)
    panel.resize(360, 800)
    panel.show()
    return panel


def test_properties_of_a_conv(qtbot, sample):
    panel = _make_properties(qtbot)
    conv = _node(sample, "conv2")
    panel.show_node(sample, conv.id, macs=node_macs(sample)[conv.id])
    assert "Conv" in panel.title.text()
    assert panel.name_edit.text() == "conv2"
    assert panel.info_labels["MACs"].text() == "73,728"
    assert panel.info_labels["Provenance"].text().startswith(f"#{conv.id}")
    attrs = dict(_rows(panel.attributes))
    assert attrs["kernel_shape"] == "[3, 3]" and attrs["group"] == "1"
    assert _rows(panel.inputs) == [["X", "relu1_out", "float32[1,8,8,8]"],
                                   ["W", "conv2.weight", "float32[16,8,3,3]"],
                                   ["B", "conv2.bias", "float32[16]"]]
    assert _rows(panel.outputs) == [["0", "conv2_out", "float32[1,16,8,8]"]]
    assert panel.weights_box.isVisible() and panel.current_weight() == "conv2.weight"
    assert panel.stats_labels["Elements"].text() == "1,152"
    assert not panel.problem.isVisible()
    panel.weight_choice.setCurrentIndex(1)
    assert panel.stats_labels["Shape"].text() == "float32[16]"


def test_properties_show_a_problem(qtbot, sample):
    panel = _make_properties(qtbot)
    panel.show_node(sample, 0, problem="kernel does not match")
    assert panel.problem.isVisible() and "kernel does not match" in panel.problem.text()


def test_properties_of_a_tensor_and_a_constant(qtbot, sample):
    panel = _make_properties(qtbot)
    panel.show_value(sample, "image")
    assert "graph input" in panel.title.text() and not panel.weights_box.isVisible()
    panel.show_value(sample, "fc.weight")
    assert "constant" in panel.title.text() and panel.weights_box.isVisible()
    assert panel.stats_labels["Shape"].text() == "float32[10,256]"
    with qtbot.waitSignal(panel.exportRequested) as blocker:
        panel.export_button.click()
    assert blocker.args == ["fc.weight"]


def test_editing_an_attribute_cell_requests_an_edit(qtbot, sample):
    panel = _make_properties(qtbot)
    pool = _node(sample, "pool1")
    panel.show_node(sample, pool.id)
    row = [r[0] for r in _rows(panel.attributes)].index("strides")
    with qtbot.waitSignal(panel.attributeEditRequested) as blocker:
        panel.attributes.item(row, 1).setText("[1, 1]")
    assert blocker.args == [pool.id, "strides", "[1, 1]"]
    layout_row = [r[0] for r in _rows(panel.attributes)].index("layout")
    assert not panel.attributes.item(layout_row, 1).flags() & Qt.ItemFlag.ItemIsEditable


def test_renaming_from_the_panel(qtbot, sample):
    panel = _make_properties(qtbot)
    panel.show_node(sample, 0)
    with qtbot.waitSignal(panel.renameNodeRequested) as blocker:
        panel.name_edit.setText("first")
        panel.name_edit.editingFinished.emit()
    assert blocker.args == [0, "first"]
    with qtbot.waitSignal(panel.renameTensorRequested) as blocker:
        panel.outputs.item(0, 1).setText("features")
    assert blocker.args == ["conv1_out", "features"]


def test_input_rows_navigate_to_producers(qtbot, sample):
    panel = _make_properties(qtbot)
    panel.show_node(sample, _node(sample, "conv2").id)
    with qtbot.waitSignal(panel.navigateRequested) as blocker:
        panel.inputs.itemDoubleClicked.emit(panel.inputs.item(0, 1))
    assert blocker.args == [_node(sample, "relu1").id]


def test_problems_panel_lists_and_activates(qtbot, sample):
    panel = ProblemsPanel()
    qtbot.addWidget(panel)
    bad = edit.set_attribute(sample, 0, "kernel_shape", (5, 5))
    panel.set_problems(bad, edit.problems(bad))
    assert panel.count() == 1 and "1 invalid node" in panel.summary.text()
    item = panel.tree.topLevelItem(0)
    assert item.text(0) == "conv1" and "does not match" in item.text(2)
    with qtbot.waitSignal(panel.nodeActivated) as blocker:
        panel.tree.itemActivated.emit(item, 0)
    assert blocker.args == [0]
    panel.set_problems(sample, {})
    assert panel.count() == 0 and "No problems" in panel.summary.text()


def test_search_bar_moves_through_matches(qtbot):
    bar = SearchBar()
    qtbot.addWidget(bar)
    queries = []
    bar.queryChanged.connect(lambda text, regex: queries.append((text, regex)))
    bar.query.setText("conv")
    qtbot.waitUntil(lambda: queries == [("conv", False)], timeout=2000)
    current = []
    bar.currentChanged.connect(current.append)
    bar.set_matches([3, 5, 9])
    assert bar.status.text() == "1 of 3" and current == [3]
    bar.next()
    bar.next()
    bar.next()
    assert current == [3, 5, 9, 3] and bar.status.text() == "1 of 3"
    bar.previous()
    assert current[-1] == 9 and bar.status.text() == "3 of 3"
    bar.set_error("bad regular expression")
    assert bar.status.text() == "bad regex" and bar.current() is None
    with qtbot.waitSignal(bar.closed):
        bar.close_bar()


def test_palette_inserts_only_with_a_target(qtbot):
    palette = OperatorPalette()
    qtbot.addWidget(palette)
    palette.set_operators(edit.insertable_ops())
    assert palette.current_operator() == "Relu"
    assert not palette.insert_button.isEnabled()
    palette.set_target("conv1_out → relu1")
    palette.filter.setText("sigm")
    assert palette.current_operator() == "Sigmoid"
    with qtbot.waitSignal(palette.insertRequested) as blocker:
        palette.insert_button.click()
    assert blocker.args == ["Sigmoid"]
