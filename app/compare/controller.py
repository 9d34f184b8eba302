"""Compare > ...: two graphs side by side, their layers paired, differences to step through.

Any pair the driver can make: the open model against its final graph, another file, its own
int8 quantization (from the Quantization dock's calibration) or itself compiled for two
targets. The comparison (`compiler.graphdiff`), both layouts and both memory plans are computed
in a worker; the window then shows two canvases whose zoom, pan and selection follow each other,
coloured by what changed, with the list of differences and the metric deltas of the chosen pair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QInputDialog, QVBoxLayout, QWidget

from app.compare.groups import CanvasGroups
from app.quant.state import session_recipe
from app.window.actions import menu_before_help
from app.window.workers import Job, Progress
from compiler.codegen.bundle import report as bundle_report
from compiler.driver import Options, compilation
from compiler.graphdiff import GraphDiff
from compiler.graphdiff.stages import Operand, compare
from compiler.layer_instructions import count_instructions
from compiler.layer_metrics import values_by_name
from compiler.memory.buffers import align_up
from compiler.quant.calibrate import METHODS, SCHEMAS
from compiler.quant.evaluate import evaluate
from compiler.quant.recipe import QuantRecipe, quantize_with
from compiler.stage_notes import stage_keys
from views import screen_fit
from views.compare_view import STATUS_COLORS, CompareView
from views.group_layout import lay_out_view
from views.layout import GraphLayout
from views.timeline import Bar, window_fields

TARGETS = ("cortex-m7", "cortex-m55")
WINDOW_SIZE = QSize(1400, 900)  # on a big enough screen


@dataclass
class Compared:
    """A comparison ready to show: the diff, both layouts, both timelines' plans."""

    diff: GraphDiff
    layout_a: GraphLayout
    layout_b: GraphLayout
    plan_a: tuple | None  # (bars, live bytes per step, lower bound, arena) or None
    plan_b: tuple | None
    size_a: dict | None = None  # the bundle report of each side's network, or None
    size_b: dict | None = None


def _plan(operand: Operand) -> tuple | None:
    """The operand's memory plan as the timeline draws it."""
    if operand.options is None:
        return None
    compiled = compilation(operand.graph, operand.pipeline)
    doc = compiled.plan(operand.options).to_json()
    ops = {n.name: n.op for n in compiled.prepared.nodes}
    a = doc["alignment"]
    bars = [Bar(b["name"], b["node"], ops.get(b["node"], "Input"), b["size"], b["offset"],
                align_up(b["size"], a), b["first"], b["last"],
                (b["streams_from"] or {}).get("source", ""), *window_fields(b["window"]))
            for b in doc["buffers"]]
    return bars, doc["live_bytes"], doc["lower_bound"], doc["activations"]


def compare_job(a: Operand | Callable[[], Operand], b: Operand | Callable[[], Operand],
                same_origin: bool | None = None, instructions: bool = False):
    """The job: compare, lay both graphs out, plan both for their targets.

    `a` and `b` may be functions making the operand (reading another model file, quantizing),
    run in the job.
    With `instructions`, both sides are counted on their Cortex-M targets under QEMU first,
    and the counts become a per-layer metric with deltas.
    """
    def work(progress: Progress) -> Compared:
        nonlocal a, b
        if callable(a):
            progress.report(0.0, "Making the first graph")
            a = a()
        if callable(b):
            progress.report(0.0, "Making the other graph")
            b = b()
        if instructions:
            a = _with_instructions(a, progress, 0.0)
            b = _with_instructions(b, progress, 0.3)
        progress.report(0.6, "Comparing the graphs")
        diff = compare(a, b, same_origin)
        progress.check()
        progress.report(0.7, "Laying out both graphs")
        layout_a, layout_b = lay_out_view(diff.a.graph), lay_out_view(diff.b.graph)
        progress.check()
        progress.report(0.8, "Planning memory and sizing both networks")
        return Compared(diff, layout_a, layout_b, _plan(a), _plan(b), _size(a), _size(b))

    return work


