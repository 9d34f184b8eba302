"""The Activations dock: run one sample through the model, then inspect any edge's values.

"Run sample" runs the document's graph in a worker, keeping every value; when the model is
calibrated, the quantized model's integer graph runs too, so each value shows float, int8
(dequantized) and their difference. A click on an edge shows that value. An edit, undo,
another calibration or a hand-tuned range makes the run stale: it is dropped at once and the
same sample runs again (when the dock is hidden, once it is shown); another model forgets it.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QFileDialog

from app.window.workers import Job, Progress
from compiler.activations.sample import (
    RANDOM,
    SampleRun,
    SampleSpec,
    activation,
    export_npy,
    run_sample,
)
from compiler.driver import compilation
from compiler.errors import KilnError
from compiler.ir.graph import Graph
from compiler.quant.recipe import QuantRecipe, quantize_with
from views import dialogs
from views.activation_view import ActivationPanel

DIGITS = (("digits:test", "digits:test"), ("digits:train", "digits:train"))


def sample_job(graph: Graph, spec: SampleSpec,
               quantized_from: tuple[Graph, QuantRecipe] | None = None):
    """The job: `spec` through `graph`, and through its int8 version when `quantized_from`.

    `quantized_from` is (calibrated float graph, recipe): the document's recipe, the one an
    export builds, quantized and compiled here, off the GUI thread.
    """
    def work(progress: Progress) -> SampleRun:
        progress.report(0.0, "Preparing")
        integer = qdq = None
        if quantized_from is not None:
            source, recipe = quantized_from
            qdq = quantize_with(source, recipe)
            progress.report(0.1, "Compiling the int8 model")
            integer = compilation(qdq).final
        total = len(graph.nodes) + (len(integer.nodes) if integer is not None else 0)
        done = [0]

        def step() -> None:
            done[0] += 1
            progress.report(0.2 + 0.8 * done[0] / max(total, 1), "Running the sample")

        return run_sample(graph, spec, integer, qdq, check=step)
    return work


class ActivationController(QObject):
    """Owns the Activations dock; runs samples and follows the canvas's edge selection.

    Signals:
        ran(): a sample run finished (or failed, or was dropped); the panel shows its state.
        shown(str): the panel shows this value ("" : none).
    """

    ran = Signal()
    shown = Signal(str)

    def __init__(self, window):
        super().__init__(window)
        self.window, self.document = window, window.document
        self.panel = ActivationPanel()
        # The maps and the table are taller than a small dock: it scrolls.
        self.dock = window.add_panel_dock("Activations", self.panel,
                                          Qt.DockWidgetArea.RightDockWidgetArea, scrolled=True)
        window.tabifyDockWidget(window.docks["properties"], self.dock)
        window.docks["properties"].raise_()
        self.dock.hide()
        self.result: SampleRun | None = None
        self.spec: SampleSpec | None = None  # the sample last run (run again after an edit)
        self.value: str | None = None  # the value shown
        self._job: Job | None = None
        self._stale = False
        self._fresh = False  # another model opened: its first graph picks the default source
        self._soon = QTimer(self, singleShot=True, interval=0)
        self._soon.timeout.connect(self._rerun)
        doc = self.document
        doc.modelOpened.connect(self._model_opened)
        doc.graphChanged.connect(self._changed)
        doc.quant.sessionChanged.connect(lambda _measured: self._changed())
        doc.quant.edited.connect(lambda _tensor: self._changed())
        window.canvas.edgeSelected.connect(self.show_value)
        window.canvas.nodeSelected.connect(self._node_selected)
        self.panel.runRequested.connect(self.run)
        self.panel.cancelRequested.connect(self.cancel)
        self.panel.fileRequested.connect(self.choose_file)
        self.panel.exportRequested.connect(self.export)
        self.dock.visibilityChanged.connect(self._visibility_changed)
        self._fill_sources()

    # -- state ----------------------------------------------------------------------------------

    def is_busy(self) -> bool:
        """True while a sample runs (or is about to run again)."""
        return self._soon.isActive() or (self._job is not None and self._job.is_active())

    def _fill_sources(self, keep: bool = True) -> None:
        """Offer the calibration's samples, the digits for the sample model, random inputs.

        With `keep` the user's choice stays selected; else the first source is.
        """
        sources: list[tuple[str, str]] = []
        session = self.document.quant.session
        if session is not None and session.request is not None and session.request.data:
            data = session.request.data
            sources.append((f"calibration: {Path(data).name or data}", data))
        graph = self.document.graph
        if graph is not None and len(graph.inputs) == 1 and \
                graph.inputs[0].type.shape in ((1, 1, 8, 8), (1, 8, 8, 1)):
            sources += [s for s in DIGITS if s[1] not in {d for _, d in sources}]
        sources.append(("random input", RANDOM))
        current = (self.panel.chosen_source() if keep else None) or sources[0][1]
        self.panel.set_sources(sources, current)

    # -- running --------------------------------------------------------------------------------

    def run(self, spec: SampleSpec | None = None) -> Job | None:
        """Run `spec` (default: the panel's source and index) in a worker; returns the job."""
        if spec is None:
            source = self.panel.chosen_source()
            if source is None:
                return None
            spec = SampleSpec(source, self.panel.index.value())
        self.cancel()
        doc = self.document
        if doc.graph is None:
            self.panel.set_status("No model.", error=True)
            return None
        if doc.problems:
            self.panel.set_status("The graph has invalid nodes: fix or undo the edit to run a "
                                  "sample.", error=True)
            return None
        self.spec = spec
        self._stale = False
        quantized_from = None
        recipe = doc.quant.recipe()  # a copy: the GUI thread may tune a range meanwhile
        if recipe is not None:
            quantized_from = (doc.quant.current().graph, recipe)
        job = Job(sample_job(doc.graph, spec, quantized_from), "Running a sample", self)
        job.progress.connect(lambda f, _t: self.panel.progress.setValue(int(f * 1000)))
        job.succeeded.connect(self.take_result)
        job.failed.connect(self._failed)
        job.cancelled.connect(lambda: self._ended("Cancelled."))
        self._job = job
        self.panel.set_running(True)
        self.panel.set_status(f"Running {spec.describe()}…")
        job.start()
        return job

    def cancel(self) -> None:
        """Stop the sample being run (the last result stays, if it is still current)."""
        if self._job is not None and self._job.is_active():
            self._job.cancel()

    def _ended(self, message: str, error: bool = False) -> None:
        self._job = None
        self.panel.set_running(False)
        self.panel.set_status(message, error)
        self.ran.emit()

    def _failed(self, message: str) -> None:
        self._ended(message, error=True)

    def take_result(self, result: SampleRun) -> None:
        """Show a finished run (one of a graph since replaced is dropped)."""
        if result.graph is not self.document.graph:  # an edit came first: it runs again
            self._ended("")
            return
        self.result = result
        pairs = f", int8 beside {len(result.int8)} of them" if result.int8 else ""
        count = sum(len(n.outputs) for n in result.graph.nodes)
        self._ended(f"{result.spec.describe()}: {count} values{pairs}. Click an edge.")
        edge = self.window.canvas.selected_edge()
        if edge is not None:
            self.show_value(edge)

    # -- staleness ------------------------------------------------------------------------------

    def _model_opened(self) -> None:
        self.cancel()
        self.result, self.spec, self.value = None, None, None
        self._stale = False
        self.panel.show_activation(None)
        self.panel.set_status("Run a sample, then click an edge.")
        self._fresh = True  # the graph comes next (graphChanged)

    def _changed(self) -> None:
        """The graph or its quantization changed: the values shown describe neither."""
        if self.result is None and self.spec is None:
            self._fill_sources(keep=not self._fresh)
            self._fresh = False
            return
        self.cancel()
        self.result = None
        self.panel.show_activation(None, "The model changed: running the sample again…")
        self._fill_sources()
        self._stale = True
        self._soon.start()  # one edit emits several signals: run once

    def _rerun(self) -> None:
        if not self._stale or self.spec is None:
            return
        if not self.dock.isVisible():
            self.panel.set_status("The model changed; the sample runs again when this panel "
                                  "is shown.")
            return
        self.run(self.spec)

    def _visibility_changed(self, visible: bool) -> None:
        if visible and self._stale:
            self._soon.start()

    # -- showing --------------------------------------------------------------------------------

    def _node_selected(self, key) -> None:
        """A node (or a closed group) selected: its output, the value leaving it."""
        graph = self.document.graph
        layout = self.window.canvas.graph_layout()
        if graph is None or key is None:
            return
        if isinstance(key, str) and key.startswith("group:") and layout is not None \
                and layout.grouping is not None:
            members = set(layout.grouping.hierarchy.members(key))
            last = [n for n in graph.nodes if n.id in members][-1:]  # in graph order
            key = last[0].id if last else None
        if isinstance(key, int):
            node = next((n for n in graph.nodes if n.id == key), None)
            if node is not None and node.outputs:
                self.show_value(node.outputs[0].name)

    def show_value(self, name: str) -> None:
        """Show value `name` of the current run (as a click on its edge does)."""
        self.value = name
        if self.result is None:
            self.panel.show_activation(None, f"<b>{name}</b>: run a sample to see its values.")
            self.shown.emit("")
            return
        try:
            shown = activation(self.result, name)
        except KeyError:  # an edge of a graph being laid out again
            self.panel.show_activation(None)
            self.shown.emit("")
            return
        self.panel.show_activation(shown, self._title(shown))
        self.shown.emit(name)

    def _title(self, a) -> str:
        shape = "×".join(str(d) for d in a.array.shape) or "scalar"
        layout = f" {a.layout}" if a.layout else ""
        text = f"<b>{a.name}</b> · {a.array.dtype.name} [{shape}]{layout} · " \
               f"{self.result.spec.describe()}"
        if a.int8 is not None:
            text += f"<br>int8: {a.int8.name} ({a.int8.quant})"
        if a.array.ndim == 4 and a.array.shape[0] > 1:
            text += f"<br>maps of batch element 0 of {a.array.shape[0]}"
        return text

    def current(self):
        """The Activation on display, or None."""
        return self.panel.activation

    # -- files ----------------------------------------------------------------------------------

    def choose_file(self) -> None:
        """Ask for an .npy or .npz file of samples and make it the source."""
        start = str(self.document.path.parent) if self.document.path else ""
        path, _ = QFileDialog.getOpenFileName(self.window, "Sample File", start,
                                              "NumPy arrays (*.npy *.npz);;All files (*)")
        if path:
            self.panel.add_source(Path(path).name, path)
        else:
            self._fill_sources()

    def export(self, path: str | Path | None = None) -> Path | None:
        """Write the value shown, exactly as computed, to `path` (asked for when None)."""
        shown = self.panel.activation
        if shown is None:
            return None
        if path is None:
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in shown.name)
            start = str((self.document.path.parent if self.document.path else Path()) /
                        f"{safe}.npy")
            chosen, _ = QFileDialog.getSaveFileName(self.window, "Export Activation", start,
                                                    "NumPy arrays (*.npy)")
            if not chosen:
                return None
            path = chosen
        try:
            written = export_npy(path, shown.array)
        except KilnError as exc:
            dialogs.show_error(self.window, "Cannot export activation", str(exc))
            return None
        self.window.statusBar().showMessage(f"Exported {shown.name} to {written}", 6000)
        return written


