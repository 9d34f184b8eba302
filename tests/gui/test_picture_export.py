"""File > Export Picture…: SVG keeps every label as text at its place and draws what the PNG does.

The SVG is parsed as XML, each box's label is found among its <text> elements inside that box,
and the SVG drawn by Qt's SVG renderer (and by headless Chromium, where installed) is compared
with the PNG export at the same scale (tests/picture_compare.py says how). A mutated SVG (one
label moved or removed) must fail the same comparison.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QMessageBox

from tests.browser import headless_chromium
from tests.conftest import shared_models
from tests.gui.helpers import click_box, make_window
from tests.picture_compare import (
    Text,
    chromium_render,
    difference,
    qt_render,
    svg_texts,
    view_box,
)
from views.vector_export import MARGIN


def _export(qtbot, window, subject: str, fmt: str, path: Path, scale: float = 2.0) -> str:
    """Open File > Export Picture…, fill in the dialog and click Export; returns its message."""
    file_menu = next(a.menu() for a in window.menuBar().actions()
                     if a.text().replace("&", "") == "File")
    action = window.picture.action
    assert action in file_menu.actions() and action.isEnabled()
    action.trigger()
    dialog = window.picture.dialog
    assert dialog.isVisible()
    dialog.subject.setCurrentIndex(dialog.subject.findData(subject))
    assert dialog.subject.currentData() == subject  # (an unavailable subject is not chosen)
    dialog.format.setCurrentIndex(dialog.format.findData(fmt))
    assert dialog.scale.isEnabled() == (fmt == "png")
    if fmt == "png":
        dialog.scale.setValue(scale)
    dialog.path.clear()
    qtbot.keyClicks(dialog.path, str(path))
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    return dialog.message.text()


def _canvas_pair(qtbot, window, tmp_path: Path, subject: str = "canvas", scale: float = 2.0):
    svg_path, png_path = tmp_path / f"{subject}.svg", tmp_path / f"{subject}.png"
    note = _export(qtbot, window, subject, "svg", svg_path)
    assert note.startswith(f"Wrote {svg_path.name} ("), note
    note = _export(qtbot, window, subject, "png", png_path, scale)
    assert note.startswith(f"Wrote {png_path.name} ("), note
    return svg_path, QImage(str(png_path))


def _unplaced_labels(window, texts: list[Text], origin=(0.0, 0.0)) -> list[str]:
    """Labels of canvas boxes with no <text> of that string inside the box (empty: all placed)."""
    layout = window.canvas.graph_layout()
    missing = []
    for key, box in layout.boxes.items():
        x0, y0 = box.x - origin[0], box.y - origin[1]
        inside = [t.text for t in texts if x0 - 1 <= t.x <= x0 + box.w + 1
                  and y0 - 1 <= t.y <= y0 + box.h + 1]
        label = layout.labels[key]
        for line in (label.title, *label.lines):
            key_text, _, value = line.partition(" ")
            if line not in inside and not (key_text in inside and value in inside):
                missing.append(f"{key}: {line!r}")
    return missing


def _assert_same(png: QImage, drawn: QImage, what: str) -> None:
    diff = difference(png, drawn)
    assert diff.equal_in_content(), f"{what}: {diff}"


def _move_first_title(svg: bytes, dx: float) -> bytes:
    """The SVG with the first <text> moved right by `dx` (a label out of place)."""
    return re.sub(rb'(<text[^>]*? x=")([-0-9.]+)',
                  lambda m: m.group(1) + str(float(m.group(2)) + dx).encode(), svg, count=1)


def _check_canvas(qtbot, window, tmp_path: Path, scale: float) -> tuple[Path, QImage]:
    svg_path, png = _canvas_pair(qtbot, window, tmp_path, scale=scale)
    svg = svg_path.read_bytes()
    texts = svg_texts(svg)
    assert b"<image" not in svg  # nothing drawn as a bitmap: the boxes' text included
    assert _unplaced_labels(window, texts) == []
    region = window.canvas.scene().itemsBoundingRect().united(window.canvas.sceneRect())
    assert view_box(svg) == (0, 0, region.width(), region.height())
    assert (png.width(), png.height()) == (math.ceil(region.width() * scale),
                                           math.ceil(region.height() * scale))
    _assert_same(png, qt_render(svg, png.size()), "Qt's SVG renderer")
    return svg_path, png


def test_canvas_svg_keeps_text_and_draws_the_png(qtbot, tmp_path):
    window = make_window(qtbot)
    svg_path, png = _check_canvas(qtbot, window, tmp_path, 2.0)
    svg = svg_path.read_bytes()
    # The checks can fail: the pictures differ with a label moved by 8 px; a label moved out
    # of its box is not placed; a label removed fails both.
    moved = _move_first_title(svg, 8.0)
    assert not difference(png, qt_render(moved, png.size())).equal_in_content()
    assert _unplaced_labels(window, svg_texts(_move_first_title(svg, 300.0))) != []
    removed = re.sub(rb"<text[^>]*>[^<]*</text>", b"", svg, count=1)
    assert not difference(png, qt_render(removed, png.size())).equal_in_content()
    assert _unplaced_labels(window, svg_texts(removed)) != []
    one_digit = re.sub(rb"<text[^>]*>1</text>", b"", svg, count=1)  # "pads 1" loses its 1
    assert one_digit != svg and _unplaced_labels(window, svg_texts(one_digit)) != []


def test_real_model_canvas_svg(qtbot, tmp_path):
    model = shared_models() / "onnx" / "kws_ref_model.onnx"
    window = make_window(qtbot, model)
    _check_canvas(qtbot, window, tmp_path, 2.0)


@pytest.fixture(scope="module")
def chromium():
    """Headless Debian Chromium through Selenium (skipped, with the reason, when absent)."""
    driver = headless_chromium("browser checks of exported SVG")
    yield driver
    driver.quit()


@pytest.mark.parametrize("real", [False, True], ids=["sample", "kws"])
def test_chromium_draws_the_svg_as_the_png(qtbot, tmp_path, chromium, real):
    model = shared_models() / "onnx" / "kws_ref_model.onnx" if real else None
    window = make_window(qtbot, model) if real else make_window(qtbot)
    svg_path, png = _canvas_pair(qtbot, window, tmp_path, scale=2.0)
    _assert_same(png, chromium_render(chromium, svg_path, png.size()), "Chromium")
    if real:
        return  # (the mutation below is the sample's: it shows the comparison can fail)
    moved = tmp_path / "moved.svg"
    moved.write_bytes(_move_first_title(svg_path.read_bytes(), 8.0))
    assert not difference(png, chromium_render(chromium, moved, png.size())).equal_in_content()


def test_selected_node_picture_is_its_box(qtbot, tmp_path):
    window = make_window(qtbot)
    dialog = window.picture.open_dialog()
    row = dialog.subject.findData("selection")
    assert not dialog.subject.model().item(row).isEnabled()  # nothing selected yet
    node = next(n for n in window.document.graph.nodes if n.op == "Conv")
    click_box(qtbot, window, node.id)
    assert dialog.subject.model().item(row).isEnabled()  # the open dialog follows the canvas
    svg_path, png = _canvas_pair(qtbot, window, tmp_path, subject="selection", scale=3.0)
    svg = svg_path.read_bytes()
    box = window.canvas.box_rect(node.id)
    assert view_box(svg) == (0, 0, box.width() + 2 * MARGIN, box.height() + 2 * MARGIN)
    texts = svg_texts(svg)
    label = window.canvas.graph_layout().labels[node.id]
    inside = [t.text for t in texts if MARGIN <= t.x <= MARGIN + box.width()
              and MARGIN <= t.y <= MARGIN + box.height()]
    assert label.title in inside
    _assert_same(png, qt_render(svg, png.size()), "Qt's SVG renderer")


def _export_bundle(qtbot, window, folder: Path) -> dict:
    """Export the model for the host through File > Export Bundle's controller; its report."""
    from views.export_dialog import ExportOptions

    job = window.export.start(ExportOptions("host", None, "net", "embedded", False, folder))
    with qtbot.waitSignal(job.succeeded, timeout=120000):
        pass
    return window.export.last.report


