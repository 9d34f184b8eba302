"""Groups on the canvas: QDQ units and scopes closed, opened and closed by mouse and keys."""

from __future__ import annotations

import onnx
from PySide6.QtCore import Qt

from tests.conftest import shared_models
from tests.gui.helpers import make_window
from tests.views.graphs import scoped_model


def _boxes(window, kind: str) -> list:
    layout = window.layout_
    if kind == "node":
        return [k for k in layout.boxes if isinstance(k, int)]
    return [k for k in layout.boxes if isinstance(k, str) and k.startswith(f"{kind}:")]


def _double_click(qtbot, window, key) -> None:
    canvas = window.canvas
    canvas.center_on(key)
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        qtbot.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                          pos=canvas.mapFromScene(canvas.box_rect(key).center()))


def _click_header(qtbot, window, key) -> None:
    canvas = window.canvas
    header = canvas.frame_header(key)
    canvas.centerOn(header.center())
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                         pos=canvas.mapFromScene(header.center()))


def _scoped(tmp_path):
    path = tmp_path / "scoped.onnx"
    onnx.save(scoped_model(stages=3, blocks=2, layers=3), path)
    return path


def test_scoped_model_opens_at_its_outline_and_groups_open_and_close(qtbot, tmp_path):
    window = make_window(qtbot, _scoped(tmp_path))
    graph = window.document.graph
    hierarchy = window.layout_.grouping.hierarchy
    groups = _boxes(window, "group")
    shown = len(_boxes(window, "node")) + len(groups)
    assert shown == hierarchy.visible_count(window.layout_.expanded) <= len(graph.nodes)
    # Close everything: the three stages.
    window.grouping.collapse_all()
    stages = _boxes(window, "group")
    assert len(stages) == 3 and not _boxes(window, "node") and not window.layout_.frames
    # Double click a stage: it opens as a frame around its blocks.
    stage = stages[1]
    _double_click(qtbot, window, stage)
    assert stage in window.layout_.frames and stage not in window.layout_.boxes
    blocks = [k for k in _boxes(window, "group") if hierarchy.parent[k] == stage]
    assert len(blocks) == 2
    frame = window.canvas.frames()[stage]
    for block in blocks:  # inside their frame
        assert frame.contains(window.canvas.box_rect(block))
    # Keys: select a block, + opens it, - closes it again.
    window.canvas.select(blocks[0])
    window.canvas.setFocus()
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        qtbot.keyClick(window.canvas, Qt.Key.Key_Plus)
    assert blocks[0] in window.layout_.frames
    layer = next(k for k in _boxes(window, "group") if hierarchy.parent[k] == blocks[0])
    window.canvas.select(layer)
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        qtbot.keyClick(window.canvas, Qt.Key.Key_Minus)
    assert blocks[0] in window.layout_.boxes
    # A click on the stage's title band closes it.
    _click_header(qtbot, window, stage)
    assert stage in window.layout_.boxes and not window.layout_.frames
    # Open all: every node is a box; close to depth 1: stages open, blocks closed.
    window.grouping.expand_all()
    assert len(_boxes(window, "node")) == len(graph.nodes)
    window.grouping.collapse_to(1)
    assert set(window.layout_.frames) == set(stages)
    assert all(hierarchy.depth(k) == 2 for k in _boxes(window, "group"))


def test_search_lights_closed_groups_and_going_to_a_match_opens_them(qtbot, tmp_path):
    window = make_window(qtbot, _scoped(tmp_path))
    window.grouping.collapse_all()
    graph = window.document.graph
    target = next(n for n in graph.nodes if n.name == "stage_2/block_1/layer_2/relu")
    window.canvas.set_highlight([target.id])
    stage = window.layout_.grouping.hierarchy.ancestors(target.id)[0]
    assert window.canvas.highlighted() == {stage}
    window.select_and_center(target.id)
    assert target.id in window.layout_.boxes
    assert window.canvas.selected_key() == target.id
    assert target.id in window.canvas.highlighted()  # the match itself now


