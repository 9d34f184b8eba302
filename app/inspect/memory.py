"""The memory timeline dock: how the final graph's activations pack into the arena.

The canvas shows the loaded graph; buffers belong to the final graph (after the default pass
pipeline). Node provenance links the two, so selecting a buffer selects its source node on the
canvas and the reverse. Planning runs in a worker; after an edit the panel says how many arena
bytes the edit cost or saved.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from app.document.document import Document
from app.window.workers import Job, Progress
from compiler.driver import Compilation, Options, pipeline_key
from compiler.ir.graph import Graph
from compiler.memory.buffers import align_up
from views import style
from views.flow_layout import FlowLayout
from views.signals import signals_blocked
from views.timeline import TIMELINE_NAME, Bar, MemoryTimeline, kib, window_fields


@dataclass
class Planned:
    """One graph's memory plan as the panel shows it.

    Attributes:
        graph_ref: The document graph it was computed for, held weakly: the panel keeps plans
            per graph (undo brings a graph back), which must not keep old graphs alive.
        options: The driver options it was planned with (alignment, inputs/outputs in arena).
        doc: `plan.to_json()`, the same document `kiln memory --json` prints.
        offsets: Strategy name -> buffer name -> offset (the kept strategy's are the plan's).
        ops: Buffer name -> operator of the final node producing it.
        node_of: Buffer name -> canvas key of its source node (None: no box to select).
        buffers_of: Canvas key -> names of the buffers its node contributes to.
        streams: Buffer name -> the buffer its op streams rows from (they may overlap).
        pipeline: The pipeline that made the final graph (`pipeline_key`).
    """

    graph_ref: weakref.ref
    options: Options
    doc: dict
    offsets: dict[str, dict[str, int]]
    ops: dict[str, str] = field(default_factory=dict)
    node_of: dict[str, object] = field(default_factory=dict)
    buffers_of: dict[object, list[str]] = field(default_factory=dict)
    streams: dict[str, str] = field(default_factory=dict)
    pipeline: str = ""

    @property
    def graph(self) -> Graph | None:
        """The graph it was computed for (None once nothing else holds it)."""
        return self.graph_ref()

    @property
    def kept(self) -> str:
        """The strategy whose plan the compiler keeps (the smallest arena)."""
        sizes = self.doc["strategies"]
        return min(sizes, key=lambda n: (sizes[n], n))

    @property
    def arena(self) -> int:
        """Arena bytes of the kept plan."""
        return self.doc["activations"]


def _source_key(graph: Graph, node, ids: dict[int, object]):
    """The loaded graph's node a final node stands for: same operator first, else the last."""
    sources = [ids[i] for i in node.provenance if i in ids]
    if not sources:
        return None
    same = [n for n in sources if n.op == node.op]
    return (same[0] if same else sources[-1]).id


def plan_job(compiled: Compilation, options: Options):
    """The job: the driver's plan for `options`, its buffers linked to the loaded graph."""
    graph = compiled.graph

    def work(progress: Progress) -> Planned:
        progress.report(0.0, "Running the pass pipeline")
        final = compiled.prepared
        progress.report(0.4, "Planning memory")
        plan = compiled.plan(options)
        result = Planned(weakref.ref(graph), options, plan.to_json(),
                         plan.arena.strategy_offsets,
                         pipeline=pipeline_key(compiled.pipeline))
        ids = {n.id: n for n in graph.nodes}
        order = {n.id: i for i, n in enumerate(graph.nodes)}
        by_name = {n.name: n for n in final.nodes}
        inputs = {v.name for v in graph.inputs}
        for b in plan.arena.buffers:
            if b.stream is not None:
                result.streams[b.name] = b.stream[0]
            node = by_name.get(b.node)
            if node is None:  # a graph input: no producer, its pill on the canvas
                result.ops[b.name] = "Input"
                result.node_of[b.name] = f"in:{b.name}" if b.name in inputs else None
                continue
            result.ops[b.name] = node.op
            result.node_of[b.name] = _source_key(graph, node, ids)
            for i in sorted((i for i in node.provenance if i in ids), key=order.get):
                result.buffers_of.setdefault(i, []).append(b.name)
        first = {b.name: b.first for b in plan.arena.buffers}
        for names in result.buffers_of.values():
            names.sort(key=first.get)
        for name, key in result.node_of.items():
            if isinstance(key, str):
                result.buffers_of.setdefault(key, []).append(name)
        return result

    return work