def _with_instructions(operand: Operand, progress: Progress, start: float) -> Operand:
    """The operand with its instructions per layer on its target as an extra metric."""
    if operand.options is None:
        return operand
    compiled = compilation(operand.graph, operand.pipeline)
    target = operand.options.target

    def report(fraction: float, text: str) -> None:
        progress.report(start + 0.3 * fraction, f"{operand.label}: {text}")
    metric = count_instructions(compiled, target, None, report, peer=False)
    shown = compiled.stage(operand.stage) if operand.stage not in ("loaded", "0") \
        else operand.graph
    return replace(operand, extra={**(operand.extra or {}),
                                   "instructions": values_by_name(metric, shown)})


def sqnr_by_node(graph, qdq, data, samples: int) -> dict[int, float]:
    """Each quantized tensor's SQNR (dB, on `samples` of `data`) on the QDQ node making it."""
    report = evaluate(graph, qdq, data, limit=samples)
    out: dict[int, float] = {}
    for tensor in report.tensors:
        try:
            producer = qdq.value(tensor.name).producer
        except KeyError:
            continue
        if producer is not None:
            out[producer.id] = tensor.sqnr
    return out


def _size(operand: Operand) -> dict | None:
    """The size report of the operand's network for its target (None without one)."""
    if operand.options is None:
        return None
    return bundle_report(compilation(operand.graph, operand.pipeline).net(operand.options))


