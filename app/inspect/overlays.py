"""Per-layer data overlays: one metric colours the canvas, its legend and table in a dock.

The figures come from `compiler.layer_metrics` (and `compiler.layer_instructions` for counts
under QEMU), computed in a worker with progress and cancel and kept per document graph,
pipeline and metric (the target is part of the instruction metric's key), so undo and redo
show a known figure at once. SQNR comes from the quantization session's last evaluation.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from dataclasses import replace

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.document.document import ERROR_OVERLAY
from app.window.actions import menu_before_help
from app.window.workers import Job, Progress
from compiler import layer_metrics
from compiler.driver import Compilation, compilation, pipeline_key
from compiler.harness.cortex_m_bench import BENCH_TARGETS
from compiler.ir.graph import Graph
from compiler.layer_host_time import time_layers
from compiler.layer_instructions import count_instructions
from compiler.layer_metrics import MetricSet, aggregate
from compiler.layer_tuning import tuning_metric
from compiler.quant.recipe import QuantRecipe, quantize_with
from compiler.version import kiln_version
from views import style
from views.flow_layout import FlowLayout
from views.metric_colors import GRADIENT, THRESHOLD, coloring
from views.metric_table import Legend, MetricTable
from views.signals import signals_blocked

INSTRUCTIONS = "instructions:"  # + target
DEVICE = "device"  # the last validation's ticks per layer (Tools > Validate on Device…)
TUNED = "tuned"  # the last tuning's best schedule per layer against the default (Tools > Tune…)
CHOICES = (("", "None"), ("macs", "MACs"), ("weight_bytes", "Weight bytes"),
           ("arena_bytes", "Arena bytes"), ("host_time", "Host time"),
           *((INSTRUCTIONS + t, f"Instructions on {t}") for t in BENCH_TARGETS),
           (DEVICE, "Device ticks"), (TUNED, "Tuned vs default"), ("sqnr", "SQNR"))


# Figures of the model that ships: of the int8 model once the document is calibrated.
OF_THE_INT8_MODEL = ("weight_bytes", "arena_bytes", "host_time", INSTRUCTIONS, TUNED)


def metric_job(compiled: Compilation, key: str, shown: Graph, options,
               recipe: QuantRecipe | None = None, tuning: tuple[str, list] | None = None):
    """The job computing metric `key` for the document graph `shown`.

    With `recipe` (a calibrated document), the int8 model it makes is measured, each figure
    on the float node it came from: what the Export dialog's int8 bundle would do.
    `tuning`: the document's last tuning (target, log entries), for the tuned metric.
    """
    def work(progress: Progress) -> MetricSet:
        if recipe is None:
            return measure(compiled, progress)
        progress.report(0.02, "Quantizing with the document's recipe")
        integer = compilation(quantize_with(shown, recipe), compiled.pipeline)
        metric = measure(integer, progress)
        return replace(metric, title=f"{metric.title} (int8 model)",
                       note=f"{metric.note}; of the int8 model the document's calibration "
                            "makes, as the int8 export builds it")

    def measure(compiled: Compilation, progress: Progress) -> MetricSet:
        if key == TUNED:
            progress.report(0.1, f"Building the kernels for {tuning[0]}")
            return tuning_metric(tuning[1], compiled, tuning[0], kiln_version(), shown)
        if key.startswith(INSTRUCTIONS):
            return count_instructions(compiled, key[len(INSTRUCTIONS):], shown, progress.report)
        if key == "host_time":
            return time_layers(compiled, shown, progress.report)
        progress.report(0.1, "Running the pass pipeline")
        compiled.passes(diffs=False)
        if key == "arena_bytes":
            progress.report(0.5, "Planning memory")
            return layer_metrics.arena_bytes(compiled, shown, options)
        return getattr(layer_metrics, key)(compiled, shown)

    return work


def recipe_key(recipe: QuantRecipe | None) -> str:
    """What tells two recipes' int8 models apart, cheaply: the choices, not the histograms."""
    if recipe is None:
        return ""
    p = recipe.profile
    return json.dumps([p.overrides, sorted(p.keep_float), p.equalized, recipe.method,
                       recipe.percentile, recipe.schema, recipe.requant, recipe.per_channel,
                       recipe.keep_float, recipe.float_weights, sorted(recipe.corrections),
                       [c.tolist() for _, c in sorted(recipe.corrections.items())],
                       p.data, [(k, t.min, t.max) for k, t in p.tensors.items()]],
                      sort_keys=True, default=str)


