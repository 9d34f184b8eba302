"""Linked code views: a click on a kernel's line highlights its lines everywhere and its node."""

from __future__ import annotations

import re
from dataclasses import replace

from PySide6.QtCore import QPoint, Qt

from compiler.driver import Options, compilation
from compiler.frontends.load import load_model
from tests.conftest import shared_models
from tests.gui.helpers import click_box, make_window, node_id
from views.code_view import ASSEMBLY, LINK_COLOURS, RULES, CodeText

TIMEOUT = 120000


def _link(qtbot, window):
    """Check "Link lines" with the mouse and wait for the whole network's listings."""
    code = window.code
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        qtbot.mouseClick(code.view.link_box, Qt.MouseButton.LeftButton)
    assert code.view.linked() and code.links.last is not None
    return code


def _click_line(qtbot, text: CodeText, line: int) -> None:
    """Scroll `line` on screen as a user does, then click its text."""
    text.verticalScrollBar().setValue(max(line - 3, 0))
    block = text.document().findBlockByNumber(line)
    rect = text.blockBoundingGeometry(block).translated(text.contentOffset())
    assert 0 <= rect.center().y() < text.viewport().height()
    qtbot.mouseClick(text.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(12, int(rect.center().y())))


def _functions(llvm_ir: str, symbols) -> set[int]:
    """Lines of the functions named `symbols`: `define ... @name(` to the closing `}`."""
    lines, inside, found = llvm_ir.splitlines(), False, set()
    for i, line in enumerate(lines):
        match = re.match(r'define\b[^@]*@"?([\w.]+)"?\(', line)
        if match:
            inside = match.group(1) in symbols
        if inside:
            found.add(i)
        if line.startswith("}"):
            inside = False
    return found


def _assembly(assembly: str, symbol: str) -> list[int]:
    """Lines of `symbol` in an assembly listing: its label to its `.size`."""
    lines = assembly.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"{symbol}:"))
    last = next(i for i in range(first, len(lines))
                if re.match(rf"\s*\.size\s+{re.escape(symbol)},", lines[i]))
    return list(range(first, last + 1))


def _visible(text: CodeText, line: int) -> bool:
    block = text.document().findBlockByNumber(line)
    y = text.blockBoundingGeometry(block).translated(text.contentOffset()).center().y()
    return 0 <= y < text.viewport().height()


def test_a_click_on_the_digits_assembly_selects_its_kernel_everywhere(qtbot):
    window = make_window(qtbot)
    window.code.view.tabs.setCurrentIndex(ASSEMBLY)
    code = _link(qtbot, window)
    view, linked = code.view, code.links.last
    assert view.pages.currentWidget() is view.side_by_side
    assert all(text.isVisible() for text in view.texts())  # side by side, not in tabs
    assert len(view.llvm_ir.extraSelections()) == len(linked.code.map.links) == 5
    final = {n.name: n for n in linked.final.nodes}
    conv2 = node_id(window, "conv2")
    kernel = next(k for k in linked.kernels.steps if conv2 in final[k.nodes[0]].provenance)
    asm = _assembly(view.assembly.toPlainText(), kernel.symbol)
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        _click_line(qtbot, view.assembly, asm[len(asm) // 2])
    assert view.assembly.highlighted == set(asm)
    assert view.llvm_ir.highlighted == _functions(view.llvm_ir.toPlainText(), {kernel.symbol})
    (line,) = view.lowir.highlighted
    words = view.lowir.toPlainText().splitlines()[line].split()
    assert words[1:3] == ["Conv", f"{kernel.nodes[0]}:"]
    assert window.document.selection == conv2 and window.canvas.selected_key() == conv2
    assert _visible(view.llvm_ir, min(view.llvm_ir.highlighted)) and _visible(view.lowir, line)
    # The reverse: a node clicked on the canvas highlights its kernel's lines.
    pool = node_id(window, "pool1")
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        click_box(qtbot, window, pool)
    assert view.llvm_ir.highlighted == _functions(view.llvm_ir.toPlainText(), {"net.k2.MaxPool"})
    assert view.assembly.highlighted == set(_assembly(view.assembly.toPlainText(),
                                                      "net.k2.MaxPool"))
    assert _visible(view.assembly, min(view.assembly.highlighted))
    # Unchecked, the panel is back to one kernel in tabs.
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        qtbot.mouseClick(view.link_box, Qt.MouseButton.LeftButton)
    assert view.pages.currentWidget() is view.tabs and view.tabs.count() == 3
    assert [text.isVisible() for text in view.texts()] == [False, False, True]  # as it was
    assert view.llvm_ir.toPlainText().count("define") == 1


def test_resnet8_int8_assembly_line_and_canvas_node_link_the_same_kernel(qtbot):
    model = shared_models() / "tflite" / "pretrainedResnet_quant.tflite"
    window = make_window(qtbot, model)
    code = _link(qtbot, window)
    view = code.view
    assert code.target() == "host"
    # The oracle: the build `kiln bench --target` counts per-layer instructions in.
    net = compilation(load_model(model)).net(replace(Options("host"), separate_kernels=True))
    lowir = view.lowir.toPlainText().splitlines()
    llvm_ir, assembly = view.llvm_ir.toPlainText(), view.assembly.toPlainText()
    for node, instruction in (("CONV_2D_1", "RowChain"), ("FULLY_CONNECTED_14", "QGemm")):
        symbols = {k.symbol for k in net.kernels if k.nodes == (node,)}
        first = min(symbols, key=lambda s: _assembly(assembly, s)[0])
        lines = _assembly(assembly, first)
        with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
            _click_line(qtbot, view.assembly, lines[len(lines) // 3])
        assert view.llvm_ir.highlighted == _functions(llvm_ir, symbols), node
        assert view.assembly.highlighted == {i for s in symbols for i in _assembly(assembly, s)}
        (line,) = view.lowir.highlighted
        assert lowir[line].split()[1].startswith(instruction)
        key = window.document.selection
        assert window.canvas.selected_key() == key
        assert next(n.name for n in window.document.graph.nodes if n.id == key) == node
    # The reverse: the residual convolution clicked on the canvas.
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        click_box(qtbot, window, node_id(window, "CONV_2D_6"))
    symbols = {k.symbol for k in net.kernels if k.nodes == ("CONV_2D_6", "ADD_7")}
    assert symbols and view.llvm_ir.highlighted == _functions(llvm_ir, symbols)
    assert view.assembly.highlighted == {i for s in symbols for i in _assembly(assembly, s)}
    (line,) = view.lowir.highlighted
    assert "RowChain" in lowir[line]


def _luminance(colour: str) -> float:
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_every_syntax_colour_stays_readable_on_every_tint():
    colours = {fmt.foreground().color().name() for rules in RULES.values() for _, fmt in rules}
    colours.add("#000000")
    for tint, strong in LINK_COLOURS:
        for background in (tint, strong):
            for colour in colours:
                light, dark = _luminance(background), _luminance(colour)
                assert (light + 0.05) / (dark + 0.05) >= 4.5, (colour, background)