class CompareController(QObject):
    """Owns the Compare menu and window; keeps the two canvases in step.

    Signals:
        shown(): a comparison is on screen.
    """

    shown = Signal()

    def __init__(self, window):
        super().__init__(window)
        self.main = window
        self.view = CompareView()
        self.groups_a = CanvasGroups(self.view.canvas_a)
        self.groups_b = CanvasGroups(self.view.canvas_b)
        self.window = QWidget(window, Qt.WindowType.Window)
        self.window.setWindowTitle("Compare")
        QVBoxLayout(self.window).addWidget(self.view)
        screen_fit.closable(self.window)  # Esc and Ctrl+W, beside the Close button
        self.view.closeRequested.connect(self.window.close)
        self.result: Compared | None = None
        self.job: Job | None = None
        self._syncing = False
        self._build_menu(window)
        window.document.modelOpened.connect(self._model_opened)
        window.document.compareRequested.connect(lambda a, b: self.start(a, b, True))
        self.view.rowChosen.connect(self.show_row)
        for side, canvas in (("a", self.view.canvas_a), ("b", self.view.canvas_b)):
            canvas.nodeSelected.connect(lambda key, side=side: self._selected(side, key))
            canvas.viewportChanged.connect(lambda side=side: self._follow_view(side))

    def _model_opened(self) -> None:
        """Another model: a comparison of the last one (shown or running) goes away."""
        if self.job is not None:
            self.job.cancel()
            self.job = None
        self.result = None
        self.window.hide()
        for canvas in (self.view.canvas_a, self.view.canvas_b):
            canvas.set_graph(None, None)

    def _build_menu(self, window) -> None:
        def action(text: str, slot, tip: str) -> QAction:
            act = QAction(text, window)
            act.setStatusTip(tip)
            act.triggered.connect(slot)
            return act

        self.stage_action = action("With the &Final Graph", self.compare_final,
                                   "The open model beside its graph after the pass pipeline")
        self.file_action = action("With &File…", self.choose_file,
                                  "The open model beside another model file (final graphs)")
        self.int8_action = action("With its &int8 Quantization", self.compare_int8,
                                  "The float model beside the integer model its calibration "
                                  "makes")
        self.pass_action = action("With a &Pass Stage…", self.choose_stage,
                                  "The open model beside its graph after any pass of the "
                                  "pipeline")
        self.targets_action = action("&Targets: Cortex-M7 and Cortex-M55",
                                     lambda: self.compare_targets(),
                                     "The final graph compiled for two targets: arena bytes "
                                     "per layer side by side")
        self.choose_targets_action = action("Two &Targets…", lambda: self.choose_targets(),
                                            "The final graph compiled for two targets you "
                                            "choose")
        self.quant_action = action("With Another &Quantization…", self.choose_quantization,
                                   "The calibrated int8 model beside another method or "
                                   "schema's, each layer's SQNR side by side")
        self.instructions_action = action(
            "Two Targets with &Instructions…", lambda: self.choose_targets(True),
            "Two Cortex-M cores: each layer's executed instructions under QEMU, side by side")
        menu = menu_before_help(window, "&Compare")
        menu.addActions([self.stage_action, self.pass_action, self.file_action,
                         self.int8_action, self.quant_action, self.targets_action,
                         self.choose_targets_action, self.instructions_action])
        self.menu = menu

    # -- what to compare ------------------------------------------------------------------------

    def _graph(self):
        graph = self.main.document.graph
        if graph is None:
            self.main.statusBar().showMessage("Open a model to compare it.", 5000)
        return graph

    def _label(self) -> str:
        path = self.main.document.path
        return path.name if path else "untitled"

    def compare_final(self) -> Job | None:
        """The open model as loaded beside its final graph."""
        graph = self._graph()
        if graph is None:
            return None
        pipeline = self.main.document.pipeline
        return self.start(Operand(graph, "loaded", label=f"{self._label()} (loaded)",
                                  pipeline=pipeline),
                          Operand(graph, "final", label=f"{self._label()} (final)",
                                  pipeline=pipeline), True)

    def stage_names(self) -> list[str]:
        """The pipeline's enabled passes in order, a repeated one as `name#k` (its k-th run)."""
        if self.main.document.graph is None:
            return []
        return stage_keys([config.name for config in self.main.document.pipeline.enabled()])

    def choose_stage(self) -> None:
        """Compare > With a Pass Stage…: ask which pass."""
        names = self.stage_names()
        if not names:
            self._graph()
            return
        name, ok = QInputDialog.getItem(self.main, "Compare with a Pass Stage",
                                        "The graph after the pass:", names, len(names) - 1,
                                        False)
        if ok:
            self.compare_stage(name)

    def compare_stage(self, stage: str) -> Job | None:
        """The open model as loaded beside its graph after the pass `stage`."""
        graph = self._graph()
        if graph is None:
            return None
        pipeline = self.main.document.pipeline
        return self.start(Operand(graph, "loaded", label=f"{self._label()} (loaded)",
                                  pipeline=pipeline),
                          Operand(graph, stage, label=f"{self._label()} (after {stage})",
                                  pipeline=pipeline), True)

    def choose_targets(self, instructions: bool = False) -> None:
        """Compare > Two Targets…: ask for both (Cortex-M cores only with `instructions`)."""
        from compiler.codegen.targets import target_names

        if instructions:
            from compiler.harness.cortex_m_bench import BENCH_TARGETS
            names = list(BENCH_TARGETS)
        else:
            names = target_names()
        first, ok = QInputDialog.getItem(self.main, "Compare Two Targets", "First target:",
                                         names, names.index(TARGETS[0]), False)
        if not ok:
            return
        second, ok = QInputDialog.getItem(self.main, "Compare Two Targets", "Second target:",
                                          names, names.index(TARGETS[1]), False)
        if ok:
            self.compare_targets((first, second), instructions)

    def choose_file(self) -> None:
        """Ask for a model file and compare with it."""
        path, _ = QFileDialog.getOpenFileName(self.main, "Compare with", "",
                                              "Models (*.onnx *.tflite);;All files (*)")
        if path:
            self.compare_file(path)

    def compare_file(self, path: str | Path) -> Job | None:
        """The open model beside the model in `path`, both final (read in the job)."""
        from compiler.frontends.load import load_model

        graph = self._graph()
        if graph is None:
            return None
        path = Path(path)
        return self.start(Operand(graph, label=f"{self._label()} (final)",
                                  pipeline=self.main.document.pipeline),
                          lambda: Operand(load_model(path), label=f"{path.name} (final)"), False)

    def compare_int8(self) -> Job | None:
        """The float model beside the QDQ model its calibration makes (both final)."""
        graph = self._graph()
        if graph is None:
            return None
        state = self.main.document.quant
        recipe = state.recipe()
        if recipe is None:
            self.main.statusBar().showMessage("Calibrate first (Quantize > Calibrate…) to "
                                              "compare with the int8 model.", 8000)
            return None
        source, pipeline = state.current().graph, self.main.document.pipeline

        def int8() -> Operand:  # the recipe the export builds, quantized in the worker
            return Operand(quantize_with(source, recipe),
                           label=f"int8, {recipe.method}, {recipe.schema} (final)",
                           pipeline=pipeline)
        return self.start(Operand(graph, label=f"{self._label()} (float, final)",
                                  pipeline=pipeline), int8, True)

    def choose_quantization(self) -> None:
        """Compare > With Another Quantization…: ask for the other method and schema."""
        s = self.main.document.quant.session
        if s is None:
            self.main.statusBar().showMessage("Calibrate first (Quantize > Calibrate…) to "
                                              "compare two quantizations.", 8000)
            return
        method, ok = QInputDialog.getItem(self.main, "Compare Two Quantizations",
                                          "Calibration method of the other:", list(METHODS),
                                          METHODS.index(s.options.method), False)
        if not ok:
            return
        schema, ok = QInputDialog.getItem(self.main, "Compare Two Quantizations",
                                          "Schema of the other:", list(SCHEMAS),
                                          SCHEMAS.index(s.options.schema), False)
        if ok:
            self.compare_quantizations(method, schema)

    def compare_quantizations(self, method: str, schema: str) -> Job | None:
        """The int8 model as calibrated beside another method's and schema's.

        Both come from the same profile; each layer's SQNR (on the calibration samples) is a
        metric with deltas.
        """
        s = self.main.document.quant.session
        if s is None:
            self.main.statusBar().showMessage("Calibrate first (Quantize > Calibrate…) to "
                                              "compare two quantizations.", 8000)
            return None
        pipeline = self.main.document.pipeline
        mine = self.main.document.quant.recipe() or session_recipe(s)
        other = mine.but(method=method, schema=schema)

        def side(recipe: QuantRecipe) -> Callable[[], Operand]:
            def make() -> Operand:
                qdq = quantize_with(s.graph, recipe)
                return Operand(qdq, "loaded", label=f"int8, {recipe.method}, {recipe.schema}",
                               pipeline=pipeline,
                               extra={"sqnr": sqnr_by_node(s.graph, qdq, s.live, s.samples)})
            return make
        return self.start(side(mine), side(other), True)

    def compare_targets(self, targets: tuple[str, str] = TARGETS,
                        instructions: bool = False) -> Job | None:
        """The final graph for two targets; with `instructions`, counted on both under QEMU.

        Counting needs two Cortex-M cores QEMU emulates; otherwise it is refused in a line.
        """
        graph = self._graph()
        if graph is None:
            return None
        first, second = targets
        if instructions:
            from compiler.harness.cortex_m_bench import BENCH_TARGETS

            if first not in BENCH_TARGETS or second not in BENCH_TARGETS:
                self.main.statusBar().showMessage(
                    f"Instructions are counted on {', '.join(BENCH_TARGETS)} only.", 8000)
                return None
        pipeline = self.main.document.pipeline
        return self.start(Operand(graph, options=Options(first), label=f"final, {first}",
                                  pipeline=pipeline),
                          Operand(graph, options=Options(second), label=f"final, {second}",
                                  pipeline=pipeline), True, instructions)

    def start(self, a: Operand | Callable[[], Operand], b: Operand | Callable[[], Operand],
              same_origin: bool,
              instructions: bool = False) -> Job:
        """Compute the comparison in a worker; the window shows it when done."""
        if self.job is not None:
            self.job.cancel()
        self.job = Job(compare_job(a, b, same_origin, instructions), "Comparing", self)
        self.job.succeeded.connect(self.show)
        self.job.failed.connect(lambda message: self.main.statusBar().showMessage(
            f"Compare failed: {message}", 8000))
        self.job.progress.connect(lambda _f, text: self.main.statusBar().showMessage(text))
        return self.job.start()

    # -- showing ----------------------------------------------------------------------------------

    def show(self, result: Compared) -> None:
        """Put a comparison on screen."""
        self.result = result
        d, v = result.diff, self.view
        v.canvas_a.set_graph(d.a.graph, result.layout_a, new_model=True)
        v.canvas_b.set_graph(d.b.graph, result.layout_b, new_model=True)
        colors_a, colors_b = node_colors(d)
        self.groups_a.show(colors_a)
        self.groups_b.show(colors_b)
        v.title_a.setText(f"<b>A</b> {escape(d.a.label)}: {len(d.a.graph.nodes)} nodes")
        v.title_b.setText(f"<b>B</b> {escape(d.b.label)}: {len(d.b.graph.nodes)} nodes")
        v.summary.setText(summary_text(d))
        v.set_rows([(r.status, r.title) for r in d.differences])
        v.details.setText(totals_html(d))
        for timeline, plan in ((v.timeline_a, result.plan_a), (v.timeline_b, result.plan_b)):
            if plan is None:
                timeline.clear("No memory plan.")
            else:
                timeline.set_plan(*plan)
        v.set_sizes(result.size_a, result.size_b)
        self.window.setWindowTitle(f"Compare: {d.a.label} ↔ {d.b.label}")
        if not self.window.isVisible():  # a share of the screen: the main window stays in sight
            self.window.resize(screen_fit.share_of_screen(self.window, WINDOW_SIZE, 0.9))
        self.window.show()
        self.main.statusBar().clearMessage()
        self.shown.emit()

    def show_row(self, row: int) -> None:
        """Select and centre the pair (or the lone layer) of difference `row`."""
        if self.result is None:
            return
        diff = self.result.diff.differences[row]
        key = diff.a if diff.a is not None else diff.b
        self._selected("a" if diff.a is not None else "b", key)

    def _selected(self, side: str, key) -> None:
        """A node chosen on one side: select its counterpart on the other, show the deltas."""
        if self._syncing or self.result is None:
            return
        v, d = self.view, self.result.diff
        own, other = (v.canvas_a, v.canvas_b) if side == "a" else (v.canvas_b, v.canvas_a)
        if not isinstance(key, int):
            return
        counterpart = d.correspondence.counterpart(side, key)
        self._syncing = True
        try:
            own.select(key)
            own.center_on(key)
            other.select(counterpart)
            if counterpart is not None:
                other.center_on(counterpart)
        finally:
            self._syncing = False
        ua, ub = d.units_a, d.units_b
        x = ua.anchor.get(key) if side == "a" else (
            None if counterpart is None else ua.anchor.get(counterpart))
        y = ub.anchor.get(key) if side == "b" else (
            None if counterpart is None else ub.anchor.get(counterpart))
        v.details.setText(pair_html(d, x, y))
        rows = [i for i, r in enumerate(d.differences) if (r.a, r.b) == (x, y)
                or (r.a is not None and r.a == x) or (r.b is not None and r.b == y)]
        v.choose(rows[0] if rows else -1)

    def _follow_view(self, side: str) -> None:
        """Zoom the other canvas alike and centre it on the counterpart of this view's centre."""
        if self._syncing or self.result is None:
            return
        v = self.view
        own, other = (v.canvas_a, v.canvas_b) if side == "a" else (v.canvas_b, v.canvas_a)
        centre = own.visible_scene_rect().center()
        layout = own.graph_layout()
        keys = [k for k in (layout.boxes if layout else ()) if isinstance(k, int)]
        if not keys:
            return
        nearest = min(keys, key=lambda k: (own.box_rect(k).center() - centre).manhattanLength())
        counterpart = self.result.diff.correspondence.counterpart(side, nearest)
        self._syncing = True
        try:
            other.set_zoom(own.zoom_level())
            if counterpart is not None:
                other.center_on(counterpart)
        finally:
            self._syncing = False


