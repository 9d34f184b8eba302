"""The lowering passes in the Passes panel: listed after the stages, stepped, switched off.

An int8 residual block (built here) compiled for Cortex-M7 gets the convolution pair, then runs
as one row-streamed chain. The user selects the chain's row with the mouse (the view shows the
timeline before and after), unticks its box (the document, the Memory Timeline and the
export's plan follow), and Esc leaves the view.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem

from app.export.controller import export_job
from app.window.workers import Progress
from compiler.lowir.passes import CONV_PAIR, LOWERING_NAMES, ROW_CHAINS
from tests.codegen.test_conv_pair import _block_model
from tests.gui.helpers import make_window, open_and_wait
from tests.tflite.writer import write

TIMEOUT = 120000


@pytest.fixture
def block_window(qtbot, tmp_path):
    path = tmp_path / "block.tflite"
    path.write_bytes(write(_block_model()[0]))
    window = make_window(qtbot, None)
    window.document.set_target("cortex-m7")
    with qtbot.waitSignals([window.stepping.resultReady, window.lowering.recordsReady],
                           timeout=TIMEOUT):
        open_and_wait(qtbot, window, path)
    return window


def _row_rect(panel, name):
    item = panel.lowering_check(name)
    panel.table.scrollToItem(item)
    return panel.table.visualItemRect(item), item


def _check_box_point(panel, item) -> QPoint:
    """The centre of the check box drawn in column 0 of `item`'s line, scrolled into view."""
    table = panel.table
    table.scrollToItem(item)  # the docks may have been laid out again since the last click
    rect = table.visualRect(table.indexFromItem(item, 0))
    option = QStyleOptionViewItem()
    option.rect = rect
    option.features |= QStyleOptionViewItem.ViewItemFeature.HasCheckIndicator
    box = table.style().subElementRect(QStyle.SubElement.SE_ItemViewItemCheckIndicator, option,
                                       table)
    return box.center()


def test_the_chain_is_listed_stepped_and_switched_off_with_the_mouse(qtbot, block_window,
                                                                     tmp_path):
    window = block_window
    stepping, lowering, panel = window.stepping, window.lowering, window.stepping.panel
    rows = panel.lowering_rows()
    assert [r.lowering for r in rows] == list(LOWERING_NAMES)
    pair = next(r for r in lowering.records if r.name == CONV_PAIR)
    assert pair.applied and pair.changed and "window of 10 rows" in pair.sites[0]
    chain = next(r for r in lowering.records if r.name == ROW_CHAINS)
    assert chain.applied and chain.changed
    fused_arena = chain.after.arena.size

    # Select the chain's line: its view replaces the canvas, before and after.
    rect, item = _row_rect(panel, ROW_CHAINS)
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(rect.right() - 40, rect.center().y()))
    assert lowering.view.isVisible() and not window.canvas.isVisible()
    view = lowering.view
    assert f"{ROW_CHAINS}" in view.banner.text() and "cortex-m7" in view.banner.text()
    assert f"{chain.before.arena.size:,} B" in view.before_title.text()
    assert f"{fused_arena:,} B" in view.after_title.text()
    assert view.after.arena == fused_arena and view.before.arena == chain.before.arena.size
    assert "row by row" in view.story.toPlainText()

    # Untick it: the document switches it off and every panel plans without it.
    with qtbot.waitSignal(lowering.recordsReady, timeout=TIMEOUT):
        qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton,
                         pos=_check_box_point(panel, item))
    assert window.document.disabled_lowering == {ROW_CHAINS}
    off = next(r for r in lowering.records if r.name == ROW_CHAINS)
    assert not off.applied and off.reason == "switched off"
    unfused = lowering.records[-1].after.arena.size
    assert unfused > fused_arena
    compiled = window.document.compilation()
    assert compiled.plan(window.document.options()).arena.size == unfused
    memory = window.memory
    memory.dock.show()
    qtbot.waitUntil(lambda: not memory.is_busy() and memory.current is not None
                    and memory.current.doc["activations"] == unfused, timeout=TIMEOUT)
    assert view.isVisible() and "not run: switched off" in view.banner.text()
    # The export builds what the panels show: its options carry the switch.
    options = replace(window.export._initial_options(), folder=tmp_path / "bundle")
    assert options.disabled_lowering == {ROW_CHAINS}
    assert options.cli_args()[-2:] == ["--disable-lowering", ROW_CHAINS]
    exported = export_job(compiled, options)(Progress(lambda *_args: None))
    assert exported.report["regions"]["activations"] == unfused

    # Tick it again: back to the fused plan. Esc returns to the editable model.
    item = panel.lowering_check(ROW_CHAINS)
    with qtbot.waitSignal(lowering.recordsReady, timeout=TIMEOUT):
        qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton,
                         pos=_check_box_point(panel, item))
    assert window.document.disabled_lowering == frozenset()
    assert lowering.records[-1].after.arena.size == fused_arena
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    view.story.setFocus()
    qtbot.keyClick(view.story, Qt.Key.Key_Escape)
    assert stepping.index is None and window.canvas.isVisible() and not view.isVisible()


def test_helium_lists_the_pair_as_forbidden_by_its_target(qtbot, block_window):
    window = block_window
    with qtbot.waitSignal(window.lowering.recordsReady, timeout=TIMEOUT):
        window.document.set_target("cortex-m55")
    row = next(r for r in window.stepping.panel.lowering_rows() if r.lowering == CONV_PAIR)
    assert row.effect == "off" and "int8_residual_in_store is false" in row.tip
