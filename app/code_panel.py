"""Code views synced with the selection: what the selected node's kernel compiles to.

The canvas shows the loaded graph; the code comes from the final graph (after the pipeline
the Passes panel edits, else the default one), so a selected node is mapped to the kernel whose
provenance holds it. The pipeline and the kernel's compilation run in a worker; the panel says
"compiling…" meanwhile.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal

from app.stepping import current_pipeline
from app.workers import Job, Progress
from compiler.codegen import explain
from compiler.codegen.targets import target_names
from compiler.ir.graph import Graph
from compiler.passes.pipeline import Pipeline
from compiler.passes.runner import run_pipeline
from views.code_view import ASSEMBLY, LLVM_IR, LOWIR, CodeView

DEFAULT_TARGET = "host"


@dataclass
class Shown:
    """What the worker computed for one (graph, selection, target)."""

    graph: Graph
    final: Graph
    lowir: str
    line: int
    message: str
    code: explain.KernelCode | None


def _work(graph: Graph, pipeline: Pipeline, final: Graph | None, key, target: str):
    """The job: run the pipeline (unless known), then compile the selected node's kernel."""
    def work(progress: Progress) -> Shown:
        progress.report(0.0, "Running the pass pipeline")
        done = final or run_pipeline(graph, pipeline, snapshots=False).graph
        progress.report(0.3, "Planning memory")
        plan = explain.plan_of(done)
        lowir = plan.lowir.dump()
        if not isinstance(key, int) or all(n.id != key for n in graph.nodes):
            return Shown(graph, done, lowir, -1, "Select an operator node to see its kernel.",
                         None)
        node, message = explain.explain(graph, done, key)
        if node is None:
            return Shown(graph, done, lowir, -1, message, None)
        line = explain.lowir_line(plan, node.name)
        progress.report(0.5, f"Compiling {node.name} for {target}")
        step = explain.kernel_of(done, node.name)
        code = explain.kernel_code(done, node.name, target) if step is not None else None
        return Shown(graph, done, lowir, line, message, code)

    return work


class CodeController(QObject):
    """Owns the Code dock and recompiles the shown kernel when selection, graph or target change.

    Signals:
        shown(): the panel shows the result for the current selection (or its error).
    """

    shown = Signal()

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.view = CodeView()
        self.view.set_targets(target_names(), DEFAULT_TARGET)
        self.dock = window.add_panel_dock("Code", self.view, Qt.DockWidgetArea.BottomDockWidgetArea)
        # Final graph per loaded graph, with the pipeline (as JSON text) that made it.
        self._final: weakref.WeakKeyDictionary[Graph, tuple[str, Graph]] = \
            weakref.WeakKeyDictionary()
        self._pipeline_text = ""
        self._job: Job | None = None
        self._stale = True
        window.canvas.nodeSelected.connect(lambda _key: self.refresh())
        window.document.graphChanged.connect(self.refresh)
        self.view.targetChanged.connect(lambda _name: self.refresh())
        self.dock.visibilityChanged.connect(self._visibility_changed)
        stepping = getattr(window, "stepping", None)
        if stepping is not None and hasattr(stepping, "resultReady"):
            stepping.resultReady.connect(self._pipeline_ran)

    def pipeline(self) -> Pipeline:
        """A copy of the Passes panel's pipeline (the default one without that panel)."""
        return current_pipeline(self.window)

    def _pipeline_ran(self, _result) -> None:
        """The Passes panel ran: refresh if it ran another pipeline than the one shown."""
        if json.dumps(self.pipeline().to_json(), sort_keys=True) != self._pipeline_text:
            self.refresh()

    def target(self) -> str:
        """The target picked in the panel."""
        return self.view.target()

    def set_target(self, name: str) -> None:
        """Pick a target (as the combo does)."""
        self.view.target_combo.setCurrentText(name)

    def is_busy(self) -> bool:
        """True while a kernel is being compiled."""
        return self._job is not None and self._job.is_active()

    def _visibility_changed(self, visible: bool) -> None:
        if visible and self._stale:
            self.refresh()

    def refresh(self) -> None:
        """Show the code of the current selection (compiled in a worker); hidden: later."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
        if not self.dock.isVisible():
            self._stale = True
            return
        self._stale = False
        graph = self.window.document.graph
        if graph is None:
            self.view.set_message("No model.")
            self.view.set_lowir("")
            self.view.clear_kernel()
            self.shown.emit()
            return
        key = self.window.canvas.selected_key()
        self.view.set_busy("compiling…")
        pipeline = self.pipeline()
        text = json.dumps(pipeline.to_json(), sort_keys=True)
        self._pipeline_text = text
        known = self._final.get(graph)
        final = known[1] if known is not None and known[0] == text else None
        job = Job(_work(graph, pipeline, final, key, self.target()), "Compiling kernel", self)
        job.succeeded.connect(lambda result: self._show(result, text))
        job.failed.connect(self._failed)
        self._job = job
        job.start()

    def _show(self, result: Shown, pipeline_text: str) -> None:
        self._job = None
        self._final[result.graph] = (pipeline_text, result.final)
        self.view.set_message(result.message)
        self.view.set_lowir(result.lowir, result.line)
        if result.code is not None:
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
    return CodeController(window)


def screenshots(window, save) -> None:
    """Render the code views of the sample's second Conv (or the first node with a kernel)."""
    code: CodeController | None = getattr(window, "code", None)
    graph = window.document.graph
    if code is None or graph is None:
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
