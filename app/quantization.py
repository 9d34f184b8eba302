"""The quantization workbench: calibrate, tune ranges by hand, see the error on the graph.

Quantize > Calibrate... profiles the document's model in a worker (progress, cancel); the
profile then belongs to the document: every range change and every "keep float" is an undo
command, the profile is written beside the model when it is saved and read back when it is
opened. After each change a worker re-evaluates the model with the quantizer's incremental
evaluator (per-tensor errors, output SQNR, top-1 agreement on the live samples) and then the
integer model's accuracy over the whole evaluation set, compiled, the figure
`kiln quantize --report` prints. The overlay colours each node by the SQNR of its output.
Graph edits, undo and redo carry the session to the edited graph (`app.quant_follow`).
"""

from __future__ import annotations

import copy
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QUndoCommand
from PySide6.QtWidgets import QFileDialog, QMenu, QScrollArea

from app.calibrate_dialog import CalibrateDialog, CalibrationRequest
from app.dialogs import show_error
from app.quant_follow import Following, stale_text, table_rows
from app.quant_overlay import edge_texts, node_colors
from app.quant_panel import MANUAL, QuantPanel
from app.quant_session import (
    SampleOutputs,
    Session,
    calibrate_job,
    evaluate_session,
    profile_path,
    sample_outputs,
    session_from_profile,
)
from app.workers import Job, SerialWorker
from compiler.errors import KilnError
from compiler.quant.calibrate import choose_range, histogram_error, params_for
from compiler.quant.calibration_data import Normalization
from compiler.quant.profile import load_profile
from compiler.quant.profiler import calibration_graph
from compiler.quant.quantize import Options, quantize

WORST = 5  # tensors in the worst-layers list


class RangeCommand(QUndoCommand):
    """One tensor's range edit (None: back to the calibration method's range)."""

    def __init__(self, controller: QuantController, tensor: str, before, after, text: str):
        super().__init__(text)
        self.controller, self.tensor, self.before, self.after = controller, tensor, before, after

    def redo(self) -> None:  # noqa: D102 (Qt override)
        self.controller.apply_override(self.tensor, self.after)

    def undo(self) -> None:  # noqa: D102 (Qt override)
        self.controller.apply_override(self.tensor, self.before)


class KeepFloatCommand(QUndoCommand):
    """Leave a tensor in float, or quantize it again."""

    def __init__(self, controller: QuantController, tensor: str, keep: bool):
        super().__init__(f"{'Keep' if keep else 'Quantize'} {tensor} {'float' if keep else ''}")
        self.controller, self.tensor, self.keep = controller, tensor, keep

    def redo(self) -> None:  # noqa: D102 (Qt override)
        self.controller.apply_keep_float(self.tensor, self.keep)

    def undo(self) -> None:  # noqa: D102 (Qt override)
        self.controller.apply_keep_float(self.tensor, not self.keep)