def test_closed_group_shows_sums_and_deletes_as_one_step(qtbot, tmp_path):
    window = make_window(qtbot, _scoped(tmp_path))
    window.grouping.collapse_to(2)
    hierarchy = window.layout_.grouping.hierarchy
    layer = next(k for k in _boxes(window, "group") if hierarchy.groups[k].title == "layer_1")
    members = hierarchy.members(layer)
    window.canvas.center_on(layer)
    qtbot.mouseClick(window.canvas.viewport(), Qt.MouseButton.LeftButton,
                     pos=window.canvas.mapFromScene(window.canvas.box_rect(layer).center()))
    assert window.canvas.selected_key() == layer
    assert "4 nodes" in window.properties.info_labels["Op"].text()
    assert window.actions_.delete.isEnabled()
    before = len(window.document.graph.nodes)
    expanded = window.layout_.expanded
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        window.actions_.delete.trigger()
    graph = window.document.graph
    assert len(graph.nodes) == before - len(members)
    assert not window.document.problems
    assert window.layout_.expanded == expanded - {layer}  # the others stay open
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        window.document.undo_stack.undo()
    assert len(window.document.graph.nodes) == before


def test_vww_int8_opens_with_qdq_units_closed(qtbot):
    window = make_window(qtbot, shared_models() / "onnx" / "vww_96_int8.onnx")
    graph = window.document.graph
    nodes, groups = _boxes(window, "node"), _boxes(window, "group")
    assert len(graph.nodes) == 176
    assert len(nodes) + len(groups) < 40
    ops = {graph.node(k).op for k in nodes}
    assert "DequantizeLinear" not in ops and "QuantizeLinear" not in ops
    hierarchy = window.layout_.grouping.hierarchy
    pair = next(k for k in groups if hierarchy.groups[k].kind == "separable")
    _double_click(qtbot, window, pair)
    units = [k for k in _boxes(window, "group") if hierarchy.parent[k] == pair]
    assert [hierarchy.groups[u].title for u in units] == ["Conv+Relu int8"] * 2
    _double_click(qtbot, window, units[0])
    inside = [graph.node(k).op for k in _boxes(window, "node") if k in hierarchy.members(units[0])]
    assert sorted(inside) == ["Conv", "DequantizeLinear", "DequantizeLinear", "DequantizeLinear",
                              "QuantizeLinear", "Relu"]


def test_an_overlay_colours_a_closed_group_with_its_members_sum(qtbot, tmp_path):
    window = make_window(qtbot, _scoped(tmp_path))
    window.grouping.collapse_to(1)
    overlays = window.overlays
    overlays.choose("macs")
    qtbot.waitUntil(lambda: not overlays.is_busy() and overlays.current is not None,
                    timeout=60000)
    layout = window.layout_
    hierarchy = layout.grouping.hierarchy
    closed = [k for k in layout.groups if k in layout.boxes]
    assert closed
    macs = window.macs()
    values = overlays.shown_values()
    painted = window.canvas.overlay()
    for key in closed:
        assert values[key] == sum(macs[n] or 0 for n in hierarchy.members(key)) > 0
        assert key in painted
    # Opening a group repaints: its members now carry their own values.
    opened = closed[0]
    _double_click(qtbot, window, opened)
    members = [k for k in window.layout_.boxes if hierarchy.parent.get(k) == opened]
    valued = [k for k in members if k in overlays.shown_values()]
    assert len(valued) >= 3 and all(k in window.canvas.overlay() for k in valued)