def install(window) -> ActivationController:
    """Add the Activations dock (View > Activations); returns its controller."""
    return ActivationController(window)


def screenshots(window, save) -> None:
    """The panel on the sample's second convolution, float beside int8 when calibrated."""
    from PySide6.QtWidgets import QApplication

    controller: ActivationController = window.activations
    graph = window.document.graph
    if graph is None or not graph.nodes:
        return
    spec = SampleSpec(controller.panel.chosen_source() or RANDOM, 0)
    recipe = window.document.quant.recipe()
    quantized_from = None if recipe is None else (window.document.quant.current().graph, recipe)
    try:  # on the GUI thread: scripted runs have no event loop to wait on
        result = sample_job(graph, spec, quantized_from)(Progress(lambda *_: None))
    except KilnError:
        return
    controller.spec = spec
    controller.take_result(result)
    names = [v.name for n in graph.nodes for v in n.outputs]
    best = next((n for n in names if n in controller.result.int8 and
                 controller.result.values[n].ndim == 4), None)
    controller.show_value(best or next((n for n in names
                                        if controller.result.values[n].ndim == 4), names[0]))
    shown = controller.dock.isVisible()
    controller.dock.show()
    floating = controller.dock.isFloating()
    controller.dock.setFloating(True)
    controller.dock.resize(420, 1000)
    QApplication.processEvents()  # the maps' heights settle before the picture is taken
    save(controller.panel, "activations.png")
    controller.dock.setFloating(floating)
    controller.dock.setVisible(shown)