class QuantController(QObject):
    """Owns the Quantization dock, the Quantize menu and the session.

    Signals:
        evaluated(): the panel, the readouts and the overlay show the current ranges.
        outputsShown(): the Outputs tab shows the chosen sample.
        calibrationEnded(bool): a calibration finished (True) or was cancelled / failed.
    """

    evaluated = Signal()
    calibrationEnded = Signal(bool)
    outputsShown = Signal()

    def __init__(self, window):
        super().__init__(window)
        self.window, self.document = window, window.document
        self.panel = QuantPanel()
        scroll = QScrollArea()  # a small dock scrolls rather than growing the window
        scroll.setWidget(self.panel)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.dock = window.add_panel_dock("Quantization", scroll,
                                          Qt.DockWidgetArea.RightDockWidgetArea)
        window.tabifyDockWidget(window.docks["properties"], self.dock)  # the whole column
        window.docks["properties"].raise_()
        self.dock.hide()
        self.session: Session | None = None
        self.context_menu: QMenu | None = None
        self.dialog: CalibrateDialog | None = None
        self.calibration_job: Job | None = None
        self._worker = SerialWorker("quantization", self)
        self._worker.succeeded.connect(self._evaluated)
        self._worker.failed.connect(
            lambda message: self.panel.status.setText(f"Evaluation failed: {message}"))
        self._pending = False
        self._syncing = False
        self._build_menu(window)
        self._connect()
        self.following = Following(self)  # after _connect: edits re-colour once carried

    def _build_menu(self, window) -> None:
        def action(text: str, slot, tip: str) -> QAction:
            act = QAction(text, window)
            act.setStatusTip(tip)
            act.triggered.connect(slot)
            return act

        self.calibrate_action = action("&Calibrate…", self.calibrate_dialog,
                                       "Profile the model on samples and quantize it")
        self.load_action = action("&Load Profile…", self.load_dialog, "Read a saved profile")
        self.save_action = action("&Save Profile…", self.save_dialog, "Write the profile")
        self.keep_action = action("&Keep Float", self.toggle_keep_selected,
                                  "Leave the selected node's output (and weights) in float")
        self.overlay_action = action("Error &Overlay", self.panel.overlay.setChecked,
                                     "Colour each node by the SQNR of its output")
        self.overlay_action.setCheckable(True)
        menu = QMenu("&Quantize", window)
        bar = window.menuBar()
        existing = bar.actions()
        if existing:  # before Help, which stays last
            bar.insertMenu(existing[-1], menu)
        else:
            bar.addMenu(menu)
        menu.addActions([self.calibrate_action, self.load_action, self.save_action])
        menu.addSeparator()
        menu.addActions([self.keep_action, self.overlay_action, self.dock.toggleViewAction()])

    def _connect(self) -> None:
        p, doc = self.panel, self.document
        p.calibrate_button.clicked.connect(self._calibrate_clicked)
        p.table.selectionModel().selectionChanged.connect(self._row_selected)
        p.histogram.rangeDragged.connect(self._dragging)
        p.histogram.rangeChosen.connect(self.set_range)
        p.low.valueChanged.connect(lambda v: self.set_range(v, p.high.value()))
        p.high.valueChanged.connect(lambda v: self.set_range(p.low.value(), v))
        p.method.activated.connect(lambda _i: self._method_chosen(p.method.currentText()))
        p.keep_float.clicked.connect(lambda on: self.set_keep_float(self.tensor(), on))
        p.overlay.toggled.connect(self._overlay_toggled)
        p.bars.tensorClicked.connect(self.show_tensor)
        p.sample.valueChanged.connect(lambda _v: self.request_outputs())
        p.tabs.currentChanged.connect(lambda _i: self.request_outputs())
        p.worst.itemClicked.connect(
            lambda item: self.show_tensor(item.data(Qt.ItemDataRole.UserRole)))
        doc.modelOpened.connect(self._model_opened)
        doc.selectionChanged.connect(self._canvas_selected)
        doc.saved.connect(self._document_saved)
        self.window.layoutReady.connect(self.show_overlay)
        canvas = self.window.canvas
        canvas.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        canvas.customContextMenuRequested.connect(self._context_menu)

    # -- calibration ----------------------------------------------------------------------------

    def _calibrate_clicked(self) -> None:
        """The panel's button: Calibrate…, or Cancel while a calibration runs."""
        if self.calibration_job is not None and self.calibration_job.is_active():
            self.cancel_calibration()
        else:
            self.calibrate_dialog()

    def _calibrating(self, on: bool) -> None:
        self.panel.calibrate_button.setText("Cancel" if on else "Calibrate…")
        self.calibrate_action.setEnabled(not on)

    def calibrate_dialog(self) -> CalibrateDialog | None:
        """Ask for the samples and the choices (a window-modal sheet), then calibrate."""
        if self.document.graph is None:
            return None
        sample = self.document.path is not None and self.document.path.name == "digits_cnn.onnx"
        dialog = CalibrateDialog.for_graph(self.window, self.document.graph, sample,
                                           self.window.remember)
        dialog.accepted.connect(lambda: self._dialog_accepted(dialog))
        dialog.open()
        self.dialog = dialog
        return dialog

    def _dialog_accepted(self, dialog: CalibrateDialog) -> None:
        self.dialog = None
        self.calibrate(dialog.request())  # the dialog accepts only numbers for mean and std

    def calibrate(self, request: CalibrationRequest) -> Job | None:
        """Profile and evaluate in a worker; the session changes only if it succeeds."""
        graph = self.document.graph
        if graph is None or not request.data:
            return None
        if self.calibration_job is not None:
            self.calibration_job.cancel()
        model = self.document.path.name if self.document.path else graph.name
        job = Job(calibrate_job(graph, request, model), "Calibrating", self)
        bar = self.window.statusBar()
        job.progress.connect(lambda f, text: bar.showMessage(f"{text}… {f:.0%}"))
        job.succeeded.connect(self._calibrated)
        job.failed.connect(self._calibration_failed)
        job.cancelled.connect(lambda: (bar.showMessage("Calibration cancelled", 5000),
                                       self._calibrating(False),
                                       self.panel.status.setText("Calibration cancelled."),
                                       self.calibrationEnded.emit(False)))
        self.calibration_job = job
        self.dock.show()
        self.dock.raise_()
        self.panel.status.setText("Calibrating…")
        self._calibrating(True)
        return job.start()

    def cancel_calibration(self) -> None:
        """Stop a running calibration; the current session stays as it was."""
        if self.calibration_job is not None:
            self.calibration_job.cancel()
            self.calibration_job = None
            self._show()

    def take_session(self, session: Session) -> None:
        """Use a calibration's result (as a finished calibration job does)."""
        self._calibrated(session)

    def _calibrated(self, session: Session) -> None:
        self.calibration_job = None
        self._calibrating(False)
        if session.graph is not self.document.graph:
            return  # another model or an edit meanwhile: the result describes nothing shown
        self.session = session
        self.dock.show()
        self.dock.raise_()
        minimap = self.window.docks.get("minimap")
        if minimap is not None and not self.dock.isFloating():  # room for table and histogram
            height, width = self.window.height(), self.window.width()
            self.window.resizeDocks([self.dock, minimap], [int(height * 0.78), 120],
                                    Qt.Orientation.Vertical)
            self.window.resizeDocks([self.dock], [max(self.dock.width(), int(width * 0.42))],
                                    Qt.Orientation.Horizontal)
        evaluator = session.evaluator
        self._worker.submit(lambda: evaluator.warm_up() and None)  # its thread does the rest
        self.window.statusBar().showMessage(
            f"Calibrated {len(session.profile.tensors)} tensors on {session.live.source}", 8000)
        self._show()
        self.calibrationEnded.emit(True)

    def _calibration_failed(self, message: str) -> None:
        self.calibration_job = None
        self._calibrating(False)
        self._show()
        self.panel.status.setText(f"Calibration failed: {message}")  # not "Calibrating…"
        self.window.statusBar().showMessage("Calibration failed", 8000)  # nor its progress
        show_error(self.window, "Calibration failed", message)
        self.calibrationEnded.emit(False)

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
        before = self.session.profile.overrides.get(tensor)
        after = {"min": float(low), "max": float(high)}
        if before != after:
            self.document.undo_stack.push(RangeCommand(self, tensor, copy.copy(before), after,
                                                       f"Range of {tensor}"))

    def set_keep_float(self, tensor: str | None, keep: bool) -> None:
        """Leave `tensor` in float (or not): one undo step."""
        if self.session is None or tensor not in self.session.profile.tensors:
            return  # unprofiled tensors stay float anyway
        if (tensor in self.session.profile.keep_float) != keep:
            self.document.undo_stack.push(KeepFloatCommand(self, tensor, keep))

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

    def apply_override(self, tensor: str, override: dict | None) -> None:
        """Set (or clear) an override and re-evaluate (for the commands)."""
        if self.session is None or tensor not in self.session.profile.tensors:
            return  # measured again since, without this tensor
        if override is None:
            self.session.profile.overrides.pop(tensor, None)
        else:
            self.session.profile.overrides[tensor] = dict(override)
        self._evaluate_soon()
        self._show_selected()

    def apply_keep_float(self, tensor: str, keep: bool) -> None:
        """Add or remove `tensor` from the float ones and re-evaluate (for the commands)."""
        if self.session is None:
            return
        kept = [t for t in self.session.profile.keep_float if t != tensor]
        self.session.profile.keep_float = kept + ([tensor] if keep else [])
        self._evaluate_soon()
        self._show_selected()

    def quantized(self):
        """(QDQ graph, profile copy, method, schema) of the document as calibrated, or None.

        What `kiln compile --profile` builds from the same profile, method and schema.
        """
        s = self.session
        if s is None or s.graph is not self.document.graph:
            return None
        profile = copy.deepcopy(s.profile)
        options = Options(method=s.options.method, schema=s.options.schema)
        return quantize(s.graph, profile, options), profile, options.method, options.schema

    def method_range(self, tensor: str, method: str) -> tuple[float, float]:
        """The range `method` picks for `tensor` (remembered: the KL search takes a while)."""
        known = self.session.method_ranges
        if (tensor, method) not in known:
            known[tensor, method] = choose_range(self.session.profile.tensors[tensor], method)
        return known[tensor, method]

    def _method_chosen(self, method: str) -> None:
        tensor = self.tensor()
        if self.session is None or tensor is None or method == MANUAL:
            return
        self.set_range(*self.method_range(tensor, method))

    def use_session(self, session: Session) -> None:
        """Make `session` current and evaluate it (one that followed an edit, or Re-profile's)."""
        self.session = session
        self._evaluate_soon()
        self._show()

    # -- evaluation --------------------------------------------------------------------------

    def is_busy(self) -> bool:
        """True while a calibration or an evaluation runs."""
        return self._worker.is_busy() or (self.calibration_job is not None
                                           and self.calibration_job.is_active())

    def _evaluate_soon(self) -> None:
        if self._worker.is_busy():
            self._pending = True  # the latest ranges go next, in one evaluation
            return
        session = self.session
        self._worker.submit(lambda: evaluate_session(session) or session)
        self.panel.status.setText("Re-evaluating…")

    def request_outputs(self) -> None:
        """Compute the chosen sample's outputs, float and int8, when the Outputs tab shows."""
        s, p = self.session, self.panel
        if s is None or s.evaluator is None or p.tabs.currentIndex() != 2:
            return
        index = p.sample.value()
        self._worker.submit(lambda: sample_outputs(s, index))

    def _evaluated(self, session) -> None:
        if isinstance(session, SampleOutputs):
            if session.index == self.panel.sample.value():
                self.panel.show_outputs(session.index, session.floating, session.integer)
            self.outputsShown.emit()
            return
        if self._pending:
            self._pending = False
            self._evaluate_soon()
            return
        if session is not None and session is self.session:  # None: the warm-up
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
        p.output_sqnr.setText(", ".join(f"{v:.1f} dB" for v in e.output_sqnr.values()))
        p.agreement.setText(f"{100 * e.top1_agreement:.1f} % of {s.evaluator.count}")
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
        p.status.setText(f"{len(e.tensors)} quantized tensors; {s.live.source}, "
                         f"{e.recomputed} nodes re-run in {1000 * e.seconds:.0f} ms")
        self._show_selected()
        self.show_overlay()
        self.request_outputs()
        self.evaluated.emit()

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
            return
        entry = s.profile.tensors[tensor]
        low, high = s.profile.range_of(tensor) if tensor in s.profile.overrides else \
            self.method_range(tensor, s.options.method)
        quant = params_for(low, high, s.options.schema) if high > low else None
        was, self._syncing = self._syncing, True  # nested calls keep the outer flag
        p.histogram.set_histogram(entry.histogram, entry.min, entry.max, low, high,
                                  quant.scale if quant else 0.0)
        p.low.setValue(low)
        p.high.setValue(high)
        methods = [m for m in ("minmax", "percentile", "entropy", "mse")
                   if self.method_range(tensor, m) == (low, high)]
        p.method.setCurrentText(s.options.method if tensor not in s.profile.overrides
                                else (methods[0] if methods else MANUAL))
        p.keep_float.setChecked(tensor in s.profile.keep_float)
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
        self.show_overlay()

    def node_colors(self) -> dict[object, tuple[str, str]]:
        """Canvas key -> (fill, text) of its output's SQNR bin."""
        return node_colors(self.session, self.document.graph)

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
        if self.calibration_job is not None:
            self.calibration_job.cancel()
            self.calibration_job = None
        self.session = None
        self.panel.overlay.setChecked(False)  # a new model opens without the last one's overlay
        self._show()
        self.panel.status.setText("Not calibrated. Quantize > Calibrate… measures every tensor.")

    def _document_saved(self, path: Path) -> None:
        if self.session is not None and self.session.graph is self.document.graph:
            try:
                self.session.profile.save(profile_path(Path(path)))
            except OSError as exc:
                show_error(self.window, "Save profile", f"cannot write the profile: {exc}")

    def save_dialog(self) -> None:
        """Write the profile (ranges, overrides, float tensors) as JSON."""
        if self.session is None:
            return
        path, _ = QFileDialog.getSaveFileName(self.window, "Save Profile", "",
                                              "Profiles (*.json)")
        if path:
            self.session.profile.save(path)

    def load_dialog(self) -> None:
        """Read a profile of this model and evaluate it on the samples it came from."""
        path, _ = QFileDialog.getOpenFileName(self.window, "Load Profile", "",
                                              "Profiles (*.json)")
        if path:
            self.load_profile(path)

    def load_profile(self, path: str | Path) -> Job | None:
        """Use the profile at `path` (checked against the graph) on its own samples."""
        graph = self.document.graph
        if graph is None:
            return None
        try:
            profile = load_profile(path)
            profile.check_graph(calibration_graph(graph, profile.equalized), str(path))
        except KilnError as exc:
            show_error(self.window, "Load profile", str(exc))
            return None
        source = str(profile.data.get("source", ""))
        # The samples it was measured on; the digits' held-out split measures the sample CNN.
        request = CalibrationRequest(source, "digits:test" if source == "digits:train" else "",
                                     Normalization())
        job = Job(lambda _progress: session_from_profile(graph, profile, request),
                  "Evaluating the profile", self)
        job.succeeded.connect(self._calibrated)
        job.failed.connect(self._calibration_failed)
        self.calibration_job = job
        self.dock.show()
        return job.start()
