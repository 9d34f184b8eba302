"""The graph canvas and its minimap, offscreen: items, selection, navigation, problems, zoom."""

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QImage, QMouseEvent, QPainter, QWheelEvent
from PySide6.QtWidgets import QApplication

from compiler.frontends.onnx import load_onnx
from tests.views.graphs import DENSENET, SAMPLE, diamond
from views import canvas as canvas_module
from views.canvas import GraphCanvas
from views.graph_items import BoxItem, EdgeItem
from views.layout import compute_layout
from views.minimap import MiniMap


@pytest.fixture(scope="module")
def sample():
    return load_onnx(SAMPLE)


@pytest.fixture(scope="module")
def densenet():
    return load_onnx(DENSENET)


def _make_canvas(qtbot, graph, show_constants=False, size=(800, 600)) -> GraphCanvas:
    canvas = GraphCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(*size)
    canvas.show()
    canvas.set_graph(graph, compute_layout(graph, show_constants=show_constants))
    return canvas


def _items(canvas, kind):
    return [i for i in canvas.scene().items() if isinstance(i, kind)]


def _view_pos(canvas: GraphCanvas, scene_point: QPointF) -> QPoint:
    return canvas.mapFromScene(scene_point)


def _box_center(canvas, key) -> QPoint:
    return _view_pos(canvas, canvas.box_rect(key).center())


def _render(canvas: GraphCanvas) -> QImage:
    image = QImage(canvas.viewport().size(), QImage.Format.Format_ARGB32)
    image.fill(0)
    painter = QPainter(image)
    canvas.render(painter)
    painter.end()
    return image


