"""Stage views are first-class: search, the minimap and MACs work on a pass stage's graph.

The model is the sample CNN quantized here (QDQ), so the pipeline's `to_integer` stage holds
QLinearConv nodes that the loaded graph does not: searching the loaded graph instead of the
stage on screen finds none of them.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from compiler.frontends.load import load_model
from compiler.frontends.onnx.export import save_onnx
from compiler.quant.calibration_data import load_calibration
from compiler.quant.profiler import profile_model
from compiler.quant.quantize import quantize
from compiler.stats import node_macs
from tests.conftest import SAMPLE_MODEL
from tests.gui.helpers import make_window, open_and_wait

TIMEOUT = 120000


@pytest.fixture(scope="module")
def qdq_sample(tmp_path_factory):
    """The sample CNN as a QDQ ONNX file (profiled on the digits' training split)."""
    graph = load_model(SAMPLE_MODEL)
    profile = profile_model(graph, load_calibration("digits:train", graph), SAMPLE_MODEL.name,
                            bins=256)
    path = tmp_path_factory.mktemp("qdq") / "digits_qdq.onnx"
    save_onnx(quantize(graph, profile), path)
    return path


def _on_integer_stage(qtbot, qdq_sample):
    """A window showing the `to_integer` stage, chosen with a click in the Passes panel."""
    window = make_window(qtbot, None)
    stepping = window.stepping
    with qtbot.waitSignal(stepping.resultReady, timeout=TIMEOUT):
        open_and_wait(qtbot, window, qdq_sample)
    stepping.dock.show()
    stepping.dock.raise_()
    table = stepping.panel.table
    item = next(table.topLevelItem(i) for i in range(table.topLevelItemCount())
                if table.topLevelItem(i).text(1) == "to_integer")
    table.scrollToItem(item)
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.visualItemRect(item).center())
    stage = stepping.stages[stepping.index]
    assert stage.name == "to_integer" and stepping.view.isVisible()
    return window, stepping, stage


def test_find_searches_the_stage_on_screen(qtbot, qdq_sample):
    window, stepping, stage = _on_integer_stage(qtbot, qdq_sample)
    convs = [n.id for n in stage.graph.nodes if n.op == "QLinearConv"]
    assert len(convs) >= 2
    assert not any(n.op == "QLinearConv" for n in window.document.graph.nodes)
    stepping.canvas.setFocus()
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    bar = window.search_bar
    assert bar.isVisible()
    qtbot.keyClicks(bar.query, "QLinearConv")
    bar.search_now()
    assert bar.status.text() == f"1 of {len(convs)}"
    assert stepping.canvas.highlighted() == set(convs)
    assert stepping.canvas.selected_key() == convs[0]  # the match is selected on the stage
    assert window.properties.current_node_id() == convs[0] and window.properties.read_only
    bar.next()
    assert stepping.canvas.selected_key() == convs[1]
    stepping.leave_stage()  # back on the model, the same query finds what the model has
    assert window.canvas.highlighted() == set() and bar.status.text() == "no match"


def test_the_minimap_follows_the_stage_on_screen(qtbot, qdq_sample):
    window, stepping, _ = _on_integer_stage(qtbot, qdq_sample)
    minimap, stage_canvas = window.minimap, stepping.canvas
    stage_canvas.set_zoom(1.0)
    stage_canvas.centerOn(stage_canvas.sceneRect().topLeft())
    model_view = window.canvas.visible_scene_rect()
    top = stage_canvas.visible_scene_rect().center()
    # A click on the minimap's middle moves the stage there, not the hidden model canvas.
    target = stage_canvas.sceneRect().center()
    assert target.y() - top.y() > 100  # the stage is taller than the view: it must scroll
    pos = minimap.scene_to_widget().map(target)
    qtbot.mouseClick(minimap, Qt.MouseButton.LeftButton, pos=QPoint(round(pos.x()),
                                                                   round(pos.y())))
    centre = stage_canvas.visible_scene_rect().center()
    assert abs(centre.y() - target.y()) < 20, (centre, target)
    assert window.canvas.visible_scene_rect() == model_view
    assert minimap.canvas is stage_canvas
    stepping.leave_stage()
    assert minimap.canvas is window.canvas


def test_a_stage_node_shows_its_macs(qtbot, qdq_sample):
    window, stepping, stage = _on_integer_stage(qtbot, qdq_sample)
    conv = next(n for n in stage.graph.nodes if n.op == "QLinearConv")
    canvas = stepping.canvas
    canvas.set_zoom(1.0)
    canvas.center_on(conv.id)
    pos = canvas.mapFromScene(canvas.box_rect(conv.id).center())
    qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    properties = window.properties
    assert properties.current_node_id() == conv.id and properties.read_only
    macs = node_macs(stage.graph)[conv.id]
    assert macs and macs > 0
    assert properties.info_labels["MACs"].text() == f"{macs:,}"


def test_zoom_actions_act_on_the_stage(qtbot, qdq_sample):
    window, stepping, _ = _on_integer_stage(qtbot, qdq_sample)
    model_zoom, stage_zoom = window.canvas.zoom_level(), stepping.canvas.zoom_level()
    window.actions_.zoom_in.trigger()
    assert stepping.canvas.zoom_level() > stage_zoom
    assert window.canvas.zoom_level() == model_zoom
    assert window.zoom_label.text() == f"{stepping.canvas.zoom_level():.0%}"