class MemoryPanel(QWidget):
    """Strategy selector, io-in-arena toggle, a summary line and the timeline."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.strategy = QComboBox()
        self.strategy.setToolTip("Packing strategy whose offsets the timeline shows")
        self.strategy.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        # The full names show in the list; closed, the box may elide them, so the bottom dock
        # (and through it the window) can be narrow.
        self.strategy.setMinimumContentsLength(12)
        self.io_in_arena = QCheckBox("Inputs/outputs in arena")
        self.io_in_arena.setToolTip("Place the model's inputs and outputs inside the activation "
                                    "arena, so their space is reused once dead")
        self.summary = QLabel("No model.")
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.delta = QLabel()
        # Long texts must never widen the dock, and through it the main window: a label's
        # minimum stays small (it is cut at the dock's edge; its tooltip has the full text).
        for label in (self.summary, self.delta):
            label.setMinimumWidth(40)
        self.timeline = MemoryTimeline()
        self.timeline.setObjectName(TIMELINE_NAME)  # File > Export Picture finds it by name
        # The controls wrap in a narrow dock: in one row they would set the bottom dock's
        # minimum width, and with it the window's.
        controls = QWidget()
        row = FlowLayout(controls)
        row.setContentsMargins(6, 4, 6, 0)
        strategy = QWidget()
        pair = QHBoxLayout(strategy)
        pair.setContentsMargins(0, 0, 0, 0)
        pair.addWidget(QLabel("Strategy:"))
        pair.addWidget(self.strategy)
        for widget in (strategy, self.io_in_arena, self.summary, self.delta):
            row.addWidget(widget)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(controls)
        column.addWidget(self.timeline, 1)

    def set_strategies(self, sizes: dict[str, int], kept: str, current: str) -> None:
        """Fill the selector: each strategy with its arena size, the kept one marked."""
        with signals_blocked(self.strategy):
            self.strategy.clear()
            for name, size in sizes.items():
                mark = " (kept)" if name == kept else ""
                self.strategy.addItem(f"{name}: {kib(size)}{mark}", name)
                self.strategy.setItemData(self.strategy.count() - 1, f"{size:,} bytes",
                                          Qt.ItemDataRole.ToolTipRole)
            self.strategy.setCurrentIndex(max(self.strategy.findData(current), 0))

    def set_delta(self, delta: int | None, before: int = 0, after: int = 0) -> None:
        """Say what the last edit did to the arena (None hides it)."""
        if delta is None:
            self.delta.clear()
            return
        color = style.PROBLEM if delta > 0 else "#2e7d32" if delta < 0 else style.TEXT_MUTED
        sign = "+" if delta > 0 else "−" if delta < 0 else "±"
        self.delta.setStyleSheet(f"color: {color}; font-weight: bold;")
        self.delta.setText(f"After the edit: {sign}{abs(delta):,} B "
                           f"({before:,} → {after:,} B)")
        self.delta.setToolTip(self.delta.text())


class MemoryController(QObject):
    """Owns the Memory Timeline dock and keeps it in step with the document and the canvas.

    Signals:
        shown(): the panel shows the plan of the current graph (or why there is none).
    """

    shown = Signal()

    def __init__(self, document: Document, add_dock: Callable[..., QDockWidget],
                 navigate: Callable[[object], None], parent: QObject | None = None):
        """Make the panel in a dock from `add_dock(title, widget, area)`.

        `navigate(key)` selects and shows a box on the canvas (a click on a buffer does that).
        """
        super().__init__(parent)
        self.document = document
        self.navigate = navigate
        self.panel = MemoryPanel()
        self.timeline = self.panel.timeline
        self.dock = add_dock("Memory Timeline", self.panel, Qt.DockWidgetArea.BottomDockWidgetArea)
        # Per document graph: (pipeline key, options) -> plan.
        self._plans: weakref.WeakKeyDictionary[Graph, dict[tuple[str, Options], Planned]] = \
            weakref.WeakKeyDictionary()
        self.current: Planned | None = None
        self.delta: int | None = None
        self.message = ""
        self._chosen: str | None = None  # strategy the user picked (None: the kept one)
        self._job: Job | None = None
        self._stale = True
        self._syncing = False
        self._soon = QTimer(self)
        self._soon.setSingleShot(True)
        self._soon.setInterval(0)
        self._soon.timeout.connect(self.refresh_now)
        document.modelOpened.connect(self._model_opened)
        for signal in (document.graphChanged, document.problemsChanged,
                       document.pipelineChanged, document.optionsChanged):
            signal.connect(self.refresh)
        document.optionsChanged.connect(self._options_changed)
        document.selectionChanged.connect(self._canvas_selected)
        self.timeline.bufferSelected.connect(self._buffer_selected)
        self.panel.strategy.currentIndexChanged.connect(self._strategy_changed)
        self.panel.io_in_arena.toggled.connect(document.set_io_in_arena)
        self.dock.visibilityChanged.connect(self._visibility_changed)

    def _model_opened(self) -> None:
        """Another model: nothing of the previous one may stay on screen."""
        self.current, self.delta, self._chosen = None, None, None
        self._clear("planning…")

    def _options_changed(self) -> None:
        with signals_blocked(self.panel.io_in_arena):
            self.panel.io_in_arena.setChecked(self.document.io_in_arena)

    # -- state --------------------------------------------------------------------------------

    def is_busy(self) -> bool:
        """True while a plan is being computed."""
        return self._soon.isActive() or (self._job is not None and self._job.is_active())

    def strategy(self) -> str | None:
        """The strategy whose offsets are shown."""
        return self.panel.strategy.currentData()

    def set_strategy(self, name: str) -> None:
        """Show another strategy's offsets (as the selector does)."""
        self.panel.strategy.setCurrentIndex(self.panel.strategy.findData(name))

    def set_io_in_arena(self, on: bool) -> None:
        """Toggle inputs and outputs in the arena (as the check box does)."""
        self.panel.io_in_arena.setChecked(on)

    def _visibility_changed(self, visible: bool) -> None:
        if visible and self._stale:
            self.refresh_now()

    def refresh(self) -> None:
        """Show the plan of the document's graph soon (one edit emits several signals)."""
        self._soon.start()

    def refresh_now(self) -> None:
        """Show the plan of the document's graph (planned in a worker); hidden: later."""
        self._soon.stop()
        if self._job is not None:
            self._job.cancel()
            self._job = None
        if not self.dock.isVisible():
            self._stale = True
            return
        self._stale = False
        doc = self.document
        options = doc.options()
        compiled = doc.compilation()
        if doc.graph is None:
            self._clear("No model.")
        elif doc.problems:
            count = len(doc.problems)
            self._clear(f"The graph has {count} invalid node{'s' * (count != 1)}: fix or undo "
                        f"the edit to plan its memory.")
        elif (pipeline_key(doc.pipeline), options) in self._plans.get(doc.graph, {}):
            self._show(self._plans[doc.graph][pipeline_key(doc.pipeline), options])
        else:
            self.panel.summary.setText("planning…")
            job = Job(plan_job(compiled, options), "Planning memory", self)
            job.succeeded.connect(self._planned)
            job.failed.connect(lambda message: self._clear(message, error=True))
            self._job = job
            job.start()

    def _clear(self, message: str, error: bool = False) -> None:
        self._job = None
        self.message = message
        self.panel.summary.setText(message)
        self.panel.summary.setStyleSheet(f"color: {style.PROBLEM};" if error else "")
        self.panel.set_delta(None)
        self.panel.strategy.clear()
        self.timeline.clear(message)
        self.shown.emit()

    def _planned(self, result: Planned) -> None:
        self._job = None
        self._plans.setdefault(result.graph, {})[result.pipeline, result.options] = result
        if result.graph is self.document.graph and result.options == self.document.options() \
                and result.pipeline == pipeline_key(self.document.pipeline):
            self._show(result)

    def _show(self, result: Planned) -> None:
        before = self.current
        self.current = result
        self.message = ""
        if before is None or before.graph is not result.graph or \
                before.options != result.options:
            # A new graph after an edit, undo or redo (not a freshly opened model): its cost.
            edited = before is not None and before.graph is not result.graph and \
                before.options == result.options and self.document.undo_stack.count() > 0
            self.delta = result.arena - before.arena if edited else None
            self.panel.set_delta(self.delta, before.arena if edited else 0, result.arena)
        sizes = result.doc["strategies"]
        current = self._chosen if self._chosen in sizes else result.kept
        self.panel.set_strategies(sizes, result.kept, current)
        self._draw()
        self._canvas_selected(self.document.selection)
        self.shown.emit()

    def _strategy_changed(self, _index: int) -> None:
        name = self.strategy()
        if name is None or self.current is None:
            return
        self._chosen = None if name == self.current.kept else name
        self._draw()

    def bars(self) -> list[Bar]:
        """The shown buffers with the chosen strategy's offsets."""
        result = self.current
        if result is None:
            return []
        offsets = result.offsets.get(self.strategy() or result.kept, {})
        a = result.doc["alignment"]
        return [Bar(b["name"], b["node"], result.ops.get(b["name"], "?"), b["size"],
                    offsets.get(b["name"], b["offset"]), align_up(b["size"], a), b["first"],
                    b["last"], result.streams.get(b["name"], ""), *window_fields(b["window"]))
                for b in result.doc["buffers"]]

    def _draw(self) -> None:
        result = self.current
        doc = result.doc
        name = self.strategy() or result.kept
        arena = doc["strategies"].get(name, doc["activations"])
        self.timeline.set_plan(self.bars(), doc["live_bytes"], doc["lower_bound"], arena)
        efficiency = doc["lower_bound"] / arena if arena else 1.0
        self.panel.summary.setStyleSheet("")
        whole = doc["whole_tensor_bound"]
        rows = f" (whole tensors: {whole:,} B)" if whole != doc["lower_bound"] else ""
        self.panel.summary.setText(
            f"Arena {arena:,} B ({kib(arena)}) · lower bound {doc['lower_bound']:,} B{rows} · "
            f"efficiency {efficiency:.0%} · {len(doc['buffers'])} buffers, "
            f"{len(doc['live_bytes'])} steps")
        self.panel.summary.setToolTip(self.panel.summary.text())  # cut in a narrow dock

    # -- selection ----------------------------------------------------------------------------

    def _buffer_selected(self, name: str) -> None:
        if not name or self.current is None:
            return
        key = self.current.node_of.get(name)
        if key is None:
            return
        self._syncing = True
        try:
            self.navigate(key)
        finally:
            self._syncing = False

    def _canvas_selected(self, key) -> None:
        if self._syncing or self.current is None:
            return
        names = self.current.buffers_of.get(key, []) if key is not None else []
        self.timeline.select(names[0] if names else None)

    def select_buffer(self, name: str) -> None:
        """Select a buffer as a click on it does (the canvas follows)."""
        self.timeline.select(name)
        self._buffer_selected(name)


