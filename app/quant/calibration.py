"""Calibrating: the jobs that give the document a measured quantization session.

Quantize > Calibrate... asks for samples (a window-modal sheet) and profiles the model in a
worker (progress, cancel); Load Profile... reads a saved profile, checks it against the graph
and evaluates it on its own samples, in a worker too; Save Profile... writes it. A job that
succeeds hands its session to the document (`app.quant.state`), which the dock then shows; a
cancelled or failed one leaves the document's session as it was. The profile is also written
beside the model whenever the model is saved.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog

from app.quant.calibrate_dialog import CalibrateDialog, CalibrationRequest
from app.quant.session import Session, calibrate_job, profile_job, profile_path
from app.window.workers import Job
from views.dialogs import show_error
from views.quant_panel import QuantPanel


class Calibration(QObject):
    """Runs one calibration or profile load at a time for the Quantization dock.

    `dock` is shown when a job starts; `redraw()` shows the document's session again after a
    job that gave none.

    Signals:
        stopped(): a job was cancelled or failed (the panel says why).
    """

    stopped = Signal()

    def __init__(self, window, panel: QuantPanel, dock, redraw: Callable[[], None]):
        super().__init__(window)
        self.window, self.document, self.state = window, window.document, window.document.quant
        self.panel, self.dock, self._redraw = panel, dock, redraw
        self.dialog: CalibrateDialog | None = None
        self.job: Job | None = None
        self.calibrate_action = self._action("&Calibrate…", self.open_dialog,
                                             "Profile the model on samples and quantize it")
        self.load_action = self._action("&Load Profile…", self.load_dialog,
                                        "Read a saved profile")
        self.save_action = self._action("&Save Profile…", self.save_dialog, "Write the profile")
        panel.calibrate_button.clicked.connect(self._button_clicked)
        self.document.saved.connect(self._document_saved)

    def _action(self, text: str, slot, tip: str) -> QAction:
        act = QAction(text, self.window)
        act.setStatusTip(tip)
        act.triggered.connect(slot)
        return act

    def is_running(self) -> bool:
        """True while a calibration or a profile load runs."""
        return self.job is not None and self.job.is_active()

    # -- calibrating ------------------------------------------------------------------------------

    def _button_clicked(self) -> None:
        """The panel's button: Calibrate…, or Cancel while a calibration runs."""
        if self.is_running():
            self.cancel()
        else:
            self.open_dialog()

    def _running(self, on: bool) -> None:
        self.panel.calibrate_button.setText("Cancel" if on else "Calibrate…")
        self.calibrate_action.setEnabled(not on)

    def open_dialog(self) -> CalibrateDialog | None:
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
        if self.job is not None:
            self.job.cancel()
        model = self.document.path.name if self.document.path else graph.name
        job = Job(calibrate_job(graph, request, model, self.state.calibration_graph),
                  "Calibrating", self)
        bar = self.window.statusBar()
        job.progress.connect(lambda f, text: bar.showMessage(f"{text}… {f:.0%}"))
        job.succeeded.connect(self.take)
        job.failed.connect(self._failed)
        job.cancelled.connect(lambda: (bar.showMessage("Calibration cancelled", 5000),
                                       self._running(False),
                                       self.panel.status.setText("Calibration cancelled."),
                                       self.stopped.emit()))
        self.job = job
        self.dock.show()
        self.dock.raise_()
        self.panel.status.setText("Calibrating…")
        self._running(True)
        return job.start()

    def cancel(self, redraw: bool = True) -> None:
        """Stop a running calibration or load; the current session stays as it was."""
        if self.job is not None:
            self.job.cancel()
            self.job = None
            if redraw:
                self._redraw()

    def take(self, session: Session) -> None:
        """Give the document a job's session (unless it describes another graph by now)."""
        self.job = None
        self._running(False)
        if session.graph is not self.document.graph:
            return  # another model or an edit meanwhile: the result describes nothing shown
        self.state.set_session(session, measured=True)

    def _failed(self, message: str) -> None:
        self.job = None
        self._running(False)
        self._redraw()
        self.panel.status.setText(f"Calibration failed: {message}")  # not "Calibrating…"
        self.window.statusBar().showMessage("Calibration failed", 8000)  # nor its progress
        show_error(self.window, "Calibration failed", message)
        self.stopped.emit()

    # -- profile files ----------------------------------------------------------------------------

    def _document_saved(self, path: Path) -> None:
        session = self.state.current()
        if session is not None:
            try:
                session.profile.save(profile_path(Path(path)))
            except OSError as exc:
                show_error(self.window, "Save profile", f"cannot write the profile: {exc}")

    def save_dialog(self) -> None:
        """Write the profile (ranges, overrides, float tensors) as JSON."""
        session = self.state.session
        if session is None:
            return
        path, _ = QFileDialog.getSaveFileName(self.window, "Save Profile", "",
                                              "Profiles (*.json)")
        if path:
            session.profile.save(path)

    def load_dialog(self) -> None:
        """Read a profile of this model and evaluate it on the samples it came from."""
        path, _ = QFileDialog.getOpenFileName(self.window, "Load Profile", "",
                                              "Profiles (*.json)")
        if path:
            self.load_profile(path)

    def load_profile(self, path: str | Path) -> Job | None:
        """Use the profile at `path` (checked against the graph, in a worker) on its samples."""
        graph = self.document.graph
        if graph is None:
            return None
        job = Job(profile_job(graph, Path(path), self.state.calibration_graph),
                  "Evaluating the profile", self)
        job.succeeded.connect(self.take)
        job.failed.connect(self._load_failed)
        self.job = job
        self.dock.show()
        self.panel.status.setText("Loading the profile…")
        return job.start()

    def _load_failed(self, message: str) -> None:
        self.job = None
        self._redraw()
        self.panel.status.setText(f"Loading the profile failed: {message}")
        show_error(self.window, "Load profile", message)
        self.stopped.emit()
