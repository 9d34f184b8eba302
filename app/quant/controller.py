"""The quantization workbench: calibrate, tune ranges by hand, see the error on the graph.

Quantize > Calibrate... profiles the document's model in a worker (`app.quant.calibration`);
the session it makes then belongs to the document (`app.quant.state`): every range change and
every "keep float" is an undo command on it, the profile is written beside the model when it
is saved and read back when it is opened. This controller only wires the dock to that state:
after each change a worker re-evaluates the model with the quantizer's incremental evaluator
(per-tensor errors, output SQNR, top-1 agreement on the live samples) and then the integer
model's accuracy over the whole evaluation set, compiled, the figure `kiln quantize --report`
prints. The overlay colours each node by the SQNR of its output. Graph edits, undo and redo
carry the session to the edited graph (`app.quant.follow`). Nothing slow runs on the GUI
thread: profiles load, ranges are searched (`app.quant.ranges`) and models evaluated in
workers, so dragging a range never stalls the window.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from app.document.document import ERROR_OVERLAY
from app.quant.calibrate_dialog import CalibrateDialog, CalibrationRequest
from app.quant.calibration import Calibration
from app.quant.float_cost import FloatCostShown
from app.quant.follow import Following, quantized_of_calibrated, stale_text, table_rows
from app.quant.overlay import edge_texts, node_colors
from app.quant.ranges import Found, RangeSearch
from app.quant.session import (
    Evaluated,
    Measured,
    SampleOutputs,
    Session,
    evaluate_job,
    measure_job,
    sample_outputs,
)
from app.window.actions import menu_before_help
from app.window.workers import Job, SerialWorker
from compiler.quant.calibrate import METHODS, histogram_error, params_for
from views.quant_panel import MANUAL, QuantPanel

WORST = 5  # tensors in the worst-layers list
NOT_CALIBRATED = "Not calibrated. Quantize > Calibrate… measures every tensor."
DRAWN_MS = 20  # from an edit to its evaluation: the window draws the edit first


class QuantController(QObject):
    """Owns the Quantization dock and the Quantize menu; the session is the document's.

    Signals:
        evaluated(): the panel, the readouts and the overlay show the current ranges.
        outputsShown(): the Outputs tab shows the chosen sample.
        calibrationEnded(bool): a calibration finished (True) or was cancelled / failed.
    """

    evaluated = Signal()
    measured = Signal()  # the integer model's figures of the current ranges are shown
    calibrationEnded = Signal(bool)
    outputsShown = Signal()

    def __init__(self, window):
        super().__init__(window)
        self.window, self.document = window, window.document
        self.state = window.document.quant
        self.panel = QuantPanel()
        self.dock = window.add_panel_dock("Quantization", self.panel,
                                          Qt.DockWidgetArea.RightDockWidgetArea, scrolled=True)
        window.tabifyDockWidget(window.docks["properties"], self.dock)  # the whole column
        window.docks["properties"].raise_()
        self.dock.hide()
        self.context_menu: QMenu | None = None
        self.calibration = Calibration(window, self.panel, self.dock, self._show)
        self.calibration.stopped.connect(lambda: self.calibrationEnded.emit(False))
        self._worker = SerialWorker("quantization", self)
        self._worker.succeeded.connect(self._evaluated)
        self._worker.failed.connect(
            lambda message: self.panel.status.setText(f"Evaluation failed: {message}"))
        # The compiled integer model runs apart: a drag's fast evaluation never waits for it.
        self._measurer = SerialWorker("integer model", self)
        self._measurer.succeeded.connect(self._measured)
        self._measurer.failed.connect(
            lambda message: self.panel.output_sqnr.setText(f"not measured: {message}"))
        self._measure_again = False
        self.ranges = RangeSearch(self)
        self.ranges.failed.connect(
            lambda message: self.panel.status.setText(f"Range search failed: {message}"))
        self._chosen: tuple[Session, str, str] | None = None  # a method picked, its range asked
        self._pending = False
        self._soon = QTimer(self, singleShot=True, interval=DRAWN_MS)
        self._soon.timeout.connect(self._evaluate_now)
        self._syncing = False
        self._build_menu(window)
        self._connect()
        self.following = Following(self)  # after _connect: edits re-colour once carried
        self.float_costs = FloatCostShown(self)  # what Keep float costs the selected tensor

    def _build_menu(self, window) -> None:
        def action(text: str, slot, tip: str) -> QAction:
            act = QAction(text, window)
            act.setStatusTip(tip)
            act.triggered.connect(slot)
            return act

        self.keep_action = action("&Keep Float", self.toggle_keep_selected,
                                  "Leave the selected node's output (and weights) in float")
        self.overlay_action = action("Error &Overlay", self.panel.overlay.setChecked,
                                     "Colour each node by the SQNR of its output")
        self.overlay_action.setCheckable(True)
        menu = menu_before_help(window, "&Quantize")
        c = self.calibration
        menu.addActions([c.calibrate_action, c.load_action, c.save_action])
        menu.addSeparator()
        menu.addActions([self.keep_action, self.overlay_action, self.dock.toggleViewAction()])

    def _connect(self) -> None:
        p, doc = self.panel, self.document
        p.table.selectionModel().selectionChanged.connect(self._row_selected)
        p.histogram.rangeDragged.connect(self._dragging)
        p.histogram.rangeChosen.connect(self.set_range)
        p.low.valueChanged.connect(lambda v: self.set_range(v, p.high.value()))
        p.high.valueChanged.connect(lambda v: self.set_range(p.low.value(), v))
        p.method.activated.connect(lambda _i: self._method_chosen(p.method.currentText()))
        p.keep_float.clicked.connect(lambda on: self.set_keep_float(self.tensor(), on))
        p.overlay.toggled.connect(self._overlay_toggled)
        doc.overlayChanged.connect(self._overlay_changed)
        doc.quant.replaced.connect(lambda _text: self.dock.show())
        p.bars.tensorClicked.connect(self.show_tensor)
        p.sample.valueChanged.connect(lambda _v: self.request_outputs())
        p.tabs.currentChanged.connect(lambda _i: self.request_outputs())
        p.worst.itemClicked.connect(
            lambda item: self.show_tensor(item.data(Qt.ItemDataRole.UserRole)))
        doc.modelOpened.connect(self._model_opened)
        self.state.sessionChanged.connect(self._session_changed)
        self.state.restoringChanged.connect(self._restoring)
        self.state.edited.connect(self._edited)
        self.ranges.found.connect(self._range_found)
        doc.selectionChanged.connect(self._canvas_selected)
        self.window.layoutReady.connect(self.show_overlay)
        canvas = self.window.canvas
        canvas.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        canvas.customContextMenuRequested.connect(self._context_menu)

    @property
    def session(self) -> Session | None:
        """The document's quantization session (None until calibrated)."""
        return self.state.session

    # -- calibration (`app.quant.calibration` runs the jobs) ----------------------------------

    @property
    def calibration_job(self) -> Job | None:
        """The calibration or profile load running (or last started)."""
        return self.calibration.job

    @property
    def dialog(self) -> CalibrateDialog | None:
        """The calibration dialog while it is open."""
        return self.calibration.dialog

    def calibrate_dialog(self) -> CalibrateDialog | None:
        """Ask for the samples and the choices, then calibrate."""
        return self.calibration.open_dialog()

    def calibrate(self, request: CalibrationRequest) -> Job | None:
        """Profile and evaluate in a worker; the session changes only if it succeeds."""
        return self.calibration.calibrate(request)

    def cancel_calibration(self) -> None:
        """Stop a running calibration; the current session stays as it was."""
        self.calibration.cancel()

    def take_session(self, session: Session) -> None:
        """Use a calibration's result (as a finished calibration job does)."""
        self.calibration.take(session)

    def load_profile(self, path: str | Path) -> Job | None:
        """Use the profile at `path` (checked against the graph, in a worker) on its samples."""
        return self.calibration.load_profile(path)

    def _session_changed(self, measured: bool) -> None:
        """The document's session was replaced: show it (a followed one is evaluated first)."""
        session = self.session
        self._chosen = None
        if session is not None and measured:
            self._arrived(session)
            return
        if session is not None:
            self._evaluate_soon()
        self._show()

    def _arrived(self, session: Session) -> None:
        """A measured session (calibrated, loaded, restored): show the dock with it."""
        self.dock.show()
        self.dock.raise_()
        minimap = self.window.docks.get("minimap")
        if minimap is not None and not self.dock.isFloating():  # room for table and histogram
            height, width = self.window.height(), self.window.width()
            self.window.resizeDocks([self.dock, minimap], [int(height * 0.78), 120],
                                    Qt.Orientation.Vertical)
            self.window.resizeDocks([self.dock], [max(self.dock.width(), int(width * 0.42))],
                                    Qt.Orientation.Horizontal)
        evaluator = session.evaluator  # its thread does the rest, once the session is drawn
        QTimer.singleShot(DRAWN_MS, self, lambda: self._worker.submit(
            lambda: evaluator.warm_up() and None))
        self.window.statusBar().showMessage(
            f"Calibrated {len(session.profile.tensors)} tensors on {session.live.source}", 8000)
        self._show()
        self.calibrationEnded.emit(True)

    # -- edits (undoable) ------------------------------------------------------------------------

    def tensor(self) -> str | None:
        """The tensor selected in the panel."""
        return self.panel.selected_tensor()

    def set_range(self, low: float, high: float, tensor: str | None = None) -> None:
        """Quantize `tensor` (the selected one) over [low, high]: one undo step."""
        tensor = tensor or self.tensor()
        if self._syncing or self.session is None or tensor not in self.session.profile.tensors:
            return  # nothing selected, or a tensor not profiled since an edit
        if not low < high:
            self._show_selected()
            return
        self.state.set_range(tensor, low, high)

    def set_keep_float(self, tensor: str | None, keep: bool) -> None:
        """Leave `tensor` in float (or not): one undo step."""
        self.state.keep_float(tensor, keep)

    def _context_menu(self, pos) -> None:
        """Right click on a node: select it and offer Keep Float (once calibrated)."""
        canvas = self.window.canvas
        key = getattr(canvas.itemAt(pos), "key", None)
        if key is None:
            return
        self.window.select_and_center(key)
        tensor = self.tensor_of(key)
        menu = QMenu(canvas)
        keep = menu.addAction("Keep Float")
        keep.setCheckable(True)
        keep.setEnabled(tensor is not None)
        keep.setChecked(tensor is not None and tensor in self.session.profile.keep_float)
        keep.setToolTip("Calibrate the model first" if tensor is None else "")
        keep.triggered.connect(self.toggle_keep_selected)
        self.context_menu = menu
        menu.popup(canvas.viewport().mapToGlobal(pos))

    def tensor_of(self, key) -> str | None:
        """The quantized tensor a canvas box stands for (a Conv's is its Relu's)."""
        s = self.session
        if s is None:
            return None
        return s.folds.get(key) or next((t for t, k in s.keys.items() if k == key
                                         and t in s.profile.tensors), None)

    def toggle_keep_selected(self) -> None:
        """Quantize > Keep Float on the canvas's selected node."""
        if self.session is None:
            return
        tensor = self.tensor_of(self.document.selection)
        if tensor is not None:
            self.set_keep_float(tensor, tensor not in self.session.profile.keep_float)

    def _edited(self, _tensor: str) -> None:
        """A range or Keep float changed in the document (an edit, undo or redo)."""
        self._evaluate_soon()
        self._show_selected()

    def quantized(self):
        """The QDQ graph the document's recipe makes, or None (runs the quantizer: tests)."""
        return self.state.quantized()

    def _method_chosen(self, method: str) -> None:
        """Use `method`'s range for the selected tensor, once it is known (a worker searches)."""
        s, tensor = self.session, self.tensor()
        if s is None or tensor is None or method == MANUAL:
            return
        known = self.ranges.known(s, tensor, method)
        if known is not None:
            self._chosen = None
            self.set_range(*known)
            return
        self._chosen = (s, tensor, method)
        self.ranges.ask(s, tensor, method)
        self.panel.live.setText(f"Searching the {method} range…")

    def _range_found(self, found: Found) -> None:
        if found.session is not self.session:
            return  # calibrated again (or another model) meanwhile
        if self._chosen == (found.session, found.tensor, found.method):
            self._chosen = None
            if self.tensor() == found.tensor:
                self.set_range(*found.range, found.tensor)
                return
        if found.tensor == self.tensor():
            self._show_selected()

    def use_session(self, session: Session) -> None:
        """Make `session` current and evaluate it (one that followed an edit, or Re-profile's)."""
        self.state.set_session(session)

    # -- evaluation --------------------------------------------------------------------------

    def is_busy(self) -> bool:
        """True while a calibration, an evaluation or a range search runs or is due."""
        return (self._worker.is_busy() or self._soon.isActive() or self.ranges.is_busy()
                or self.calibration.is_running() or self._measurer.is_busy())

    def _evaluate_soon(self) -> None:
        """Evaluate the ranges in a moment, once the window has drawn the edit.

        The worker competes for the interpreter; edits in quick succession go in one evaluation.
        """
        if self.session is not None:
            self._soon.start()
            self.panel.status.setText("Re-evaluating…")

    def _evaluate_now(self) -> None:
        if self._worker.is_busy():
            self._pending = True  # the latest ranges go next, in one evaluation
            return
        session = self.session
        if session is None:
            return
        self._worker.submit(evaluate_job(session, self.state.edits()))
        self.panel.status.setText("Re-evaluating…")

    def request_outputs(self) -> None:
        """Compute the chosen sample's outputs, float and int8, when the Outputs tab shows."""
        s, p = self.session, self.panel
        if s is None or s.evaluator is None or p.tabs.currentIndex() != 2:
            return
        index = p.sample.value()
        self._worker.submit(lambda: sample_outputs(s, index))

    def _evaluated(self, result) -> None:
        if isinstance(result, SampleOutputs):
            if result.index == self.panel.sample.value():
                self.panel.show_outputs(result.index, result.floating, result.integer)
            self.outputsShown.emit()
            return
        session = None  # the warm-up's result
        if isinstance(result, Evaluated):
            session = result.session
            session.method_ranges.update(result.ranges)  # kept by the GUI thread only
        if self._pending:
            self._pending = False
            self._evaluate_now()
            return
        if session is not None and session is self.session:
            self._show()

    # -- showing -------------------------------------------------------------------------------

    def _show(self) -> None:
        p, s = self.panel, self.session
        p.show_stale(stale_text(s))
        if s is None or s.evaluation is None:
            p.clear()
            if s is not None:  # it followed an edit: the worker evaluates it, figures then
                self._show_rows(s)
                p.status.setText("Evaluating the edited graph…")
            self.show_overlay()
            return
        e = s.evaluation
        selected = self._show_rows(s)
        self._show_integer(s)
        if s.int8_accuracy is not None:
            p.accuracy.setText(f"{100 * s.int8_accuracy:.2f} % (float "
                               f"{100 * s.float_accuracy:.2f} %)")
        else:
            p.accuracy.setText("no labels")
        p.bars.set_rows([(name, t.sqnr) for name, t in e.tensors.items()], selected)
        p.sample.setMaximum(max(0, len(s.live) - 1))
        p.worst.clear()
        for t in sorted(e.tensors.values(), key=lambda t: t.sqnr)[:WORST]:
            p.worst.addItem(f"{t.sqnr:6.1f} dB  {t.name}")
            p.worst.item(p.worst.count() - 1).setData(Qt.ItemDataRole.UserRole, t.name)
        p.status.setText(f"{quantized_of_calibrated(s)}; {s.live.source}, "
                         f"{e.recomputed} nodes re-run in {1000 * e.seconds:.0f} ms")
        self._show_selected()
        self.show_overlay()
        self.request_outputs()
        self._measure(s)
        self.evaluated.emit()

    def _measure(self, s: Session) -> None:
        """Run the current integer model compiled, unless it is measured (or being measured)."""
        if s.integer_of is s.evaluator.qdq:
            return
        if self._measurer.is_busy():
            self._measure_again = True  # the latest graph goes next
            return
        self._measurer.submit(measure_job(s))

    def _measured(self, result: Measured) -> None:
        s = result.session
        s.integer, s.integer_of = result.figures, result.qdq
        if self._measure_again:
            self._measure_again = False
            if s is self.session and s.evaluator is not None:
                self._measure(s)
        if s is self.session:
            self._show_integer(s)
            if s.integer_of is s.evaluator.qdq:
                self.measured.emit()

    def _show_integer(self, s: Session) -> None:
        """Output SQNR and top-1 agreement: the compiled integer model's, the bundle's figures.

        Until it is measured for the current ranges, the float simulation's, marked as such.
        """
        p, e = self.panel, s.evaluation
        if s.integer is not None and s.integer_of is s.evaluator.qdq:
            i = s.integer
            p.output_sqnr.setText(", ".join(f"{v:.1f} dB" for v in i.output_sqnr.values())
                                  + f" (integer model, {i.samples} samples)")
            p.agreement.setText(f"{100 * i.top1_agreement:.1f} % of {i.samples}")
            return
        p.output_sqnr.setText(", ".join(f"≈ {v:.1f} dB" for v in e.output_sqnr.values())
                              + " (simulated; measuring the integer model…)")
        p.agreement.setText(f"≈ {100 * e.top1_agreement:.1f} % of {s.evaluator.count}")

    def _show_rows(self, s: Session) -> str | None:
        """Fill the table, keeping the selected tensor selected; returns it."""
        selected = self.tensor()
        was, self._syncing = self._syncing, True  # nested calls keep the outer flag
        self.panel.model.set_rows(table_rows(s))
        self.panel.select_tensor(selected)
        self._syncing = was
        return selected

    def _show_selected(self) -> None:
        p, s, tensor = self.panel, self.session, self.tensor()
        if s is None or tensor is None or tensor not in s.profile.tensors:
            p.histogram.clear("Not profiled since the edit: Re-profile measures it."
                              if s is not None and tensor in s.unprofiled else "Select a tensor.")
            self.float_costs.ask(None)
            return
        entry = s.profile.tensors[tensor]
        if tensor in s.profile.overrides:
            low, high = s.profile.range_of(tensor)
        else:
            chosen = self.ranges.known(s, tensor, s.options.method)
            if chosen is None:  # a session carried to an edited graph: its worker searches
                self.ranges.ask(s, tensor, s.options.method)
                p.histogram.clear(f"Searching the {s.options.method} range…")
                return
            low, high = chosen
        quant = params_for(low, high, s.options.schema) if high > low else None
        was, self._syncing = self._syncing, True  # nested calls keep the outer flag
        p.histogram.set_histogram(entry.histogram, entry.min, entry.max, low, high,
                                  quant.scale if quant else 0.0)
        p.low.setValue(low)
        p.high.setValue(high)
        # The methods whose range is known (searched when picked): the first that gave it.
        methods = [m for m in METHODS if self.ranges.known(s, tensor, m) == (low, high)]
        p.method.setCurrentText(s.options.method if tensor not in s.profile.overrides
                                else (methods[0] if methods else MANUAL))
        p.keep_float.setChecked(tensor in s.profile.keep_float)
        self.float_costs.ask(tensor)
        p.bars.selected = tensor
        p.bars.update()
        self._syncing = was
        self._dragging(low, high)

    def _dragging(self, low: float, high: float) -> None:
        s, tensor = self.session, self.tensor()
        if s is None or tensor is None:
            return
        clipped, sqnr = histogram_error(s.profile.tensors[tensor], low, high)
        self.panel.live.setText(f"[{low:.4g}, {high:.4g}]: clipped {100 * clipped:.3f} %, "
                                f"SQNR ≈ {sqnr:.1f} dB (from the histogram)")

    def _overlay_toggled(self, on: bool) -> None:
        self.overlay_action.setChecked(on)
        doc = self.document
        if on:
            doc.set_overlay(ERROR_OVERLAY)  # the Overlay menu's metric gives way
        elif doc.overlay == ERROR_OVERLAY:
            doc.set_overlay("")
        self.show_overlay()

    def _overlay_changed(self, name: str) -> None:
        """Another overlay took the canvas: the error overlay's check box follows."""
        if name != ERROR_OVERLAY and self.panel.overlay.isChecked():
            self.panel.overlay.setChecked(False)

    def node_colors(self) -> dict[object, tuple[str, str]]:
        """Canvas key -> (fill, text) of its output's SQNR bin."""
        return node_colors(self.session, self.document.graph, self.window.canvas.graph_layout())

    def show_overlay(self) -> None:
        """Colour the canvas (or clear it) as the overlay check box says."""
        canvas, s = self.window.canvas, self.session
        if not self.panel.overlay.isChecked() or s is None or s.evaluation is None:
            canvas.set_overlay({}, {})
            return
        canvas.set_overlay(self.node_colors(), *edge_texts(s))

    # -- selection both ways -------------------------------------------------------------------

    def _row_selected(self, *_args) -> None:
        tensor = self.tensor()
        self._show_selected()
        if self._syncing or self.session is None or tensor is None:
            return
        key = self.session.keys.get(tensor)
        if key is not None and key != self.document.selection:
            was, self._syncing = self._syncing, True  # nested calls keep the outer flag
            self.window.select_and_center(key)
            self._syncing = was

    def _canvas_selected(self, key) -> None:
        if self._syncing or self.session is None:
            return
        tensor = self.session.folds.get(key) or next(
            (t for t, k in self.session.keys.items()
             if k == key and self.panel.model.row_of(t) is not None), None)
        if tensor is not None:
            was, self._syncing = self._syncing, True  # nested calls keep the outer flag
            self.panel.select_tensor(tensor)
            self._syncing = was
            self._show_selected()

    def show_tensor(self, tensor: str) -> None:
        """Select `tensor` in the panel and its node on the canvas."""
        self.panel.select_tensor(tensor)

    # -- files ---------------------------------------------------------------------------------

    def _model_opened(self) -> None:
        """Another model (the document has dropped the session): forget this one's work."""
        self.calibration.cancel(redraw=False)
        self.panel.overlay.setChecked(False)  # a new model opens without the last one's overlay
        self.panel.forget_model()  # nor its filter text and method
        self._show()
        self.panel.status.setText(NOT_CALIBRATED)

    def _restoring(self, text: str) -> None:
        """A session file's calibration is being rebuilt: say so, not "Not calibrated"."""
        if self.session is not None:
            return  # the session it brings is shown already (or one calibrated meanwhile)
        self.panel.status.setText(text or NOT_CALIBRATED)
        self.panel.histogram.clear(text or "Not calibrated.")