class OverlayPanel(QWidget):
    """Metric and colouring choices, the legend, progress with Cancel, and the table."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.metric_box = QComboBox()
        for key, label in CHOICES:
            self.metric_box.addItem(label, key)
        self.metric_box.setToolTip("The figure the canvas colours each node by")
        self.mode = QComboBox()
        self.mode.addItem("Gradient", GRADIENT)
        self.mode.addItem("Threshold", THRESHOLD)
        self.mode.setToolTip("A colour scale over the values, or two colours either side of "
                             "a value")
        self.threshold = QDoubleSpinBox()
        self.threshold.setRange(-1e15, 1e15)
        self.threshold.setDecimals(1)
        self.threshold.setToolTip("Nodes beyond this value are painted red")
        self.threshold.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setMaximumWidth(160)
        self.cancel = QToolButton()
        self.cancel.setText("Cancel")
        self.status = QLabel("No overlay.")
        self.status.setMinimumWidth(40)
        self.status.setWordWrap(True)
        self.legend = Legend()
        self.table = MetricTable()
        controls = QWidget()
        row = FlowLayout(controls)
        row.setContentsMargins(6, 4, 6, 0)
        pair = QWidget()
        pair_row = QHBoxLayout(pair)
        pair_row.setContentsMargins(0, 0, 0, 0)
        pair_row.addWidget(QLabel("Overlay:"))
        pair_row.addWidget(self.metric_box)
        for widget in (pair, self.mode, self.threshold, self.progress, self.cancel):
            row.addWidget(widget)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(controls)
        column.addWidget(self.status)
        column.addWidget(self.legend)
        column.addWidget(self.table, 1)
        self.set_busy(False)

    def set_busy(self, busy: bool, fraction: float = 0.0, text: str = "") -> None:
        """Show progress and Cancel while a metric is computed."""
        self.progress.setVisible(busy)
        self.cancel.setVisible(busy)
        self.progress.setValue(int(fraction * 1000))
        if busy:
            self.status.setStyleSheet("")
            self.status.setText(text or "Computing…")


class OverlayController(QObject):
    """Owns the Layer Metrics dock and the Overlay menu; paints the chosen metric."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.panel = OverlayPanel()
        self.table = self.panel.table
        self.dock = window.add_panel_dock("Layer Metrics", self.panel,
                                          Qt.DockWidgetArea.BottomDockWidgetArea)
        self.dock.hide()  # shown when an overlay is chosen
        # Per document graph: (pipeline key, metric key) -> metric.
        self._cache: weakref.WeakKeyDictionary[Graph, dict[tuple[str, str], MetricSet]] = \
            weakref.WeakKeyDictionary()
        self.current: MetricSet | None = None
        self._job: Job | None = None
        self._syncing = False
        self._build_menu(window)
        p = self.panel
        p.metric_box.currentIndexChanged.connect(lambda _i: self.refresh())
        p.mode.currentIndexChanged.connect(self._mode_changed)
        p.threshold.valueChanged.connect(lambda _v: self.paint())
        p.cancel.clicked.connect(self.cancel)
        self.table.nodeRequested.connect(self._row_clicked)
        doc = self.document
        for signal in (doc.graphChanged, doc.pipelineChanged, doc.optionsChanged):
            signal.connect(self.refresh)
        doc.modelOpened.connect(lambda: self.choose(""))
        doc.validated.connect(lambda _run: self.key() == DEVICE and self.refresh())
        doc.tuned.connect(lambda _tuning: self.key() == TUNED and self.refresh())
        doc.selectionChanged.connect(self._canvas_selected)
        window.layoutReady.connect(self.paint)
        # One overlay at a time: the quantization error's replaces this one.
        doc.overlayChanged.connect(lambda name: name == ERROR_OVERLAY and self.choose(""))
        # Validate on Device's "Show on Canvas" asks the document for the device overlay.
        doc.overlayChanged.connect(lambda name: name == DEVICE and self.key() != DEVICE
                                   and self.choose(DEVICE))
        # And Tune's the tuned one.
        doc.overlayChanged.connect(lambda name: name == TUNED and self.key() != TUNED
                                   and self.choose(TUNED))

    def _build_menu(self, window) -> None:
        menu = menu_before_help(window, "Overla&y")
        self.group = QActionGroup(menu)
        self.actions: dict[str, QAction] = {}
        for key, label in CHOICES:
            act = QAction(label, menu)
            act.setCheckable(True)
            act.setStatusTip(f"Colour each node by {label.lower()}" if key else
                             "No data overlay")
            act.triggered.connect(lambda _on=False, k=key: self.choose(k))
            self.group.addAction(act)
            menu.addAction(act)
            self.actions[key] = act
        self.actions[""].setChecked(True)
        menu.addSeparator()
        menu.addAction(self.dock.toggleViewAction())
        self.menu = menu

    # -- state ----------------------------------------------------------------------------------

    def key(self) -> str:
        """The chosen metric's key ("" for none)."""
        return self.panel.metric_box.currentData() or ""

    def choose(self, key: str) -> None:
        """Show metric `key` (as the menu and the combo box do); "" ends the overlay."""
        index = self.panel.metric_box.findData(key)
        if index != self.panel.metric_box.currentIndex():
            self.panel.metric_box.setCurrentIndex(index)  # refresh() follows
        else:
            self.refresh()

    def is_busy(self) -> bool:
        """True while a metric is being computed."""
        return self._job is not None and self._job.is_active()

    def cancel(self) -> None:
        """Stop the running computation (the Cancel button)."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
        self.panel.set_busy(False)
        self.panel.status.setText("Cancelled.")

    def refresh(self) -> None:
        """Compute (or take from the cache) the chosen metric of the document's graph."""
        if self._job is not None:
            self._job.cancel()
            self._job = None
        self.panel.set_busy(False)
        key = self.key()
        self.actions[key].setChecked(True)
        self.current = None
        if not key:
            if self.document.overlay != ERROR_OVERLAY:
                self.document.set_overlay("")
            self._show(None, "No overlay.")
            return
        self.dock.show()
        doc = self.document
        doc.set_overlay(key)  # the quantization error's overlay gives way
        if doc.graph is None:
            self._show(None, "No model.")
            return
        if key == "sqnr":
            self._show_sqnr()
            return
        if key == DEVICE:
            self._show_device()
            return
        if key == TUNED and doc.last_tuning is None:
            self._show(None, "Tuned vs default needs a tuning: Tools > Tune… first.", True)
            return
        compiled = doc.compilation()
        if compiled is None:
            self._show(None, "The graph has invalid nodes: fix or undo the edit first.", True)
            return
        recipe = doc.quant.recipe() if key.startswith(OF_THE_INT8_MODEL) else None
        cache_key = (pipeline_key(doc.pipeline), self._cache_key(key), recipe_key(recipe))
        known = self._cache.get(doc.graph, {}).get(cache_key)
        if known is not None:
            self._show(known)
            return
        graph = doc.graph
        job = Job(metric_job(compiled, key, graph, doc.options(), recipe, doc.last_tuning),
                  "Computing the overlay", self)
        job.progress.connect(lambda f, t: self.panel.set_busy(True, f, t))
        job.succeeded.connect(lambda m: self._computed(graph, cache_key, m))
        job.failed.connect(lambda message: self._show(None, message, True))
        self._job = job
        self.panel.set_busy(True, 0.0, "Computing…")
        job.start()

    def _cache_key(self, key: str) -> str:
        """What else a metric depends on besides the graph and the pipeline.

        Arena bytes: the target and arena options; the tuned metric: the last tuning's
        target and entries.
        """
        if key == "arena_bytes":
            return f"{key}:{self.document.options()!r}"
        if key == TUNED and self.document.last_tuning is not None:
            target, entries = self.document.last_tuning
            lines = "\n".join(e.line() for e in entries).encode()
            return f"{key}:{target}:{hashlib.sha256(lines).hexdigest()}"
        return key

    def _computed(self, graph: Graph, cache_key, metric: MetricSet) -> None:
        self._job = None
        self.panel.set_busy(False)
        self._cache.setdefault(graph, {})[cache_key] = metric
        if graph is self.document.graph:
            self._show(metric)

    def _show_sqnr(self) -> None:
        s = self.document.quant.session
        if s is None or s.evaluation is None or s.graph is not self.document.graph:
            self._show(None, "SQNR needs a calibration: Quantize > Calibrate… first.", True)
            return
        tensors = {name: t.sqnr for name, t in s.evaluation.tensors.items()}
        self._show(layer_metrics.sqnr(self.document.graph, tensors, s.keys))

    def _show_device(self) -> None:
        run = self.document.last_validation
        if run is None or run.graph is not self.document.graph:
            self._show(None, "Device ticks need a validation of this graph: Tools > Validate "
                             "on Device… first.", True)
            return
        self._show(run.metric)

    def _show(self, metric: MetricSet | None, message: str = "", error: bool = False) -> None:
        self.current = metric
        p = self.panel
        p.status.setStyleSheet(f"color: {style.PROBLEM};" if error else "")
        graph = self.document.graph
        names = {n.id: n.name for n in graph.nodes} if graph is not None else {}
        self.table.set_metric(metric, names)
        if metric is None:
            p.status.setText(message)
            p.legend.set_coloring(None)
            self.paint()
            return
        whole = metric.whole()
        exact = f"{whole:,.0f}" if whole is not None and float(whole).is_integer() else \
            f"{whole:.4g}" if whole is not None else ""
        total = f"whole network {exact} {metric.unit}".strip() if whole is not None else ""
        p.status.setText(f"{metric.title}: {total}. {metric.note[:1].upper()}{metric.note[1:]}.")
        values = list(metric.values().values())
        fitted = coloring(values, metric.higher_is_worse)
        with signals_blocked(p.threshold):
            p.threshold.setValue(fitted.threshold)
        self.paint()

    def _mode_changed(self, _index: int) -> None:
        self.panel.threshold.setVisible(self.panel.mode.currentData() == THRESHOLD)
        self.paint()

    def shown_values(self) -> dict:
        """The metric per box on the canvas.

        Nodes show their own values, closed groups their members' sum (or worst value, as the
        metric combines them).
        """
        metric, layout = self.current, self.window.canvas.graph_layout()
        if metric is None or layout is None:
            return {}
        values = {node: value for node, value in metric.values().items()
                  if node in layout.boxes}
        if layout.grouping is not None:
            hierarchy = layout.grouping.hierarchy
            for key in layout.groups:
                if key in layout.boxes:
                    value = aggregate(metric, hierarchy.members(key))
                    if value is not None:
                        values[key] = value
        return values

    def coloring(self, values: dict | None = None):
        """The colouring in force for the current metric (None without one).

        It spans `values` (default: those shown, closed groups' included).
        """
        metric = self.current
        if metric is None:
            return None
        values = self.shown_values() if values is None else values
        return coloring(list(values.values()) or list(metric.values().values()),
                        metric.higher_is_worse, self.panel.mode.currentData(),
                        self.panel.threshold.value())

    def paint(self) -> None:
        """Colour the canvas with the current metric (or leave it alone without one)."""
        canvas, metric = self.window.canvas, self.current
        values = self.shown_values()
        c = self.coloring(values)
        if metric is None or c is None:
            if canvas.overlay() and not self._quant_overlay_on():
                canvas.set_overlay({}, {})
            self.panel.legend.set_coloring(None)
            return
        canvas.set_overlay({key: c.colors(value) for key, value in values.items()}, {})
        self.panel.legend.set_coloring(c, metric.title, metric.unit)

    def _quant_overlay_on(self) -> bool:
        return self.document.overlay == ERROR_OVERLAY

    # -- selection both ways ----------------------------------------------------------------

    def _row_clicked(self, key) -> None:
        self._syncing = True
        try:
            self.window.select_and_center(key)
        finally:
            self._syncing = False

    def _canvas_selected(self, key) -> None:
        if self._syncing or self.current is None or not isinstance(key, int):
            return
        for i, row in enumerate(self.current.rows):
            if key in row.nodes:
                self.table.selectRow(self.table.view_index(i).row())
                self.table.scrollTo(self.table.view_index(i))
                return


def install(window) -> OverlayController:
    """Add the Overlay menu and the Layer Metrics dock; returns the controller."""
    return OverlayController(window)


def screenshots(window, save) -> None:
    """Render the MACs overlay on the canvas, its legend and table (the model open)."""
    overlays: OverlayController = window.overlays
    if window.document.graph is None:
        return
    from PySide6.QtCore import QEventLoop, QTimer

    overlays.choose("macs")
    if overlays.is_busy():
        loop = QEventLoop()
        overlays._job.succeeded.connect(lambda _m: QTimer.singleShot(0, loop.quit))
        overlays._job.failed.connect(lambda _m: loop.quit())
        QTimer.singleShot(120000, loop.quit)
        loop.exec()
    floating = overlays.dock.isFloating()
    overlays.dock.setFloating(True)
    overlays.dock.resize(900, 420)
    save(overlays.panel, "layer_metrics.png")
    save(window.canvas, "overlay_macs.png")
    overlays.dock.setFloating(floating)
    overlays.choose("")
