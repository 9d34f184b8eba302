"""views.vector_export on a bare canvas: regions, text kept as text, and one-sentence refusals."""

import xml.etree.ElementTree as ET

import pytest
from PySide6.QtCore import QSizeF
from PySide6.QtWidgets import QGraphicsItem

from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from tests.views.graphs import SAMPLE
from views import vector_export as ve
from views.canvas import GraphCanvas
from views.graph_items import BoxItem
from views.layout import compute_layout


@pytest.fixture
def canvas(qtbot):
    canvas = GraphCanvas()
    qtbot.addWidget(canvas)
    canvas.resize(800, 600)
    canvas.show()
    graph = load_onnx(SAMPLE)
    canvas.set_graph(graph, compute_layout(graph))
    return canvas


def _picture(canvas, keys=None):
    return ve.scene_picture(canvas.scene(), ve.canvas_region(canvas, keys),
                            canvas.backgroundBrush().color(), "sample")


def test_a_group_is_its_boxes_and_a_margin(canvas):
    first, second = list(canvas.graph_layout().boxes)[1:3]
    region = ve.canvas_region(canvas, [first, second, "no such key"], margin=10)
    union = canvas.box_rect(first).united(canvas.box_rect(second))
    assert region == union.adjusted(-10, -10, 10, 10)
    with pytest.raises(KilnError, match="none of the nodes to export is on the canvas"):
        ve.canvas_region(canvas, ["no such key"])


def test_cached_boxes_are_drawn_as_text_and_stay_cached(canvas):
    canvas.set_zoom(1.0)  # zoomed in: boxes cache their pictures as pixmaps
    boxes = [i for i in canvas.scene().items() if isinstance(i, BoxItem)]
    assert {b.cacheMode() for b in boxes} == {QGraphicsItem.CacheMode.DeviceCoordinateCache}
    svg = ve.svg_bytes(_picture(canvas))
    root = ET.fromstring(svg)
    texts = {"".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {label.title for label in canvas.graph_layout().labels.values()} <= texts
    assert b"<image" not in svg and b'font-family="Sans Serif"' not in svg
    assert {b.cacheMode() for b in boxes} == {QGraphicsItem.CacheMode.DeviceCoordinateCache}


def test_png_size_follows_the_scale(canvas):
    picture = _picture(canvas)
    image = ve.png_image(picture, 3.0)
    assert (image.width(), image.height()) == (round(picture.size.width() * 3),
                                               round(picture.size.height() * 3))


def test_refusals_are_one_sentence(canvas, tmp_path):
    picture = _picture(canvas)
    with pytest.raises(KilnError, match=r"^graph.pdf: a picture is saved as .svg or .png$"):
        ve.write_picture(picture, tmp_path / "graph.pdf")
    with pytest.raises(KilnError, match="^a PNG scale must be between 1 and 4, not 8$"):
        ve.png_image(picture, 8.0)
    huge = ve.Picture(QSizeF(20000, 20000), picture.draw, "huge")
    with pytest.raises(KilnError, match="choose a smaller scale or export SVG"):
        ve.png_image(huge, 1.0)
    with pytest.raises(KilnError, match="^cannot write .*missing.*: No such file or directory$"):
        ve.write_picture(picture, tmp_path / "missing" / "graph.svg")


def test_writing_replaces_the_file_whole(canvas, tmp_path):
    path = tmp_path / "graph.png"
    path.write_bytes(b"old")
    ve.write_picture(_picture(canvas), path, 2.0)
    assert path.read_bytes().startswith(b"\x89PNG") and list(tmp_path.iterdir()) == [path]