def node_colors(d: GraphDiff) -> tuple[dict, dict]:
    """Overlay colours of both canvases: changed, removed (A), added (B) and folded nodes."""
    c = d.correspondence
    text = "#000000"
    a: dict = {}
    b: dict = {}
    for x in d.changed():
        a.update({m: (STATUS_COLORS["changed"], text) for m in d.units_a.members[x]})
        b.update({m: (STATUS_COLORS["changed"], text) for m in d.units_b.members[c.pairs[x]]})
    for i in c.folded_a:
        a.setdefault(i, (STATUS_COLORS["folded"], text))
    for i in c.folded_b:
        b.setdefault(i, (STATUS_COLORS["folded"], text))
    a.update({i: (STATUS_COLORS["removed"], text) for i in c.removed})
    b.update({i: (STATUS_COLORS["added"], text) for i in c.added})
    return a, b


def summary_text(d: GraphDiff) -> str:
    """The counts line above the canvases."""
    n = d.counts()
    by = n["by"]
    return (f"{n['matched']} layers matched ({by['provenance']} by provenance, {by['name']} by "
            f"name, {by['structure']} by structure): {n['changed']} changed, {n['unchanged']} "
            f"unchanged; {n['removed']} nodes only in A, {n['added']} only in B; "
            f"{n['folded_a'] + n['folded_b']} folded into a matched layer.")