def test_timeline_and_size_report_pictures(qtbot, tmp_path):
    window = make_window(qtbot)
    qtbot.waitUntil(lambda: bool(window.memory.timeline.bars), timeout=60000)
    report = _export_bundle(qtbot, window, tmp_path / "bundle")
    timeline_svg, timeline_png = tmp_path / "timeline.svg", tmp_path / "timeline.png"
    assert _export(qtbot, window, "timeline", "svg", timeline_svg).startswith("Wrote")
    assert _export(qtbot, window, "timeline", "png", timeline_png, 2.0).startswith("Wrote")
    strings = {t.text for t in svg_texts(timeline_svg.read_bytes())}
    peak = window.memory.timeline.peak_step()
    assert {"schedule step", "arena offset", "live bytes"} <= strings
    assert any(s.startswith("peak ") and s.endswith(f"at step {peak}") for s in strings)
    png = QImage(str(timeline_png))
    _assert_same(png, qt_render(timeline_svg.read_bytes(), png.size()), "timeline")

    report_svg, report_png = tmp_path / "report.svg", tmp_path / "report.png"
    assert _export(qtbot, window, "size_report", "svg", report_svg).startswith("Wrote")
    assert _export(qtbot, window, "size_report", "png", report_png, 2.0).startswith("Wrote")
    strings = {t.text for t in svg_texts(report_svg.read_bytes())}
    layer_names = {", ".join(layer["nodes"]) or layer["symbol"] for layer in report["layers"]}
    assert {"Sections and regions", "Per layer: weights and MACs", report["target"]} <= strings
    assert layer_names <= strings
    png = QImage(str(report_png))
    _assert_same(png, qt_render(report_svg.read_bytes(), png.size()), "size report")


