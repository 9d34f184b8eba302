"""Readable at any size: the quantization table, the overlay, the window's layout, properties.

Each test is one defect a user met: a tensor kept in float lost its row (and the Keep float box
went dead with it), the overlay wrote grey on dark blue and white on teal and only tooltips
told scale and zero point, the canvas and the histogram were strips at the default and at
800x600 windows, a TFLite convolution's one output row hid behind a scroll bar, and a new
model opened at the previous one's zoom with its overlay.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QWidget

from app.quant.calibrate_dialog import CalibrationRequest
from compiler.quant.calibration_data import Normalization
from tests.conftest import shared_models
from tests.gui.helpers import click_row, copy_sample, make_window, node_id, open_and_wait
from views.graph_items import BoxItem, EdgeItem
from views.labels import NodeLabel
from views.layout import Box
from views.quant_colors import SQNR_BINS

TIMEOUT = 120000
MIN_CONTRAST = 4.5  # WCAG 2 AA for normal text


def _luminance(color: str) -> float:
    """WCAG 2 relative luminance of #rrggbb (computed here, not taken from the code tested)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(color[i:i + 2], 16) / 255) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _calibrated(qtbot, window):
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    return quant


def _cell(panel, tensor, column):
    index = panel.model.index(panel.model.row_of(tensor), column)
    return panel.model.data(index)


def test_keep_float_keeps_the_row_and_unticks_again(qtbot):
    window = make_window(qtbot)
    quant = _calibrated(qtbot, window)
    panel = quant.panel
    click_row(qtbot, panel, "relu1_out")
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        qtbot.mouseClick(panel.keep_float, Qt.MouseButton.LeftButton)
    assert "relu1_out" in quant.session.profile.keep_float
    row = panel.model.row_of("relu1_out")
    assert row is not None, "the row went with Keep float"
    assert _cell(panel, "relu1_out", 4) == "float"  # Scale: no int8 scale for a float tensor
    assert panel.selected_tensor() == "relu1_out" and panel.keep_float.isChecked()
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        qtbot.mouseClick(panel.keep_float, Qt.MouseButton.LeftButton)  # the box unticks it
    assert "relu1_out" not in quant.session.profile.keep_float
    assert _cell(panel, "relu1_out", 4) != "float" and not panel.keep_float.isChecked()


def _overlay_box(kind: str, fill: str, text: str) -> BoxItem:
    label = NodeLabel("Conv", ["kernel 3×3", "W float32[8,1,3,3]", "float32[1,8,8,8]"])
    item = BoxItem(0 if kind == "node" else f"{kind}:x", kind, Box(0, 0, 160, 80), label,
                   "conv")
    item.set_state(overlay=(fill, text))
    return item


def test_overlay_text_has_contrast_on_every_colour_it_paints(qtbot):
    """Every text the overlay paints, on every fill it paints it on: 4.5:1 at least."""
    from views.quant_colors import EDGE_LABEL_FILL, EDGE_LABEL_TEXT

    pairs = []
    for _, fill, text in SQNR_BINS:
        pairs.append(("legend chip", fill, text))  # the panel's legend: text on the bin colour
        for kind in ("node", "in", "out"):
            item = _overlay_box(kind, fill, text)
            head, body, _, title = item._colors()
            line, muted = item.line_colors()
            if kind == "node":
                pairs.append((f"{kind} title", head.name(), title.name()))
            else:  # a pill's name is written on its body
                pairs.append((f"{kind} name", body.name(), line.name()))
            pairs.append((f"{kind} lines", body.name(), line.name()))
            pairs.append((f"{kind} shapes and attribute names", body.name(), muted.name()))
    pairs.append(("edge label", EDGE_LABEL_FILL, EDGE_LABEL_TEXT))
    low = [(what, fill, text, round(contrast(fill, text), 2)) for what, fill, text in pairs
           if contrast(fill, text) < MIN_CONTRAST]
    assert not low, low
    assert contrast("#ffffff", "#000000") > 20.9 and contrast("#777777", "#777777") == 1.0


def test_the_overlay_writes_scale_and_zero_point_on_the_edges(qtbot):
    window = make_window(qtbot)
    quant = _calibrated(qtbot, window)
    canvas = window.canvas
    assert canvas.edge_labels() == {}
    qtbot.mouseClick(quant.panel.overlay, Qt.MouseButton.LeftButton)
    labels = canvas.edge_labels()
    tensors = quant.session.evaluation.tensors
    relu = tensors["relu1_out"]
    assert labels["relu1_out"] == f"scale {relu.scale:.4g} · zp {relu.zero_point}"
    edges = [e for e in canvas.scene().items() if isinstance(e, EdgeItem) and e.label]
    assert {e.value for e in edges} == set(labels) <= set(tensors) and len(labels) >= 5
    edge = next(e for e in edges if e.value == "relu1_out")
    assert edge.boundingRect().contains(edge.label_rect())  # repainted where it is drawn
    qtbot.mouseClick(quant.panel.overlay, Qt.MouseButton.LeftButton)
    assert canvas.edge_labels() == {}


def _resize(qtbot, window, width: int, height: int) -> None:
    window.resize(width, height)
    qtbot.waitUntil(lambda: window.size() == QSize(width, height), timeout=5000)
    qtbot.wait(10)  # the docks take their sizes after the resize event
    qtbot.waitUntil(lambda: not window.dock_sizes.busy(), timeout=5000)