def _number(value) -> str:
    if value is None:
        return "—"
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def _deltas_html(deltas: dict[str, tuple]) -> str:
    rows = "".join(f"<tr><td>{escape(name)}</td><td align=right>{_number(p)}</td>"
                   f"<td align=right>{_number(q)}</td><td align=right>"
                   f"{'' if delta is None else ('+' if delta > 0 else '') + _number(delta)}"
                   f"</td></tr>" for name, (p, q, delta) in deltas.items())
    return ("<table cellspacing=6><tr><th align=left>metric</th><th>A</th><th>B</th>"
            f"<th>B − A</th></tr>{rows}</table>")


def totals_html(d: GraphDiff) -> str:
    """The whole graphs' metrics, shown until a pair is chosen."""
    return "<b>Whole graphs</b>" + _deltas_html(d.totals())


def pair_html(d: GraphDiff, x: int | None, y: int | None) -> str:
    """The chosen pair: names, what changed, metric deltas."""
    a = d.units_a.nodes.get(x) if x is not None else None
    b = d.units_b.nodes.get(y) if y is not None else None
    head = " ↔ ".join(f"<b>{escape(n.name)}</b> ({escape(n.op)})" if n is not None else
                      "<i>none</i>" for n in (a, b))
    how = d.correspondence.how.get(x) if x is not None else None
    lines = [head + (f" — matched by {how}" if how else "")]
    changes = d.changes.get(x, []) if x is not None and y is not None else []
    lines += [f"• {escape(str(ch))}" for ch in changes] or (
        ["no change"] if a is not None and b is not None else [])
    return "<br>".join(lines) + _deltas_html(d.deltas(x, y))


def install(window) -> CompareController:
    """Add the Compare menu to `window`; returns the controller (`window.compare`)."""
    return CompareController(window)


def screenshots(window, save) -> None:
    """compare.png: the open model beside its final graph, the first difference chosen."""
    controller: CompareController = window.compare
    graph = window.document.graph
    if graph is None:
        return
    label = window.document.path.name if window.document.path else "untitled"
    work = compare_job(Operand(graph, "loaded", label=f"{label} (loaded)"),
                       Operand(graph, "final", label=f"{label} (final)"), True)
    controller.show(work(Progress(lambda *_: None)))
    if controller.result.diff.differences:
        controller.view.step(1)
    save(controller.window, "compare.png")
    controller.window.hide()