def install(window) -> MemoryController:
    """Add the Memory Timeline dock to `window`; returns its controller (`window.memory`)."""
    controller = MemoryController(window.document, window.add_panel_dock,
                                  window.select_and_center, window)
    # Room for the chart at first start; a small window shrinks it (app.window.dock_sizes).
    window.resizeDocks([controller.dock], [250], Qt.Orientation.Vertical)
    return controller


def screenshots(window, save) -> None:
    """Render the timeline of the open model, its peak buffer selected."""
    memory: MemoryController = window.memory
    if window.document.graph is None:
        return
    from PySide6.QtCore import QEventLoop

    memory.dock.show()
    memory.dock.raise_()
    if memory.is_busy():
        loop = QEventLoop()
        memory.shown.connect(loop.quit)
        QTimer.singleShot(120000, loop.quit)
        loop.exec()
        memory.shown.disconnect(loop.quit)
    # Beside other bottom docks the panel is narrow: render it floating, at a readable size.
    floating = memory.dock.isFloating()
    memory.dock.setFloating(True)
    memory.dock.resize(1200, 440)
    peak = memory.timeline.peak_step()
    live = [b for b in memory.timeline.bars if peak is not None and b.first <= peak <= b.last]
    if live:
        memory.select_buffer(max(live, key=lambda b: b.height).name)
    save(memory.panel, "memory_timeline.png")
    memory.dock.setFloating(floating)
