"""Tools > Validate on Device…: runs the validation in a worker and keeps its result.

The dialog asks; this controller compiles nothing itself: the worker runs
`compiler.device.validate` on the document's compilation (the runner firmware's build), and
the result, with its per-layer metric, becomes the document's `last_validation`, which the
canvas overlay's "Device ticks" reads. A cancel (the button, closing the dialog, another
model) stops the worker at its next step; QEMU is stopped on its way out.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction

from app.device import state
from app.device.dialog import ValidateDialog
from app.device.state import DeviceRun, ValidateRequest
from app.window.actions import menu_before_help, menu_named
from app.window.workers import Job
from compiler.mcu import firmware

DEVICE_OVERLAY = "device"  # the Overlay menu's key of the device metric
TOOLS = "&Tools"


class DeviceController(QObject):
    """Owns the Tools menu's Validate on Device and its dialog; runs one validation at a time."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.dialog: ValidateDialog | None = None
        self.job: Job | None = None
        self.request: ValidateRequest | None = None  # the last one asked (the form keeps it)
        menu = menu_named(window, TOOLS) or menu_before_help(window, TOOLS)
        self.action = QAction("Validate on &Device…", window)
        self.action.setStatusTip("Run the model on a board or on QEMU: outputs against Kiln's "
                                 "interpreter and the original runtime, latency, ticks per "
                                 "layer")
        self.action.triggered.connect(lambda _checked=False: self.open_dialog())
        menu.addAction(self.action)
        self.menu = menu
        doc = self.document
        doc.modelOpened.connect(self._model_opened)
        doc.graphChanged.connect(self._update_action)
        self._update_action()

    def _update_action(self) -> None:
        self.action.setEnabled(self.document.graph is not None)

    # -- the dialog -------------------------------------------------------------------------------

    def open_dialog(self) -> ValidateDialog:
        """Show the dialog (one per window), with the last result of this graph if any."""
        if self.dialog is None:
            core = self.document.target if self.document.target in dict(state.cores()) \
                else "cortex-m7"
            path = self.document.path
            dialog = ValidateDialog(self.window, state.cores(), state.ports(), core,
                                    str(path.parent) if path is not None else "")
            dialog.validateRequested.connect(self.start)
            dialog.cancelRequested.connect(self.cancel)
            dialog.showRequested.connect(self.show_on_canvas)
            dialog.refreshRequested.connect(lambda: dialog.set_ports(state.ports()))
            self.dialog = dialog
        run = self.document.last_validation
        if run is not None and run.graph is self.document.graph:
            self.dialog.show_result(run.validation, run.layer_names())
        else:
            self.dialog.show_result(None)
        self.dialog.show()
        self.dialog.raise_()
        self.dialog.activateWindow()
        return self.dialog

    def show_on_canvas(self) -> None:
        """Ask the document for the device overlay (the Overlay menu's "Device ticks")."""
        self.document.set_overlay(DEVICE_OVERLAY)

    # -- the work ---------------------------------------------------------------------------------

    def is_busy(self) -> bool:
        """True while a validation runs."""
        return self.job is not None and self.job.is_active()

    def start(self, request: ValidateRequest) -> Job | None:
        """Validate the document's graph as `request` says, in a worker."""
        doc, dialog = self.document, self.dialog
        self.cancel(quiet=True)
        if doc.graph is None or doc.path is None:
            self._say("Open a model first: the validation compares with its file's runtime.",
                      True)
            return None
        compiled = doc.compilation()
        if compiled is None:
            self._say("The graph has invalid nodes: fix or undo the edit first.", True)
            return None
        if request.port == state.QEMU and (missing := firmware.missing_tools()):
            self._say(f"QEMU validation needs {' and '.join(missing)} (Debian packages: "
                      f"{firmware.PACKAGES}).", True)
            return None
        self.request = request
        job = Job(state.validation_job(doc.path, compiled, doc.graph, request),
                  "Validating on the device", self)
        if dialog is not None:
            job.progress.connect(lambda f, t: dialog.set_busy(True, f, t))
            dialog.show_result(None)
            dialog.set_busy(True, 0.0, "Compiling the runner firmware's build…")
        job.succeeded.connect(self._validated)
        job.failed.connect(self._failed)
        self.job = job
        return job.start()

    def cancel(self, quiet: bool = False) -> None:
        """Stop the running validation (Cancel, closing the dialog, another model)."""
        if self.job is None:
            return
        job, self.job = self.job, None
        was_running = job.is_active()
        job.cancel()
        if self.dialog is not None:
            self.dialog.set_busy(False)
            if was_running and not quiet:
                self.dialog.say("Cancelled: the board was left and QEMU stopped.")

    def _validated(self, run: DeviceRun) -> None:
        self.job = None
        if run.graph is not self.document.graph:
            self._say("The graph changed during the validation: Validate again.", True)
            return
        self.document.set_last_validation(run)
        if self.dialog is not None:
            self.dialog.set_busy(False)
            v = run.validation
            self.dialog.say(f"Validated {v.count} inputs on {v.board}: "
                            f"{'every check passed' if v.passed else 'a check failed'}.",
                            not v.passed)
            self.dialog.show_result(v, run.layer_names())

    def _failed(self, message: str) -> None:
        self.job = None
        self._say(message, True)

    def _say(self, text: str, error: bool = False) -> None:
        if self.dialog is not None:
            self.dialog.set_busy(False)
            self.dialog.say(text, error)

    def _model_opened(self) -> None:
        self.cancel(quiet=True)
        if self.dialog is not None:
            self.dialog.show_result(None)
            self.dialog.say("Choose the core and the port, then Validate.")


def install(window) -> DeviceController:
    """Add Tools > Validate on Device…; returns the controller."""
    return DeviceController(window)


def screenshots(window, save) -> None:
    """Render the dialog as it opens (a validation needs a board or QEMU: none runs here)."""
    if window.document.graph is None:
        return
    controller: DeviceController = window.device
    dialog = controller.open_dialog()
    save(dialog, "validate_device.png")
    dialog.hide()