def test_set_graph_creates_a_box_per_node_input_output_and_an_item_per_edge(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    assert len(_items(canvas, BoxItem)) == len(sample.nodes) + 2
    assert len(_items(canvas, EdgeItem)) == 10
    shown = _make_canvas(qtbot, sample, show_constants=True)
    assert len(_items(shown, BoxItem)) == len(sample.nodes) + 2 + len(sample.constants)
    assert len(_items(shown, EdgeItem)) == 10 + len(sample.constants)


def test_densenet_scene_matches_its_layout(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet)
    layout = canvas.graph_layout()
    assert len(_items(canvas, BoxItem)) == len(densenet.nodes) + 2 == len(layout.boxes)
    assert len(_items(canvas, EdgeItem)) == len(layout.edges)
    # Opened at a readable zoom at the top of the graph, not shrunk to an unreadable strip.
    assert canvas.zoom_level() >= 0.5
    assert canvas.visible_scene_rect().contains(canvas.box_rect("in:data_0"))


def test_set_graph_none_empties_the_scene(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    canvas.select(0)
    with qtbot.waitSignal(canvas.nodeSelected) as blocker:
        canvas.set_graph(None, None)
    assert blocker.args == [None]
    assert canvas.scene().items() == [] and canvas.selected_key() is None


def test_select_marks_the_box_and_its_edges_and_emits_once(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    with qtbot.waitSignal(canvas.nodeSelected) as blocker:
        canvas.select(2)
    assert blocker.args == [2]
    assert canvas.selected_key() == 2
    box = next(i for i in _items(canvas, BoxItem) if i.key == 2)
    assert box.selected
    assert {(e.src, e.dst) for e in _items(canvas, EdgeItem) if e.active} == {(1, 2), (2, 3)}
    with qtbot.assertNotEmitted(canvas.nodeSelected):
        canvas.select(2)
    canvas.select("no such key")
    assert canvas.selected_key() is None and not box.selected


def test_clicks_select_a_node_an_edge_or_nothing(qtbot, sample):
    canvas = _make_canvas(qtbot, sample, size=(600, 1300))
    with qtbot.waitSignal(canvas.nodeSelected) as blocker:
        qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                         pos=_box_center(canvas, 4))
    assert blocker.args == [4]
    edge = next(e for e in canvas.graph_layout().edges if e.src == 4)
    (x0, y0), (x1, y1) = edge.points[0], edge.points[-1]
    with qtbot.waitSignal(canvas.edgeSelected) as blocker:
        qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                         pos=_view_pos(canvas, QPointF((x0 + x1) / 2, (y0 + y1) / 2)))
    assert blocker.args == ["pool1_out"]
    assert canvas.selected_edge() == "pool1_out" and canvas.selected_key() is None
    with qtbot.waitSignal(canvas.nodeSelected) as blocker:
        canvas.select(4)
    with qtbot.waitSignal(canvas.nodeSelected) as blocker:
        qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    assert blocker.args == [None]


def test_double_click_activates(qtbot, sample):
    canvas = _make_canvas(qtbot, sample, size=(600, 1300))
    with qtbot.waitSignal(canvas.nodeActivated) as blocker:
        qtbot.mouseDClick(canvas.viewport(), Qt.MouseButton.LeftButton,
                          pos=_box_center(canvas, 0))
    assert blocker.args == [0]


def test_drag_pans_without_selecting(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet)
    bar = canvas.verticalScrollBar()
    before = bar.value()
    start = QPointF(400, 400)
    press = QMouseEvent(QEvent.Type.MouseButtonPress, start, start, Qt.MouseButton.LeftButton,
                        Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(canvas.viewport(), press)
    end = QPointF(400, 200)
    move = QMouseEvent(QEvent.Type.MouseMove, end, end, Qt.MouseButton.NoButton,
                       Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(canvas.viewport(), move)
    with qtbot.assertNotEmitted(canvas.nodeSelected):
        release = QMouseEvent(QEvent.Type.MouseButtonRelease, end, end,
                              Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton,
                              Qt.KeyboardModifier.NoModifier)
        QApplication.sendEvent(canvas.viewport(), release)
    assert bar.value() == before + 200


def test_arrow_keys_walk_producers_and_consumers(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    canvas.select(0)
    qtbot.keyClick(canvas, Qt.Key.Key_Down)
    assert canvas.selected_key() == 1
    qtbot.keyClick(canvas, Qt.Key.Key_Down)
    assert canvas.selected_key() == 2
    qtbot.keyClick(canvas, Qt.Key.Key_Up)
    assert canvas.selected_key() == 1
    canvas.select(8)
    qtbot.keyClick(canvas, Qt.Key.Key_Down)
    assert canvas.selected_key() == "out:logits"
    qtbot.keyClick(canvas, Qt.Key.Key_Down)  # nothing below the output: stays
    assert canvas.selected_key() == "out:logits"
    canvas.select(0)
    qtbot.keyClick(canvas, Qt.Key.Key_Up)
    assert canvas.selected_key() == "in:image"
    with qtbot.waitSignal(canvas.nodeActivated) as blocker:
        qtbot.keyClick(canvas, Qt.Key.Key_Return)
    assert blocker.args == ["in:image"]
    qtbot.keyClick(canvas, Qt.Key.Key_Escape)
    assert canvas.selected_key() is None


def test_left_and_right_move_between_siblings(qtbot):
    graph = diamond()  # ids: a=0, b=1 (Sigmoid), c=2 (Tanh), d=3, e=4 (Add), f=5
    canvas = _make_canvas(qtbot, graph)
    x = {k: canvas.box_rect(k).center().x() for k in (1, 2)}
    left, right = sorted((1, 2), key=x.get)
    canvas.select(0)
    qtbot.keyClick(canvas, Qt.Key.Key_Down)
    first = canvas.selected_key()
    assert first in (1, 2)
    other = right if first == left else left
    qtbot.keyClick(canvas, Qt.Key.Key_Right if first == left else Qt.Key.Key_Left)
    assert canvas.selected_key() == other  # the other consumer of a
    # Up from the Add, then sideways: the Add's other input.
    canvas.select(4)
    qtbot.keyClick(canvas, Qt.Key.Key_Up)
    came = canvas.selected_key()
    assert came in (1, 3)
    key = Qt.Key.Key_Right if canvas.neighbour(came, "right") is not None else Qt.Key.Key_Left
    qtbot.keyClick(canvas, key)
    assert canvas.selected_key() == ({1, 3} - {came}).pop()
    qtbot.keyClick(canvas, Qt.Key.Key_Down)
    assert canvas.selected_key() == 4  # back where we came from


def test_arrow_with_nothing_selected_selects_the_top(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    qtbot.keyClick(canvas, Qt.Key.Key_Down)
    assert canvas.selected_key() == "in:image"


def test_set_problems_turns_a_node_red_with_the_reason_in_its_tooltip(qtbot, sample):
    canvas = _make_canvas(qtbot, sample, size=(600, 1300))
    canvas.set_zoom(1.0)
    canvas.center_on(5)
    reason = "Conv: input has 16 channels, the weights expect 8"
    canvas.set_problems({5: reason})
    box = next(i for i in _items(canvas, BoxItem) if i.key == 5)
    assert box.problem == reason
    assert reason in box.toolTip()
    image = _render(canvas)
    header = _view_pos(canvas, canvas.box_rect(5).topLeft() + QPointF(8, 4))
    pixel = image.pixelColor(header)
    assert pixel.red() > 180 and pixel.green() < 90 and pixel.blue() < 90
    canvas.set_problems({})
    assert box.problem is None and reason not in box.toolTip()
    assert canvas.problems() == {}


def test_problems_survive_a_new_layout_of_the_same_graph(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    canvas.set_problems({3: "bad"})
    canvas.select(3)
    copy = sample.snapshot()
    canvas.set_graph(copy, compute_layout(copy))
    box = next(i for i in _items(canvas, BoxItem) if i.key == 3)
    assert box.problem == "bad" and canvas.selected_key() == 3


def test_highlight_marks_matches(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    with qtbot.waitSignal(canvas.overviewChanged):
        canvas.set_highlight([1, 3, 6])
    assert canvas.highlighted() == {1, 3, 6}
    assert {i.key for i in _items(canvas, BoxItem) if i.highlighted} == {1, 3, 6}
    canvas.set_highlight([])
    assert not any(i.highlighted for i in _items(canvas, BoxItem))


def test_fit_zoom_in_out_and_limits(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet)
    canvas.fit()
    visible = canvas.visible_scene_rect()
    scene = canvas.scene().sceneRect()
    assert visible.height() >= scene.height() - 1 and visible.width() >= scene.width() - 1
    fit = canvas.zoom_level()
    canvas.zoom_in()
    assert canvas.zoom_level() == pytest.approx(fit * canvas_module.ZOOM_STEP)
    canvas.zoom_out()
    assert canvas.zoom_level() == pytest.approx(fit)
    for _ in range(60):
        canvas.zoom_in()
    assert canvas.zoom_level() == pytest.approx(canvas_module.MAX_ZOOM)


def test_fit_does_not_blow_up_a_small_graph(qtbot):
    # Six nodes (606 px tall at 1:1) in a window bigger than they need, inside any test screen.
    canvas = _make_canvas(qtbot, diamond(), size=(760, 760))
    canvas.fit()
    assert canvas.zoom_level() == pytest.approx(1.0)


def test_wheel_zooms_around_the_cursor(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet)
    canvas.set_zoom(1.0)
    pos = QPointF(300, 200)
    under = canvas.mapToScene(pos.toPoint())
    event = QWheelEvent(pos, canvas.mapToGlobal(pos), QPoint(0, 0), QPoint(0, 120),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier,
                        Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(canvas.viewport(), event)
    assert canvas.zoom_level() == pytest.approx(canvas_module.ZOOM_STEP)
    after = canvas.mapToScene(pos.toPoint())
    assert abs(after.x() - under.x()) < 3 and abs(after.y() - under.y()) < 3


def test_center_on_brings_a_far_node_into_the_middle(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet)
    canvas.fit()
    last = densenet.nodes[len(densenet.nodes) // 3].id
    canvas.center_on(last)
    assert canvas.zoom_level() >= canvas_module.READABLE_ZOOM - 1e-9  # readable, not a dot
    centre = canvas.visible_scene_rect().center()
    target = canvas.box_rect(last).center()
    assert abs(centre.x() - target.x()) < 2 and abs(centre.y() - target.y()) < 2


def test_edge_and_node_tooltips(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    edge = next(e for e in _items(canvas, EdgeItem) if e.value == "conv1_out")
    assert "conv1_out" in edge.toolTip()
    assert "float32 [1×8×8×8]" in edge.toolTip()
    box = next(i for i in _items(canvas, BoxItem) if i.key == 0)
    assert "conv1" in box.toolTip() and "Conv" in box.toolTip()
    pill = next(i for i in _items(canvas, BoxItem) if i.key == "in:image")
    assert "graph input" in pill.toolTip() and "float32[1,1,8,8]" in pill.toolTip()


def test_renders_at_every_level_of_detail(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet)
    for zoom in (0.01, 0.2, 0.5, 1.0, 2.5):
        canvas.set_zoom(zoom)
        image = _render(canvas)
        assert not image.isNull()
        # Something besides the background is drawn at every zoom.
        background = image.pixelColor(0, 0)
        w, h = image.width(), image.height()
        colours = {image.pixelColor(x, y).name() for x in range(0, w, 7) for y in range(0, h, 7)}
        assert len(colours - {background.name()}) > 3


def test_minimap_click_recentres_the_canvas(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet)
    minimap = MiniMap(canvas)
    qtbot.addWidget(minimap)
    minimap.resize(200, 400)
    minimap.show()
    qtbot.wait(100)  # the debounced redraw
    target = canvas.box_rect(densenet.nodes[len(densenet.nodes) // 2].id).center()
    point = minimap.scene_to_widget().map(target)
    with qtbot.waitSignal(canvas.viewportChanged):
        qtbot.mouseClick(minimap, Qt.MouseButton.LeftButton, pos=point.toPoint())
    centre = canvas.visible_scene_rect().center()
    tolerance = 2.0 / minimap.scene_to_widget().m11()  # a minimap pixel in scene units
    assert abs(centre.y() - target.y()) < tolerance
    image = minimap.grab().toImage()
    assert not image.isNull()


def test_minimap_redraws_when_the_canvas_changes(qtbot, sample):
    canvas = _make_canvas(qtbot, sample)
    minimap = MiniMap(canvas)
    qtbot.addWidget(minimap)
    minimap.resize(150, 300)
    minimap.show()
    before = minimap.grab().toImage()
    canvas.set_problems({n.id: "bad" for n in sample.nodes})
    qtbot.wait(150)
    after = minimap.grab().toImage()
    assert before != after


def test_the_opening_view_follows_a_resize_until_the_user_moves_it(qtbot, densenet):
    canvas = _make_canvas(qtbot, densenet, size=(700, 500))
    canvas.resize(560, 420)  # the docks settle after the model opened
    qtbot.wait(20)
    opened = (canvas.zoom_level(), canvas.visible_scene_rect().center())
    canvas.reset_view()  # what a model opens with at this size
    assert canvas.zoom_level() == opened[0]
    moved = canvas.visible_scene_rect().center() - opened[1]
    assert abs(moved.x()) < 2 and abs(moved.y()) < 2
    canvas.set_zoom(1.5)  # the user zooms: a resize keeps the user's view
    canvas.resize(600, 460)
    qtbot.wait(20)
    assert canvas.zoom_level() == pytest.approx(1.5)
