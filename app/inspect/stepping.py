"""Pass stepping: run the pipeline in a worker, step through its stages on a read-only canvas.

The document's canvas stays the editable graph; a stage is shown on a second canvas that
replaces it (with a banner) while the user steps, so no edit can reach a snapshot.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QWidget,
)

from app.inspect import stage_view
from app.inspect.stages import Run, Stage, names_html, row, run_stages
from app.window.actions import menu_before_help
from app.window.workers import Job, Progress
from compiler.errors import KilnError, one_line
from compiler.ir.graph import Graph
from compiler.passes.base import get_pass
from compiler.passes.cleanup import dce
from compiler.passes.pipeline import Pipeline, default_pipeline, load_pipeline, save_pipeline
from compiler.passes.runner import PipelineResult
from compiler.stats import compute_stats
from views.layout import compute_layout
from views.passes import PassPanel, StageView
from views.pipeline_editor import PipelineEditor

# Verify (run the interpreter after every changed pass) only up to this many MACs: about a
# second for pretrainedResnet's 12.5M on one core; bigger models would keep a core busy.
VERIFY_MACS = 30_000_000
PLAY_MS = 800  # time per stage when playing
RUN_DELAY_MS = 400  # after an edit, wait this long for the next one before running again
PIPELINE_FILTER = "Kiln pipelines (*.json);;All files (*)"


class SteppingController(QObject):
    """Runs the pipeline on the document's graph and shows its stages.

    Signals:
        stageChanged(index): a stage is on the canvas (-1: back to the document's graph).
        resultReady(result): a run finished; `result` is the PipelineResult (also `.result`).
        runFailed(message): a run failed; the one-line message is in the panel.
    """

    stageChanged = Signal(int)
    resultReady = Signal(object)
    runFailed = Signal(str)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.result: PipelineResult | None = None
        self.stages: list[Stage] = []
        self.run_info: Run | None = None
        self.index: int | None = None  # stage on the canvas; None: the document's graph
        self.document = window.document
        self.focus: set[int] = set()  # source-model ids of the node selected on a stage
        self.verify_override: bool | None = None  # the user's choice; None: by model size
        self.lowering = None  # the LoweringController, which shows the rows after the stages
        self._job: Job | None = None
        self._run_timer = QTimer(self, singleShot=True, interval=RUN_DELAY_MS)
        self._run_timer.timeout.connect(self._auto_run)
        self._play_timer = QTimer(self, interval=PLAY_MS)
        self._play_timer.timeout.connect(self._play_step)
        self._build_widgets()
        self._build_menu()
        self._connect()

    # -- widgets ------------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        window = self.window
        self.panel = PassPanel()
        self.editor = PipelineEditor()
        self.editor.set_pipeline(self.document.pipeline)
        self.dock = self._dock("Passes", self.panel)
        self.editor_dock = self._dock("Pipeline", self.editor)
        # Tabs beside the operator palette: stacked, the docks would make the window's
        # minimum height grow by theirs.
        palette = window.docks.get("palette")
        if palette is not None:
            window.tabifyDockWidget(palette, self.dock)
        window.tabifyDockWidget(self.dock, self.editor_dock)
        (palette or self.dock).raise_()
        window.resizeDocks([self.dock], [360], Qt.Orientation.Horizontal)

        self.view = StageView()
        self.view.backRequested.connect(self.leave_stage)
        self.canvas, self.banner = self.view.canvas, self.view.banner
        self.view.hide()
        central = window.centralWidget().layout()
        central.insertWidget(central.indexOf(window.canvas) + 1, self.view, 1)

    def _dock(self, title: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(title, self.window)
        dock.setObjectName(f"dock:{title}")
        dock.setWidget(widget)
        self.window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        return dock

    def _build_menu(self) -> None:
        window = self.window

        def action(text: str, slot, shortcut: str | None = None) -> QAction:
            act = QAction(text, window)
            if shortcut:
                act.setShortcut(QKeySequence(shortcut))
            act.triggered.connect(slot)
            return act

        self.run_action = action("&Run Pipeline", self.run_from_menu, "F5")
        self.prev_action = action("&Previous Stage", lambda: self.step(-1), "Alt+Up")
        self.next_action = action("&Next Stage", lambda: self.step(1), "Alt+Down")
        self.play_action = action("P&lay Stages", lambda: self.panel.play_button.toggle())
        self.back_action = action("Back to the &Model", self.leave_stage)
        menu = menu_before_help(window, "&Passes")
        menu.addActions([self.run_action, self.prev_action, self.next_action, self.play_action,
                         self.back_action])
        menu.addSeparator()
        menu.addActions([self.dock.toggleViewAction(), self.editor_dock.toggleViewAction()])
        self.menu = menu

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline the panels compile with (the document's)."""
        return self.document.pipeline

    def _connect(self) -> None:
        self.document.graphChanged.connect(self._graph_changed)
        self.document.pathChanged.connect(self._path_changed)
        self.document.modelOpened.connect(self._model_opened)
        self.document.problemsChanged.connect(self._graph_changed)
        self.panel.verifyToggled.connect(self._verify_toggled)
        self.panel.stageSelected.connect(self.show_stage)
        self.panel.playToggled.connect(self._play_toggled)
        self.panel.runRequested.connect(self._run_edited)
        self.panel.provenance.linkActivated.connect(self._link)
        self.editor.runRequested.connect(self._run_edited)
        self.editor.saveRequested.connect(self._save_dialog)
        self.editor.loadRequested.connect(self._load_dialog)
        self.editor.resetRequested.connect(self._reset)
        self.canvas.nodeSelected.connect(self._node_selected)
        self.view.clean_final.toggled.connect(self._clean_toggled)

    # -- running ------------------------------------------------------------------------------

    def verify_for(self, graph: Graph) -> bool:
        """Whether a run verifies every pass: the user's choice, else for small models only."""
        if self.verify_override is not None:
            return self.verify_override
        return compute_stats(graph).macs <= VERIFY_MACS

    def _verify_toggled(self, on: bool) -> None:
        self.verify_override = on
        self.run()

    def _path_changed(self) -> None:
        self.verify_override = None  # another model: its size decides again

    def _graph_changed(self) -> None:
        if self._job is not None:
            self._job.cancel()  # its result would be for the graph before the change
            self._busy(False)
        if self.index is not None:
            self.leave_stage()  # the stages belong to the graph before the change
        self._run_timer.start()

    def _auto_run(self) -> None:
        if self.window.isVisible():  # not for a window being closed (or never shown)
            self.run()

    def _model_opened(self) -> None:
        """Another model: no stage, record or provenance line of the previous one stays."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
            self._busy(False)
        if self.index is not None:
            self.leave_stage()
        self.result, self.stages, self.run_info, self.focus = None, [], None, set()
        self.panel.set_stages([])
        self.panel.set_status("")
        self.panel.set_doc("")
        self.panel.set_provenance("")

    def _refuse_invalid(self) -> str:
        """Why the graph is not run (the panel says it too), or "" when it can run.

        A graph with invalid nodes is never run: its types are stale, so any pass would fail.
        """
        doc = self.document
        if not doc.problems:
            return ""
        node_id, reason = next(iter(doc.problems.items()))
        name = next((n.name for n in doc.graph.nodes if n.id == node_id), f"#{node_id}")
        more = f" (and {len(doc.problems) - 1} more)" if len(doc.problems) > 1 else ""
        message = one_line(f"Not run: node {name} is invalid{more}: {reason}. Fix or undo the "
                           "edit.")
        self.panel.set_stages([])
        self.result, self.stages, self.run_info = None, [], None
        self.panel.set_status(f"<span style='color:#c62828'>{escape(message)}</span>")
        self.runFailed.emit(message)
        return message

    def run(self, pipeline: Pipeline | None = None) -> Job | None:
        """Run the pipeline (the edited one by default) on the document's graph in a worker."""
        graph = self.document.graph
        if graph is None:
            return None
        if pipeline is not None:
            self.document.set_pipeline(pipeline)
        self._run_timer.stop()
        if self._job is not None:
            self._job.cancel()
            self._job = None
            self._busy(False)
        if self._refuse_invalid():
            return None
        verify = self.verify_for(graph)
        job = Job(run_stages(self.document.compilation(), verify), "Running the pipeline", self)
        job.progress.connect(lambda fraction, text: self.panel.set_status(
            f"{text}… {fraction:.0%}"))
        job.succeeded.connect(self._apply)
        job.failed.connect(self._failed)
        self._job = job
        self._busy(True)
        job.start()
        return job

    def run_from_menu(self) -> Job | None:
        """Passes > Run Pipeline (F5): run, raise the Passes panel, report in the status bar.

        So the key press visibly does something, even when nothing can run.
        """
        self.dock.show()
        self.dock.raise_()
        bar = self.window.statusBar()
        if self.document.graph is None:
            bar.showMessage("Open a model to run the pass pipeline on it", 5000)
            return None
        job = self.run()
        if job is None:
            bar.showMessage(self._refuse_invalid() or "The pipeline did not start", 8000)
        else:
            bar.showMessage("Running the pass pipeline…")
            job.succeeded.connect(lambda run: bar.showMessage(
                f"Pass pipeline done: {len(run.result.records)} stages, "
                f"{len(run.result.graph.nodes)} nodes at the end", 8000))
            job.failed.connect(lambda message: bar.showMessage(
                f"Pass pipeline failed: {message}", 8000))
        return job

    def run_now(self) -> Run:
        """Run on the GUI thread and show the result (scripted screenshots)."""
        graph = self.document.graph
        if graph is None:
            raise KilnError("there is no model to run the pipeline on")
        self._run_timer.stop()
        if self._job is not None:
            self._job.cancel()
        refused = self._refuse_invalid()
        if refused:
            raise KilnError(refused)
        run = run_stages(self.document.compilation(), self.verify_for(graph))(Progress(
            lambda *_args: None))
        self._apply(run)
        return run

    def _busy(self, on: bool) -> None:
        self.panel.run_button.setEnabled(not on)
        self.editor.run_button.setEnabled(not on)
        self.run_action.setEnabled(not on)

    def is_running(self) -> bool:
        """True while a pipeline run is in progress."""
        return self._job is not None and self._job.is_active()

    def _apply(self, run: Run) -> None:
        self._job = None
        self._busy(False)
        was = self.index
        self.run_info, self.result, self.stages = run, run.result, run.stages
        self.panel.set_stages([row(s, run.verify) for s in run.stages])
        self.panel.set_status(self._summary(run))
        self.panel.set_verify(run.verify)
        self.editor.set_message("")
        if was is not None:
            self.show_stage(min(was, len(self.stages) - 1))
        else:
            self.panel.set_doc(self._doc(0))
        self.resultReady.emit(run.result)

    def _failed(self, message: str) -> None:
        self._job = None
        self._busy(False)
        self.panel.set_status(f"<span style='color:#c62828'>Pipeline failed: "
                              f"{escape(message)}</span>")
        self.editor.set_message(message, error=True)
        self.runFailed.emit(message)

    def _summary(self, run: Run) -> str:
        records = run.result.records
        changed = sum(r.changed for r in records)
        macs = compute_stats(run.result.initial).macs
        if run.verify:
            check = f"verified after every pass ({macs / 1e6:.1f}M MACs)"
        elif self.verify_override is False:
            check = "not verified (switched off)"
        else:
            check = f"not verified: {macs / 1e6:.0f}M MACs is above {VERIFY_MACS / 1e6:.0f}M"
        bad = [r.name for r in records if r.matches is False]
        worse = f"; <b style='color:#c62828'>outputs differ after {bad[0]}</b>" if bad else ""
        return (f"{len(records)} passes, {changed} changed the graph: "
                f"{len(run.result.initial.nodes)} → {len(run.result.graph.nodes)} nodes in "
                f"{run.seconds:.2f} s · {check}{worse}")

    def _run_edited(self) -> None:
        self.run(self.editor.pipeline())

    # -- the pipeline file --------------------------------------------------------------------

    def save_pipeline_file(self, path: str | Path) -> bool:
        """Write the edited pipeline to `path`; an error becomes the editor's message."""
        try:
            save_pipeline(self.editor.pipeline(), path)
        except (KilnError, OSError) as exc:
            self.editor.set_message(one_line(f"Cannot save the pipeline: {exc}"), error=True)
            return False
        self.editor.set_message(f"Saved {Path(path).name}")
        return True

    def load_pipeline_file(self, path: str | Path) -> bool:
        """Read a pipeline file into the editor and run it; an error becomes a message."""
        try:
            pipeline = load_pipeline(path)
        except KilnError as exc:
            self.editor.set_message(one_line(str(exc)), error=True)
            return False
        self.editor.set_pipeline(pipeline)
        self.editor.set_message(f"Loaded {Path(path).name}")
        self.run(pipeline)
        return True

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self.window, "Save Pipeline", "pipeline.json",
                                              PIPELINE_FILTER)
        if path:
            self.save_pipeline_file(path)

    def _load_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Load Pipeline", "", PIPELINE_FILTER)
        if path:
            self.load_pipeline_file(path)

    def _reset(self) -> None:
        self.editor.set_pipeline(default_pipeline())
        self.run(default_pipeline())

    # -- stepping -----------------------------------------------------------------------------

    def show_stage(self, index: int) -> None:
        """Put stage `index` (0: the loaded graph) on the stage canvas with its diff."""
        if self.lowering is not None and self.lowering.owns(index):
            self.index = index  # a lowering pass: its own view, left like a stage
            self.panel.set_current(index)
            self.lowering.show(index)
            self.stageChanged.emit(index)
            return
        if not 0 <= index < len(self.stages):
            return
        if self.lowering is not None:
            self.lowering.hide()
        stage = self.stages[index]
        entering = self.index is None or self.index >= len(self.stages)
        if entering:
            self.window.canvas.select(None)  # no edit may act on a hidden selection
            self.window.canvas.hide()
            self.view.show()
            self.dock.show()  # stepping from the menu: the stages list comes forward
            self.dock.raise_()
        self.index = index
        self.draw_stage(self.canvas, index, after_graph=self._match_document_view
                        if entering else None)
        self._apply_focus()
        self.panel.set_current(index)
        self.panel.set_doc(self._doc(index))
        self.window.show_canvas(self.canvas)  # search, minimap and zoom follow the stage
        last = len(self.stages) - 1
        self.banner.setText(f"Viewing stage {index}/{last}: {stage.name} — read-only, "
                            f"Esc to return to the model")
        self.canvas.setFocus()
        self.stageChanged.emit(index)

    def draw_stage(self, canvas, index: int, after_graph=None) -> None:
        """Draw stage `index` on `canvas` with its diff (presentation mode draws it too).

        `after_graph(stage)` runs once the graph is on the canvas, before the diff.
        """
        stage = self.stages[index]
        clean = self.is_clean(index)
        canvas.set_graph(stage.graph, self._clean_layout(stage) if clean
                         else stage.placed.layout)
        if after_graph is not None:
            after_graph(stage)
        record = stage.record
        if record is not None and not clean:
            ghosts = {k: (g.box, g.label, g.op) for k, g in stage.placed.ghosts.items()}
            canvas.set_diff(record.added, record.modified, ghosts)
        canvas.set_faded(set() if clean else stage.placed.dead)

    def is_clean(self, index: int) -> bool:
        """Whether stage `index` is shown as a clean layout: the final graph, asked clean."""
        return index == len(self.stages) - 1 and index > 0 and \
            self.view.clean_final.isChecked()

    def _clean_layout(self, stage: Stage):
        """The final graph laid out afresh (once): only live nodes, no holes, no ghosts."""
        if stage.clean is None:
            live = stage.graph.snapshot()
            dce(live)
            stage.clean = compute_layout(live)
        return stage.clean

    def _clean_toggled(self) -> None:
        if self.index is not None and self.index == len(self.stages) - 1:
            self.show_stage(self.index)

    def _match_document_view(self, stage: Stage) -> None:
        """Start where the document's canvas was (see `stage_view.match_document_view`)."""
        stage_view.match_document_view(self.window, self.canvas, stage.placed.shift
                                       - self.stages[0].placed.shift)

    def leave_stage(self) -> None:
        """Back to the document's editable graph."""
        self.panel.stop_playing()
        if self.index is None:
            return
        self.index = None
        self.view.hide()
        if self.lowering is not None:
            self.lowering.hide()
        self.window.canvas.show()
        self.window.show_canvas(self.window.canvas)
        self.window.canvas.setFocus()
        self.panel.set_current(None)
        self.window.refresh_properties()  # the document's selection again, editable
        self.stageChanged.emit(-1)

    def step(self, delta: int) -> bool:
        """Show the next (1) or previous (-1) listed stage; False at either end."""
        return self.panel.step(delta)

    def _play_toggled(self, on: bool) -> None:
        if on and self.stages:
            if self.index is None or self.index >= len(self.stages) - 1:
                self.show_stage(0)
            self._play_timer.start()
        else:
            self._play_timer.stop()

    def _play_step(self) -> None:
        if not self.step(1):
            self.panel.stop_playing()

    def _doc(self, index: int) -> str:
        """What stage `index` is: the pass's docstring, what it did and why it is there."""
        stage = self.stages[index]
        if stage.record is None:
            count = len(stage.graph.nodes)
            return (f"<h3>The loaded model</h3><p>{count} nodes, before any pass. Select a "
                    f"stage to see the graph after that pass; removed nodes are red ghosts, "
                    f"added ones green, modified ones amber.</p>")
        r = stage.record
        position = index - 1
        enabled = self.run_info.pipeline.enabled() if self.run_info else []
        note = enabled[position].note if position < len(enabled) else ""
        doc = get_pass(r.name).doc
        paragraphs = "".join(f"<p>{escape(' '.join(p.split()))}</p>" for p in doc.split("\n\n"))
        what = (f"{r.nodes_before} → {r.nodes_after} nodes: +{len(r.added)} added, "
                f"−{len(r.removed)} removed, ~{len(r.modified)} modified in {r.ms:.1f} ms"
                + (f", {r.iterations} iterations" if r.iterations > 1 else "")
                if r.changed else "changed nothing")
        why = f"<p><i>Here because: {escape(note)}</i></p>" if note else ""
        said = "".join(f"<li>{escape(n)}</li>" for n in r.notes)
        return f"<h3>{escape(r.name)} <small>({r.category})</small></h3><p>{what}</p>" \
               f"{f'<ul>{said}</ul>' if said else ''}{paragraphs}{why}"

    # -- provenance ---------------------------------------------------------------------------

    def _node_selected(self, key) -> None:
        if self.index is None:
            return
        stage = self.stages[self.index]
        nodes = {n.id: n for n in stage.graph.nodes}
        properties = self.window.properties
        if not isinstance(key, int) or key not in nodes:
            self.focus = set()
            self._apply_focus()
            properties.clear("Select a node of the stage to see its properties (read-only).")
            return
        self.focus = set(nodes[key].provenance)
        self._apply_focus()
        properties.show_node(stage.graph, key, macs=stage.macs().get(key),
                             read_only=f"stage {self.index}/{len(self.stages) - 1}, "
                                       f"{stage.name}")

    def related(self, index: int) -> set[int]:
        """Ids of stage `index`'s nodes that share a source node with the focused node."""
        if not self.focus:
            return set()
        return {n.id for n in self.stages[index].graph.nodes if self.focus & set(n.provenance)}

    def _apply_focus(self) -> None:
        if self.index is None:
            return
        keys = self.related(self.index)
        self.canvas.set_related(keys)
        if not self.focus:
            self.panel.set_provenance("Select a node to see where it came from.")
            return
        initial = self.stages[0].graph
        final = self.stages[-1].graph
        sources = sorted(self.focus)
        became = sorted(self.related(len(self.stages) - 1))
        self.panel.set_provenance(
            f"From loaded node(s) <b>{names_html(initial, sources)}</b> "
            f"(<a href='sources'>show on the loaded stage</a>); in the final graph: "
            f"<b>{names_html(final, became)}</b> (<a href='final'>show</a>). "
            f"Highlighted here: {len(keys)}.")

    def _link(self, target: str) -> None:
        self.show_stage(0 if target == "sources" else len(self.stages) - 1)

    def select_on_stage(self, key: int | None) -> None:
        """Select a node of the shown stage (as a click would), focusing its provenance."""
        self.canvas.select(key)
        self._node_selected(self.canvas.selected_key())


