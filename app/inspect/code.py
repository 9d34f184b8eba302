"""Code views synced with the selection: what the selected node's kernel compiles to.

The canvas shows the loaded graph; the code comes from the compile driver's stages of the
document's graph and pipeline (the one the Passes panel edits), so a selected node is mapped to
the kernel whose provenance holds it. The pipeline and the kernel's compilation run in a worker;
the panel says "compiling…" meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QDockWidget

from app.document.document import Document
from app.inspect.code_links import LineLinks
from app.window.workers import Job, Progress
from compiler.codegen import explain
from compiler.codegen.targets import target_names
from compiler.driver import Compilation, Options, pipeline_key
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.memory.report import MemoryPlan
from views.code_view import ASSEMBLY, LLVM_IR, LOWIR, CodeView
from views.signals import signals_blocked


@dataclass
class Shown:
    """What the worker computed for one (graph, pipeline, options, selection, target).

    `stamp` is (pipeline key, options, selection); `plan` is the driver's memory plan the
    kernels assume (the Memory panel and the bundle have the same). `error` says the kernel
    could not be compiled (`message` says why); the plan and low-level IR still show.
    """

    graph: Graph
    stamp: tuple
    plan: MemoryPlan
    lowir: str
    line: int
    message: str
    code: explain.KernelCode | None
    error: bool = False


def _work(compiled: Compilation, options: Options, key, target: str, stamp: tuple):
    """The job: the driver's kernel map for `options`, then the selected node's kernel code."""
    graph = compiled.graph

    def work(progress: Progress) -> Shown:
        progress.report(0.0, "Running the pass pipeline")
        final = compiled.final
        progress.report(0.3, "Planning memory")
        kernels = compiled.kernels(options)
        lowir = kernels.plan.lowir.dump()
        if not isinstance(key, int) or all(n.id != key for n in graph.nodes):
            return Shown(graph, stamp, kernels.plan, lowir, -1,
                         "Select an operator node to see its kernel.", None)
        node, message = kernels.explain(graph, final, key)
        if node is None:
            return Shown(graph, stamp, kernels.plan, lowir, -1, message, None)
        line = kernels.lowir_line(node.name)
        progress.report(0.5, f"Compiling {node.name} for {target}")
        step = kernels.kernel_of(node.name)
        try:
            code = kernels.kernel_code(node.name, target) if step is not None else None
        except KilnError as error:  # e.g. an integer operator before its kernel exists
            return Shown(graph, stamp, kernels.plan, lowir, line, str(error), None, error=True)
        return Shown(graph, stamp, kernels.plan, lowir, line, message, code)

    return work


class CodeController(QObject):
    """Owns the Code dock and recompiles the shown kernel when selection, graph or target change.

    The target combo is the document's target: picking one here is picking it for the memory
    plan and the export too.

    Signals:
        shown(): the panel shows the result for the current selection (or its error).
    """

    shown = Signal()

    def __init__(self, document: Document, add_dock: Callable[..., QDockWidget],
                 parent: QObject | None = None,
                 select: Callable[[object], None] | None = None):
        """`add_dock(title, widget, area)` makes the dock; `select(key)` selects a node."""
        super().__init__(parent)
        self.document = document
        self.view = CodeView()
        self.view.set_targets(target_names(), document.target)
        self.dock = add_dock("Code", self.view, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.last: Shown | None = None
        self._job: Job | None = None
        self._stale = True
        document.selectionChanged.connect(lambda _key: self.refresh())
        for signal in (document.graphChanged, document.problemsChanged,
                       document.pipelineChanged, document.optionsChanged):
            signal.connect(self.refresh)
        document.modelOpened.connect(self._model_opened)
        document.optionsChanged.connect(self._options_changed)
        self.view.targetChanged.connect(self._target_picked)
        self.links = LineLinks(self, select or document.select)
        self.view.linkToggled.connect(lambda _on: self.refresh())
        self.dock.visibilityChanged.connect(self._visibility_changed)

    def _model_opened(self) -> None:
        self.last = self.links.last = None
        self.view.set_message("")
        self.view.set_lowir("")
        self.view.clear_kernel()

    def _target_picked(self, name: str) -> None:
        if name and name != self.document.target:
            self.document.set_target(name)

    def _options_changed(self) -> None:
        if self.view.target() != self.document.target:
            with signals_blocked(self.view.target_combo):
                self.view.target_combo.setCurrentText(self.document.target)

    def target(self) -> str:
        """The target the code is shown for (the document's)."""
        return self.document.target

    def set_target(self, name: str) -> None:
        """Pick a target (as the combo does)."""
        self.view.target_combo.setCurrentText(name)

    def is_busy(self) -> bool:
        """True while a kernel is being compiled."""
        return self._job is not None and self._job.is_active() or self.links.is_busy()

    def _visibility_changed(self, visible: bool) -> None:
        if visible and self._stale:
            self.refresh()

    def refresh(self) -> None:
        """Show the code of the current selection (compiled in a worker); hidden: later."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
        self.links.cancel()
        if not self.dock.isVisible():
            self._stale = True
            return
        self._stale = False
        doc = self.document
        compiled = doc.compilation()
        if compiled is None:
            message = "No model." if doc.graph is None else \
                "The graph has invalid nodes: fix or undo the edit to see its code."
            self.view.set_message(message, error=doc.graph is not None)
            self.view.set_lowir("")
            self.view.clear_kernel()
            self.shown.emit()
            return
        if self.view.linked():
            self.links.refresh(compiled)
            return
        self.view.set_busy("compiling…")
        options = doc.options()
        stamp = (pipeline_key(doc.pipeline), options, doc.selection)
        job = Job(_work(compiled, options, doc.selection, self.target(), stamp),
                  "Compiling kernel", self)
        job.succeeded.connect(self._show)
        job.failed.connect(self._failed)
        self._job = job
        job.start()

    def _show(self, result: Shown) -> None:
        self._job = None
        self.last = result
        self.view.set_message(result.message, error=result.error)
        self.view.set_lowir(result.lowir, result.line)
        if result.error:
            self.view.clear_kernel("no code: " + result.message)
        elif result.code is not None:
            self.view.set_kernel(result.code.llvm_ir, result.code.assembly, result.code.symbol)
        else:
            self.view.clear_kernel("no kernel")
        self.shown.emit()

    def _failed(self, message: str) -> None:
        self._job = None
        self.view.set_message(message, error=True)
        self.view.clear_kernel("no code: " + message)
        self.shown.emit()


def install(window) -> CodeController:
    """Add the Code dock to `window`; returns its controller (`window.code`)."""
    controller = CodeController(window.document, window.add_panel_dock, window,
                                window.select_and_center)
    # Beside the memory timeline, wide enough for a listing's lines at first start.
    window.resizeDocks([controller.dock], [420], Qt.Orientation.Horizontal)
    return controller


def screenshots(window, save) -> None:
    """Render the code views of the sample's second Conv (or the first node with a kernel)."""
    code: CodeController = window.code
    graph = window.document.graph
    if graph is None:
        return
    from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

    node = next((n for n in graph.nodes if n.op == "Conv" and n.name == "conv2"),
                next((n for n in graph.nodes if n.op == "Conv"), None))
    if node is None:
        return
    code.dock.show()
    loop = QEventLoop()
    code.shown.connect(loop.quit)
    QTimer.singleShot(120000, loop.quit)
    window.canvas.select(node.id)
    if code.is_busy():
        loop.exec()
    code.shown.disconnect(loop.quit)
    # Room for a screenful of code: the dock shares the bottom area with other panels, so it
    # floats at a readable size while it is rendered, then goes back.
    floating = code.dock.isFloating()
    code.dock.setFloating(True)
    code.dock.resize(1100, 440)
    QCoreApplication.processEvents()
    for tab, name in ((LLVM_IR, "llvm_ir_conv.png"), (ASSEMBLY, "assembly.png"),
                      (LOWIR, "lowir.png")):
        code.view.tabs.setCurrentIndex(tab)
        QCoreApplication.processEvents()
        save(code.view, name)
    code.view.tabs.setCurrentIndex(LLVM_IR)
    code.dock.setFloating(floating)
