"""The code views follow the canvas selection: low-level IR, LLVM IR and assembly."""

from __future__ import annotations

import re

from PySide6.QtGui import QImage

from app.inspect import code as code_panel
from app.inspect.code import CodeController
from compiler.codegen import explain
from compiler.codegen.targets import get_target
from compiler.errors import KilnError
from compiler.passes.pipeline import Pipeline
from tests.conftest import shared_models
from tests.gui.helpers import make_window
from views.code_view import LLVM_IR, LOWIR

TIMEOUT = 120000


def _node_id(window, name: str) -> int:
    return next(n.id for n in window.document.graph.nodes if n.name == name)


def _select(qtbot, window, name: str) -> CodeController:
    code: CodeController = window.code
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        window.canvas.select(_node_id(window, name))
        assert code.view.status.text() == "compiling…"  # said at once, before the worker ends
    return code


def test_installed_as_a_dock_with_host_default(qtbot):
    window = make_window(qtbot, None)
    code = window.code
    assert isinstance(code, CodeController) and code.dock.widget() is code.view
    assert code.target() == "host" and code.view.target_combo.count() > 5
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert code.dock.toggleViewAction() in view_menu.actions()


def test_selecting_a_conv_shows_its_kernel(qtbot):
    window = make_window(qtbot)
    code = _select(qtbot, window, "conv2")
    view = code.view
    assert view.status.text() == "conv2 is part of kernel k1 Conv (fused from conv2, relu2)"
    llvm = view.llvm_ir.toPlainText()
    assert re.search(r'^define void @"?net\.k1\.Conv\b', llvm, re.M)
    assert re.search(r"\bfmul\b|@llvm\.fma", llvm)
    assert view.llvm_ir.marked_text().startswith("define void @")  # scrolled to the function
    asm = view.assembly.toPlainText()
    assert re.search(r"^net\.k1\.Conv:", asm, re.M)
    if get_target("host").triple.startswith("x86_64"):
        assert re.search(r"\b(vfmadd\w+|v?mulps|mulss)\b", asm)
        assert "%xmm" in asm or "%ymm" in asm or "%zmm" in asm

    # Another node: the views update.
    _select(qtbot, window, "pool1")
    assert view.status.text() == "pool1 is kernel k2 MaxPool"
    assert "net.k2.MaxPool" in view.llvm_ir.toPlainText()
    assert "net.k1.Conv" not in view.llvm_ir.toPlainText()
    assert view.lowir.marked_text().strip().startswith("2  MaxPool pool1:")


def test_target_combo_recompiles_for_cortex_m7(qtbot):
    window = make_window(qtbot)
    code = _select(qtbot, window, "conv1")
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        code.view.target_combo.setCurrentText("cortex-m7")
    asm = code.view.assembly.toPlainText()
    assert ".thumb_func" in asm and "net.k0.Conv:" in asm
    assert re.search(r"^\s+(vfma|vmla)\.f32\s", asm, re.M)
    assert "%xmm" not in asm


def test_lowir_tab_marks_and_shows_the_node(qtbot):
    window = make_window(qtbot, shared_models() / "onnx" / "pretrainedResnet.onnx")
    code = window.code
    code.dock.resize(code.dock.width(), 180)  # fewer lines on screen than in the dump
    add = next(n for n in window.document.graph.nodes if n.op == "Add")
    code = _select(qtbot, window, add.name)
    view = code.view
    view.tabs.setCurrentIndex(LOWIR)
    qtbot.wait(50)
    text = view.lowir.toPlainText()
    assert text.startswith("input ") and text.count("\n") > 20  # the whole function
    assert "Conv+Add" in view.lowir.marked_text()
    assert "Conv+Add" in view.status.text() and "fused from" in view.status.text()
    rect = view.lowir.cursorRect()
    assert view.lowir.viewport().rect().contains(rect.center())  # scrolled into view


def test_follows_the_pipeline_of_the_passes_panel(qtbot):
    window = make_window(qtbot)
    code = _select(qtbot, window, "relu2")
    assert "fused from conv2, relu2" in code.view.status.text()
    pipeline = Pipeline.from_json(window.stepping.pipeline.to_json())
    for config in pipeline.passes:
        config.enabled = config.name != "fuse_activations"
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        window.stepping.run(pipeline)  # the Passes panel runs it, then the code view follows
    text = code.view.status.text()
    assert text.startswith("relu2 is kernel k") and text.endswith("Relu")
    assert "Relu" in code.view.llvm_ir.toPlainText()


def test_an_edit_and_its_undo_update_the_code(qtbot):
    window = make_window(qtbot)
    code = _select(qtbot, window, "conv2")
    node_id = _node_id(window, "conv2")
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        assert window.editing.rename_node(node_id, "conv_b")
    qtbot.waitUntil(lambda: not code.is_busy(), timeout=TIMEOUT)
    assert code.view.status.text().startswith("conv_b is part of kernel k1 Conv")
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        window.document.undo_stack.undo()
    qtbot.waitUntil(lambda: not code.is_busy(), timeout=TIMEOUT)
    assert code.view.status.text().startswith("conv2 is part of kernel k1 Conv")


def test_a_hidden_dock_compiles_when_shown(qtbot):
    window = make_window(qtbot)
    code = window.code
    code.dock.hide()
    window.canvas.select(_node_id(window, "conv3"))
    assert not code.is_busy() and "net.k3" not in code.view.llvm_ir.toPlainText()
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        code.dock.show()
    assert "net.k3.Conv" in code.view.llvm_ir.toPlainText()


def test_an_input_box_has_no_kernel(qtbot):
    window = make_window(qtbot)
    code = window.code
    key = next(k for k in window.layout_.boxes if isinstance(k, str) and k.startswith("in:"))
    with qtbot.waitSignal(code.shown, timeout=TIMEOUT):
        window.canvas.select(key)
    assert code.view.status.text() == "Select an operator node to see its kernel."
    assert code.view.lowir.toPlainText().startswith("input image")
    assert code.view.llvm_ir.toPlainText() == "; no kernel"


def test_screenshots(qtbot, tmp_path):
    window = make_window(qtbot)
    saved = []

    def save(widget, name):
        assert widget.grab().save(str(tmp_path / name))
        saved.append(name)

    code_panel.screenshots(window, save)
    assert saved == ["llvm_ir_conv.png", "assembly.png", "lowir.png"]
    image = QImage(str(tmp_path / "llvm_ir_conv.png"))
    assert image.width() > 200 and image.height() > 100
    assert window.code.view.tabs.currentIndex() == LLVM_IR
    assert not window.code.dock.isFloating()  # docked again after rendering
    assert "net.k1.Conv" in window.code.view.llvm_ir.toPlainText()


def test_a_compile_error_is_one_red_line(qtbot, monkeypatch, message_boxes):
    window = make_window(qtbot)

    def fail(*_args):
        raise KilnError("cannot generate Conv (conv2)")

    monkeypatch.setattr(explain.KernelMap, "kernel_code", fail)
    code = _select(qtbot, window, "conv2")
    assert code.view.status.text() == "cannot generate Conv (conv2)"
    assert "color" in code.view.status.styleSheet()
    assert code.view.llvm_ir.toPlainText() == "; no code: cannot generate Conv (conv2)"
    assert message_boxes.shown == []  # no dialog, no traceback