def install(window) -> SteppingController:
    """Add the pass panel, the pipeline editor, the stage canvas and the Passes menu."""
    return SteppingController(window)


def _fusion_stage(stages: list[Stage]) -> int:
    """The stage a screenshot shows: a fusion pass that changed the graph, else the last change."""
    changed = [i for i, s in enumerate(stages) if s.record is not None and s.record.changed]
    for i in changed:
        if stages[i].record.category == "fuse":
            return i
    return changed[-1] if changed else 0


def screenshots(window, save) -> None:
    """passes.png (the panel), stage_diff.png (a fusion stage) and pipeline_editor.png."""
    controller: SteppingController = window.stepping
    if window.document.graph is None:
        return
    controller.run_now()
    index = _fusion_stage(controller.stages)
    controller.dock.show()
    controller.dock.raise_()
    controller.show_stage(index)
    record = controller.stages[index].record
    if record is not None and record.added:
        controller.canvas.set_zoom(0.8)
        controller.canvas.center_on(record.added[0])
    save(controller.dock, "passes.png")
    save(controller.view, "stage_diff.png")
    integer = next((i for i, s in enumerate(controller.stages) if s.record is not None
                    and s.record.name == "to_integer" and s.record.changed), None)
    if integer is not None:  # a quantized model: the stage where QDQ became integer operators
        controller.show_stage(integer)
        graph = controller.stages[integer].graph
        conv = next((n for n in graph.nodes if n.op == "QLinearConv"), None)
        if conv is not None:
            controller.canvas.center_on(conv.id)
            controller.select_on_stage(conv.id)
        save(controller.view, "stage_integer.png")
        save(window.properties.page, "properties_integer.png")
    controller.editor_dock.show()
    controller.editor_dock.raise_()
    save(controller.editor_dock, "pipeline_editor.png")
    controller.dock.raise_()
    controller.leave_stage()