def test_a_model_closed_is_freed(qtbot, tmp_path):
    """Layouts hold their graph weakly and the kept heap is collected at the next load."""
    import gc
    import weakref

    from app.window.workers import running_jobs
    from tests.conftest import SAMPLE_MODEL
    from tests.gui.helpers import open_and_wait

    window = make_window(qtbot, _scoped(tmp_path))
    window.grouping.collapse_all()
    gone = weakref.ref(window.document.graph)
    # The panels' jobs on this model end first: one still running when the next model is
    # kept (a loaded machine) would hold it past that load's collection.
    qtbot.waitUntil(lambda: not running_jobs(), timeout=30000)
    open_and_wait(qtbot, window, SAMPLE_MODEL)
    qtbot.waitUntil(lambda: not running_jobs(), timeout=30000)
    gc.collect()
    if gone() is not None:  # an event in flight held it when the load kept the heap: the
        gc.unfreeze()      # next load collects it, as this does; a real holder keeps it
        gc.collect()
        gc.freeze()
    assert gone() is None, [type(r).__name__ for r in gc.get_referrers(gone())]


def test_a_toggle_while_a_big_graph_is_laid_out_again_waits_for_it(qtbot, tmp_path):
    path = tmp_path / "big.onnx"
    onnx.save(scoped_model(stages=2, blocks=2, layers=30), path)  # 486 nodes: laid out in a job
    window = make_window(qtbot, path)
    hierarchy = window.layout_.grouping.hierarchy
    layer = next(g.id for g in hierarchy.walk() if g.title == "layer_3")
    window.canvas.select(layer if layer in window.layout_.boxes else None)
    with qtbot.waitSignal(window.layoutReady, timeout=30000):
        window.editing._apply(__import__("compiler.edit", fromlist=["delete_nodes"]).delete_nodes,
                              "Delete", hierarchy.members(layer))
        # The canvas still shows the old graph: toggling must not lay that out again.
        stale = window.layout_
        assert window.grouping.grouping() is None
        window.grouping.toggle(next(iter(hierarchy.groups)))
        assert window.layout_ is stale
    assert window.layout_.grouping.graph is window.document.graph


def test_an_invalid_node_inside_a_closed_group_marks_the_group(qtbot, tmp_path):
    window = make_window(qtbot, _scoped(tmp_path))
    window.grouping.collapse_all()
    with qtbot.waitSignal(window.layoutReady, timeout=10000):
        window.document.apply(__import__("compiler.edit", fromlist=["set_input_shape"])
                              .set_input_shape, "Shape", "x", (1, 5))
    problems = window.document.problems
    hierarchy = window.layout_.grouping.hierarchy
    invalid = min(problems, key=[n.id for n in window.document.graph.nodes].index)
    stage = hierarchy.ancestors(invalid)[0]
    items = window.canvas._boxes
    assert items[stage].problem.startswith("inside: ")
    marked = {hierarchy.ancestors(n)[0] for n in problems}
    assert all(bool(items[k].problem) == (k in marked) for k in window.layout_.groups)


def test_arrow_keys_walk_into_and_out_of_open_groups(qtbot, tmp_path):
    window = make_window(qtbot, _scoped(tmp_path))
    window.grouping.collapse_to(1)  # stages open, their blocks closed
    layout = window.layout_
    hierarchy = layout.grouping.hierarchy
    stages = [k for k in hierarchy.top if isinstance(k, str)]
    last_block = hierarchy.groups[stages[0]].children[-1]
    canvas = window.canvas
    canvas.select(last_block)  # the end of stage 0
    canvas.setFocus()
    qtbot.keyClick(canvas, Qt.Key.Key_Down)  # into stage 1: its input pill
    pill = canvas.selected_key()
    assert isinstance(pill, str) and pill.startswith("port:") and pill.endswith(stages[1])
    qtbot.keyClick(canvas, Qt.Key.Key_Down)  # its first block
    assert canvas.selected_key() == hierarchy.groups[stages[1]].children[0]
    qtbot.keyClick(canvas, Qt.Key.Key_Up)
    qtbot.keyClick(canvas, Qt.Key.Key_Up)  # back out, to the block that made the value
    assert canvas.selected_key() == last_block
