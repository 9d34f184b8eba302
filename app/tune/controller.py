"""Tools > Tune…: `kiln tune` on the document's model, its log kept per model and target.

The controller compiles and measures nothing itself: `app.tune.run` starts the command-line
tool, which measures candidate schedules (QEMU instructions, or time on this host) into a
JSON-lines log. The model the tool reads is the one the export builds: a calibrated
document's int8 model (float layers have no schedule space), else the document's own file
when it holds the graph, else the graph written as ONNX. The log lives in the user's data
folder, one per model content and target, so Start again (Resume) goes on from it and
nothing is measured twice. When a run ends, stopped or complete, the log's entries become the
document's `last_tuning`, which the canvas overlay's "Tuned vs default" reads.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction

from app.explore.controller import explorations_dir
from app.tune.dialog import FIRST, TuneDialog
from app.tune.run import Settings, TuneRun
from app.window.actions import menu_before_help, menu_named
from compiler.errors import KilnError
from compiler.layer_tuning import NAME as TUNED_OVERLAY
from compiler.tuning.log import Entry, read_log

TOOLS = "&Tools"
NO_SPACE = "no layer has a schedule space"  # the tool's sentence for a float model
CALIBRATE = ("Its layers are float: calibrate it first (Quantize > Calibrate…), and Tune "
             "measures the int8 model the calibration makes.")


def tuning_dir() -> Path:
    """The per-user folder of tuning logs (beside the explorations)."""
    return explorations_dir().parent / "tuning"


class TuneController(QObject):
    """Owns Tools > Tune… and its dialog; runs one `kiln tune` at a time.

    Signals:
        runEnded(str): the tool ended: "complete", "stopped" or "failed".
    """

    runEnded = Signal(str)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.dialog: TuneDialog | None = None
        self.run = TuneRun(self)
        self.running: tuple[str, Path] | None = None  # (target, log) of the run under way
        self.last_text = ""  # the last progress line of the run under way
        menu = menu_named(window, TOOLS) or menu_before_help(window, TOOLS)
        self.action = QAction("&Tune…", window)
        self.action.setStatusTip("Search each kernel's schedule against measured cost "
                                 "(instructions under QEMU, or time on this host)")
        self.action.triggered.connect(lambda _checked=False: self.open_dialog())
        menu.addAction(self.action)
        self.run.progress.connect(self._progressed)
        self.run.finished.connect(self._finished)
        doc = self.document
        doc.modelOpened.connect(self._model_opened)
        doc.graphChanged.connect(self._model_changed)
        # A calibration (or a range edit) makes another int8 model: another log.
        doc.quant.sessionChanged.connect(lambda _measured: self._model_changed())
        self._model_changed()

    def _model_changed(self) -> None:
        self.action.setEnabled(self.document.graph is not None)
        if self.dialog is not None and self.dialog.isVisible():
            self._show_log()

    # -- where the tuning is kept ---------------------------------------------------------------

    def _stem(self) -> str:
        return self.document.path.stem if self.document.path else "untitled"

    def _file_holds_graph(self) -> bool:
        doc = self.document
        return doc.path is not None and not doc.graph_edited() and doc.path.is_file()

    def _model(self) -> tuple[str, bytes] | None:
        """(file name, bytes) of the model to tune: the int8 one of a calibrated document.

        KilnError when the document's quantization cannot make its int8 model.
        """
        doc = self.document
        if doc.graph is None:
            return None
        from compiler.frontends.onnx.export import to_onnx

        integer = doc.quant.quantized()
        if integer is not None:
            return f"{self._stem()}-int8.onnx", to_onnx(integer).SerializeToString()
        if self._file_holds_graph():
            return doc.path.name, doc.path.read_bytes()
        return f"{self._stem()}.onnx", to_onnx(doc.graph).SerializeToString()

    @staticmethod
    def _folder(data: bytes, stem: str) -> Path:
        return tuning_dir() / f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}"

    def log_path(self, target: str) -> Path | None:
        """The document's tuning log for `target`: per model content, in the data folder."""
        model = self._model()
        if model is None:
            return None
        return self._folder(model[1], self._stem()) / f"{self._stem()}.{target}.tuning.jsonl"

    def _prepare(self, target: str) -> tuple[Path, Path]:
        """(model file, log) for a run; the model written beside the log (not the user's file)."""
        name, data = self._model()
        folder = self._folder(data, self._stem())
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"{self._stem()}.{target}.tuning.jsonl"
        if self._file_holds_graph() and name == self.document.path.name:
            return self.document.path.resolve(), log
        from compiler.fileio import atomic_write_bytes

        model = folder / name  # named as the user's file, so the tool's sentences name it
        atomic_write_bytes(model, data)
        return model, log

    def entries(self, target: str) -> list[Entry]:
        """The entries of the document's log for `target` (none without a log)."""
        path = self.log_path(target)
        return [] if path is None else read_log(path)

    # -- the dialog -------------------------------------------------------------------------------

    def open_dialog(self) -> TuneDialog:
        """Show the dialog (one per window) with what the chosen target's log holds."""
        if self.dialog is None:
            target = self.document.target if self.document.target in \
                {"cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"} \
                else "cortex-m7"
            dialog = TuneDialog(self.window, target)
            dialog.startRequested.connect(self.start)
            dialog.cancelRequested.connect(self.cancel)
            dialog.showRequested.connect(self.show_on_canvas)
            dialog.targetChosen.connect(lambda _t: self._show_log())
            self.dialog = dialog
        self._show_log()
        self.dialog.show()
        self.dialog.raise_()
        self.dialog.activateWindow()
        return self.dialog

    def _show_log(self) -> list[Entry]:
        """The dialog's log line for its target; the log's entries."""
        dialog = self.dialog
        if dialog is None or self.run.is_running():
            return []
        target = dialog.target.currentData()
        try:
            path = self.log_path(target)
            entries = [] if path is None else read_log(path)
        except KilnError as exc:
            dialog.set_log("", 0)
            dialog.say(str(exc), True)
            return []
        dialog.set_log("" if path is None else str(path), len(entries))
        return entries

    def show_on_canvas(self, target: str) -> None:
        """Make the target's log the document's last tuning and ask for the tuned overlay."""
        try:
            entries = self.entries(target)
        except KilnError as exc:
            self._say(str(exc), True)
            return
        if not entries:
            self._say(f"The log has no schedule measured on {target} yet: Start first.", True)
            return
        last = self.document.last_tuning
        if last is None or last[0] != target or list(last[1]) != entries:
            self.document.set_last_tuning(target, entries)
        self.document.set_overlay(TUNED_OVERLAY)

    # -- the work ---------------------------------------------------------------------------------

    def start(self, target: str, trials: int) -> bool:
        """Run `kiln tune` on the document's model for `target` (a log with entries resumes)."""
        if self.run.is_running() or self.document.graph is None:
            return False
        try:
            model, log = self._prepare(target)
            read_log(log)  # a malformed log is said here, not as the tool's failure
        except KilnError as exc:
            self._say(f"Cannot tune: {exc}", True)
            return False
        except OSError as exc:
            self._say(f"Cannot keep the tuning log in {tuning_dir()}: {exc.strerror}.", True)
            return False
        self.running, self.last_text = (target, log), ""
        self.run.start(Settings(model, target, trials, log))
        if self.dialog is not None:
            self.dialog.set_busy(True)
            self.dialog.say(f"Starting kiln tune on {model.name} for {target}: the default "
                            "schedules are measured first…")
        return True

    def cancel(self) -> None:
        """Stop the tool: every finished round stays in the log."""
        if self.run.is_running():
            self.run.cancel()
            self._say("Stopping after saving the log…")

    def _progressed(self, progress: dict) -> None:
        self.last_text = str(progress.get("text", ""))
        if self.dialog is not None:
            self.dialog.set_progress(int(progress.get("done", 0)),
                                     int(progress.get("total", 0)), self.last_text)

    def _finished(self, state: str, message: str) -> None:
        if self.running is None:  # a run on the model open before this one
            if self.dialog is not None:
                self.dialog.set_busy(False)
                self._show_log()
            return
        (target, log), self.running = self.running, None
        try:
            entries = read_log(log) if log is not None else []
        except KilnError as exc:
            entries, state, message = [], "failed", str(exc)
        if entries:
            self.document.set_last_tuning(target, entries)
        if self.dialog is not None:
            self.dialog.set_busy(False)
            self._show_log()
        if state == "failed":
            if NO_SPACE in message and self.document.quant.recipe() is None:
                message = f"{message.rstrip('.')}. {CALIBRATE}"
            self._say(f"Tuning failed: {message}", True)
        elif state == "stopped":
            self._say(f"Stopped: {len(entries):,} measured schedules kept in {log.name}; "
                      "Resume goes on from them.")
        else:
            self._say(f"Done: {self.last_text or f'{len(entries):,} measured schedules'}.")
        self.runEnded.emit(state)

    def _say(self, text: str, error: bool = False) -> None:
        if self.dialog is not None:
            self.dialog.say(text, error)

    def _model_opened(self) -> None:
        """Another model: a run on the last one stops (its log keeps every finished round)."""
        if self.run.is_running():
            self.running = None  # its log describes the last model: not this document's
            self.run.cancel()
        if self.dialog is not None:
            self.dialog.say(FIRST)  # the graph follows: its log is shown then


def install(window) -> TuneController:
    """Add Tools > Tune…; returns the controller."""
    return TuneController(window)


def screenshots(window, save) -> None:
    """Render the dialog as it opens (a run measures for minutes: none runs here)."""
    if window.document.graph is None:
        return
    dialog = window.tune.open_dialog()
    save(dialog, "tune.png")
    dialog.hide()