def test_size_report_needs_an_exported_bundle(qtbot):
    window = make_window(qtbot)
    window.picture.action.trigger()
    dialog = window.picture.dialog
    row = dialog.subject.findData("size_report")
    assert not dialog.subject.model().item(row).isEnabled()
    assert "Export a bundle first" in dialog.subject.itemData(row, Qt.ItemDataRole.ToolTipRole)


def test_replacing_a_picture_asks_first(qtbot, tmp_path, message_boxes):
    window = make_window(qtbot)
    path = tmp_path / "graph.svg"
    path.write_bytes(b"keep me")
    message_boxes.answer = QMessageBox.StandardButton.No
    note = _export(qtbot, window, "canvas", "svg", path)
    assert message_boxes.kinds() == ["question"] and "graph.svg" in message_boxes.shown[0][2]
    assert path.read_bytes() == b"keep me" and note.startswith("Not exported")
    message_boxes.answer = QMessageBox.StandardButton.Yes
    assert _export(qtbot, window, "canvas", "svg", path).startswith("Wrote graph.svg")
    assert path.read_bytes().startswith(b"<?xml")


def test_unwritable_place_is_one_sentence(qtbot, tmp_path):
    window = make_window(qtbot)
    target = tmp_path / "no such folder" / "graph.png"
    note = _export(qtbot, window, "canvas", "png", target)
    assert note.startswith("Not exported: cannot write ") and "no such folder" in note
    assert "Traceback" not in note and "\n" not in note
    assert not target.parent.exists()


def test_open_group_picture_is_its_frame(qtbot, tmp_path):
    """An open group exports as its frame: its title and every member's title, as text."""
    import onnx

    from tests.views.graphs import scoped_model

    model = tmp_path / "scoped.onnx"
    onnx.save(scoped_model(stages=2, blocks=2, layers=2), model)
    window = make_window(qtbot, model)
    window.grouping.expand_all()
    layout = window.layout_
    hierarchy = layout.grouping.hierarchy
    node = next(n for n in window.document.graph.nodes if n.name.endswith("block_1/layer_0/relu"))
    click_box(qtbot, window, node.id)
    frame = window.canvas.enclosing_frame(node.id)
    assert hierarchy.groups[frame].title == "layer_0"
    svg_path, png = _canvas_pair(qtbot, window, tmp_path, subject="group", scale=2.0)
    svg = svg_path.read_bytes()
    rect = window.canvas.box_rect(frame)
    assert view_box(svg) == (0, 0, rect.width() + 2 * MARGIN, rect.height() + 2 * MARGIN)
    texts = {t.text for t in svg_texts(svg)}
    assert {layout.labels[k].title for k in hierarchy.members(frame)} <= texts
    assert any("layer_0" in t for t in texts)
    _assert_same(png, qt_render(svg, png.size()), "Qt's SVG renderer")
