"""File > Export Report…: the `kiln report` page of the model open in the workbench.

The figures are gathered in a worker (counting instructions under QEMU takes seconds), with
progress and cancel; the page is written atomically, and an existing file is replaced only
after the user agrees. Target and board are the document's, as the Code and Memory panels show.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox, QProgressDialog

from app.export.controller import add_to_file_menu
from app.window.workers import Job, Progress
from compiler.codegen.targets import BOARDS
from compiler.fileio import atomic_write_bytes
from compiler.report import collect_report, render_html
from compiler.report.figures import DEFAULT_CLOCK_MHZ, quantization_of


def report_job(compiled, model: str, options, board: str | None, path: Path,
               quantized=None, clock_mhz: float = DEFAULT_CLOCK_MHZ):
    """The job's function: gather, render, and write `path` (nothing written when cancelled).

    `options` are the document's driver options (target, arena choice, lowering); `quantized`
    is its (calibrated float graph, recipe, pipeline) when calibrated, quantized here.
    """
    def work(progress: Progress) -> Path:
        quant = None
        if quantized is not None:
            from compiler.driver import compilation
            from compiler.quant.recipe import quantize_with

            source, recipe, pipeline = quantized
            progress.report(0.0, "Quantizing with the document's recipe")
            qdq = quantize_with(source, recipe)
            quant = quantization_of(qdq, recipe)
            graph_compiled = compilation(qdq, pipeline)
        else:
            graph_compiled = compiled
        report = collect_report(graph_compiled, model, options.target,
                                BOARDS.get(board) if board else None, clock_mhz, quant,
                                progress=lambda fraction, text: progress.report(
                                    0.95 * fraction, text), options=options)
        page = render_html(report).encode()
        progress.report(0.97, f"Writing {path.name}")
        atomic_write_bytes(path, page)
        progress.report(1.0, f"Wrote {path.name}")
        return path
    return work


class ReportController(QObject):
    """The Export Report action, its file question and the job writing the page."""

    def __init__(self, window):
        super().__init__(window)
        from PySide6.QtGui import QAction

        self.window = window
        self.document = window.document
        self.job: Job | None = None
        self.progress: QProgressDialog | None = None
        self.last: Path | None = None
        self.action = QAction("Export &Report…", window)
        tip = ("Write one self-contained HTML report: model, flash and RAM, memory timeline, "
               "per-layer table and passes")
        self.action.setStatusTip(tip)
        self.action.setToolTip(tip)
        self.action.triggered.connect(lambda _checked=False: self.ask_and_export())
        self.document.graphChanged.connect(self._update_action)
        self.document.modelOpened.connect(self.cancel)
        self._update_action()

    def _update_action(self) -> None:
        self.action.setEnabled(self.document.graph is not None)

    def _stem(self) -> str:
        path = self.document.path
        return path.stem if path else "model"

    def ask_and_export(self) -> Job | None:
        """Ask where to write (the file dialog), then `export` there."""
        if self.document.graph is None:
            return None
        folder = self.last.parent if self.last else Path.home()
        start = str(folder / f"{self._stem()}_{self.document.target}_report.html")
        chosen, _ = QFileDialog.getSaveFileName(
            self.window, "Export Report", start, "HTML report (*.html)",
            options=QFileDialog.Option.DontConfirmOverwrite)  # asked below, as everywhere
        return self.export(Path(chosen)) if chosen else None

    def export(self, path: Path) -> Job | None:
        """Gather and write the report of the document's graph to `path` in a worker."""
        if self.document.graph is None or (self.job is not None and self.job.is_active()):
            return None
        if path.suffix.lower() not in (".html", ".htm"):
            path = path.with_name(path.name + ".html")
        if path.exists() and not self._confirm_replace(path):
            self.window.statusBar().showMessage("Report not exported: the file was left as "
                                                "it was.", 5000)
            return None
        compiled = self.document.compilation()
        if compiled is None:
            QMessageBox.warning(self.window, "Export Report", "The graph has invalid nodes: "
                                "fix or undo the edit before reporting on it.")
            return None
        state = self.document.quant
        recipe = state.recipe()
        quantized = None if recipe is None else (state.current().graph, recipe,
                                                 self.document.pipeline)
        model = self.document.path.name if self.document.path else "model"
        job = Job(report_job(compiled, model, self.document.options(), self.document.board,
                             path, quantized), f"Reporting on {model}", self)
        self._show_progress(job)
        job.succeeded.connect(self._succeeded)
        job.failed.connect(self._failed)
        job.cancelled.connect(self._cancelled)
        self.job = job
        return job.start()

    def _show_progress(self, job: Job) -> None:
        dialog = QProgressDialog("Gathering the report…", "Cancel", 0, 1000, self.window)
        dialog.setWindowTitle("Export Report")
        dialog.setWindowModality(Qt.WindowModality.NonModal)
        dialog.setMinimumDuration(300)
        dialog.canceled.connect(job.cancel)
        job.progress.connect(lambda fraction, text: (dialog.setValue(round(1000 * fraction)),
                                                     dialog.setLabelText(text)))
        self.progress = dialog

    def _close_progress(self) -> None:
        if self.progress is not None:
            self.progress.canceled.disconnect()
            self.progress.close()
            self.progress.deleteLater()
            self.progress = None

    def cancel(self) -> None:
        """Stop a running report (nothing is written)."""
        if self.job is not None:
            self.job.cancel()

    def _succeeded(self, path: Path) -> None:
        self._close_progress()
        self.last = path
        self.window.statusBar().showMessage(f"Wrote the report {path.name} to {path.parent}",
                                            8000)

    def _failed(self, message: str) -> None:
        self._close_progress()
        QMessageBox.warning(self.window, "Export Report", f"Report not exported: {message}")

    def _cancelled(self) -> None:
        self._close_progress()
        self.window.statusBar().showMessage("Report cancelled: nothing was written", 5000)

    def _confirm_replace(self, path: Path) -> bool:
        no = QMessageBox.StandardButton.No
        answer = QMessageBox.question(self.window, "Replace Report?",
                                      f"{path.name} already exists in {path.parent}. Replace it?",
                                      QMessageBox.StandardButton.Yes | no, no)
        return answer == QMessageBox.StandardButton.Yes


def install(window) -> ReportController:
    """Add File > Export Report… to `window`; returns the controller (`window.report`)."""
    controller = ReportController(window)
    add_to_file_menu(window, controller.action)
    return controller


def screenshots(window, save) -> None:
    """Nothing to draw in the window: the report is a page of its own (a browser shows it)."""