def _visible(widget: QWidget) -> QRect:
    """The part of `widget` its ancestors (scroll areas, docks, the window) leave on screen."""
    rect = QRect(widget.mapTo(widget.window(), QPoint(0, 0)), widget.size())
    parent = widget.parentWidget()
    while parent is not None and parent is not widget.window():
        rect &= QRect(parent.mapTo(widget.window(), QPoint(0, 0)), parent.size())
        parent = parent.parentWidget()
    return rect & widget.window().rect()


def _calibrated_window(qtbot):
    window = make_window(qtbot)
    _resize(qtbot, window, 1400, 900)
    quant = _calibrated(qtbot, window)
    quant.show_tensor("relu1_out")
    qtbot.wait(100)
    # The dock shown by the calibration takes its size once the window has laid it out.
    qtbot.waitUntil(lambda: not window.dock_sizes.busy(), timeout=5000)
    return window, quant


def test_the_default_window_gives_the_canvas_and_the_histogram_room(qtbot):
    window, quant = _calibrated_window(qtbot)
    canvas = _visible(window.canvas)
    assert canvas.width() >= 0.4 * window.width(), canvas
    histogram = _visible(quant.panel.histogram)
    assert histogram.height() >= 120, histogram


def test_800x600_is_usable_and_enlarging_again_restores_the_layout(qtbot):
    window, quant = _calibrated_window(qtbot)
    before = {"canvas": window.canvas.size(), "quantization": quant.dock.size(),
              "memory": window.memory.dock.size(), "palette": window.docks["palette"].size()}
    _resize(qtbot, window, 800, 600)
    canvas = _visible(window.canvas)
    assert canvas.width() >= 0.35 * 800 and canvas.height() >= 0.45 * 600, canvas
    _resize(qtbot, window, 1400, 900)
    after = {"canvas": window.canvas.size(), "quantization": quant.dock.size(),
             "memory": window.memory.dock.size(), "palette": window.docks["palette"].size()}
    for name, size in before.items():
        got = after[name]
        assert abs(got.width() - size.width()) <= 4 and abs(got.height() - size.height()) <= 4, \
            (name, size, got)


def test_a_dragged_separator_is_kept_through_a_small_window(qtbot):
    window = make_window(qtbot)
    _resize(qtbot, window, 1400, 900)
    dock = window.docks["properties"]
    width = dock.width()
    x, y = dock.geometry().left() - 3, dock.geometry().center().y()  # the separator
    qtbot.mousePress(window, Qt.MouseButton.LeftButton, pos=QPoint(x, y))
    for step in range(1, 7):  # Qt moves a separator on a timer: let it run between moves
        qtbot.mouseMove(window, QPoint(x - 20 * step, y))
        qtbot.wait(20)
    qtbot.mouseRelease(window, Qt.MouseButton.LeftButton, pos=QPoint(x - 120, y))
    qtbot.wait(10)
    qtbot.waitUntil(lambda: not window.dock_sizes.busy(), timeout=5000)
    assert abs(dock.width() - (width + 120)) <= 4  # the user's width, canvas share or not
    _resize(qtbot, window, 800, 600)
    assert dock.width() < width
    _resize(qtbot, window, 1400, 900)
    assert abs(dock.width() - (width + 120)) <= 4


def test_a_tflite_conv_2d_shows_every_property_row(qtbot):
    window = make_window(qtbot, shared_models() / "tflite" / "kws_ref_model.tflite")
    convs = [n for n in window.document.graph.nodes if "CONV_2D" in n.name]
    assert len(convs) >= 5
    properties = window.properties
    scroll = properties.page.parentWidget()  # the page's viewport in the panel's scroll area
    for node in convs:
        window.select_and_center(node.id)
        qtbot.wait(10)
        assert properties.current_node_id() == node.id
        for table in (properties.outputs, properties.inputs, properties.attributes):
            assert table.isVisible() and table.rowCount() > 0, node.name
            for row in range(table.rowCount()):
                rect = table.visualRect(table.model().index(row, 0))
                assert rect.bottom() < table.viewport().height(), (node.name, row, table)
            assert not table.horizontalScrollBar().isVisible(), (node.name, table)
        assert properties.page.width() <= scroll.width(), "the page scrolls sideways"


def test_a_new_model_opens_at_its_own_view_with_no_overlay(qtbot, tmp_path):
    window = make_window(qtbot)
    quant = _calibrated(qtbot, window)
    qtbot.mouseClick(quant.panel.overlay, Qt.MouseButton.LeftButton)
    canvas = window.canvas
    canvas.set_zoom(2.0)
    canvas.center_on(node_id(window, "fc"))
    window.open_search()
    window.search_bar.query.setText("relu")
    window.search_bar.search_now()
    assert canvas.overlay() and canvas.highlighted()
    open_and_wait(qtbot, window, copy_sample(tmp_path))  # the same ids: not an edit, though
    zoom, centre = canvas.zoom_level(), canvas.visible_scene_rect().center()
    assert zoom != 2.0
    canvas.reset_view()  # the view any model opens with (the whole graph when readable so)
    assert canvas.zoom_level() == zoom
    moved = canvas.visible_scene_rect().center() - centre
    assert abs(moved.x()) < 2 and abs(moved.y()) < 2
    assert not quant.panel.overlay.isChecked() and canvas.overlay() == {}
    assert canvas.edge_labels() == {} and canvas.highlighted() == set()
    assert not window.search_bar.isVisible()
    _calibrated(qtbot, window)  # calibrating the new model: the overlay stays off
    assert canvas.overlay() == {}
