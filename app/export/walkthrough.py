"""Passes > Export Walkthrough…: the pass-by-pass lesson of the open model, written in a Job."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.window import folders
from app.window.actions import menu_named
from app.window.workers import Job, Progress
from compiler.driver import Compilation, Options
from compiler.errors import KilnError
from compiler.walkthrough import WalkthroughExists, all_stages, check_folder, write_walkthrough
from compiler.walkthrough.pages import render
from views import dialogs


def walkthrough_job(compiled: Compilation, options: Options, model: str, notes: dict[str, str],
                    folder: Path, force: bool):
    """The job: every stage, its pages, and the folder swapped in whole (cancel up to then)."""

    def work(progress: Progress) -> Path:
        progress.report(0.0, "running and checking the passes")
        stages = all_stages(compiled, options)
        progress.check()
        progress.report(0.8, "writing the pages")
        files = render(model, options.resolved_target().name, stages, notes)
        write_walkthrough(folder, files, force=force, check=progress.check)
        return folder

    return work


class WalkthroughController(QObject):
    """Owns the menu action and the export job; `written` says where the lesson went."""

    written = Signal(Path)

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.document = window.document
        self.job: Job | None = None
        self.action = QAction("Export &Walkthrough…", window)
        self.action.setStatusTip("Write a pass-by-pass lesson as HTML pages, one per pass "
                                 "that changed something")
        self.action.triggered.connect(lambda: self.export())
        menu = menu_named(window, "&Passes")  # the stepping feature's menu
        if menu is not None:
            menu.addSeparator()
            menu.addAction(self.action)
        else:
            window.addAction(self.action)

    def _ask_folder(self) -> Path | None:
        doc = self.document
        stem = doc.path.stem if doc.path else "model"
        # The folder last written to, else documents or home: the model's is often read-only.
        start = folders.start_folder("walkthrough") / f"{stem}-walkthrough"
        chosen, _ = QFileDialog.getSaveFileName(self.window, "Export Walkthrough (a new folder)",
                                                str(start))
        if not chosen:
            return None
        folders.remember("walkthrough", chosen)
        return Path(chosen)

    def _may_write(self, folder: Path) -> bool | None:
        """True to replace a walkthrough there, False for a free folder, None to stop."""
        try:
            check_folder(folder, force=False)
        except WalkthroughExists:
            answer = QMessageBox.question(self.window, "Replace Walkthrough?",
                                          f"{folder} already holds a walkthrough. Replace it?")
            return True if answer == QMessageBox.StandardButton.Yes else None
        except KilnError as exc:
            dialogs.show_error(self.window, "Cannot export the walkthrough", str(exc))
            return None
        return False

    def export(self, folder: str | Path | None = None) -> Job | None:
        """Start writing the walkthrough into `folder` (asked for when None)."""
        compiled = self.document.compilation()
        if compiled is None:
            dialogs.show_error(self.window, "Cannot export the walkthrough",
                               "Open a model whose graph has no invalid nodes first.")
            return None
        folder = Path(folder) if folder is not None else self._ask_folder()
        if folder is None:
            return None
        force = self._may_write(folder)
        if force is None:
            return None
        notes = dict(getattr(self.document, "stage_notes", None) or {})
        model = self.document.path.name if self.document.path else "untitled"
        job = Job(walkthrough_job(compiled, self.document.options(), model, notes, folder,
                                  force), "Exporting the walkthrough", self)
        status = self.window.statusBar()
        job.progress.connect(lambda _f, text: status.showMessage(f"Walkthrough: {text}…"))
        job.failed.connect(lambda message: dialogs.show_error(
            self.window, "Cannot export the walkthrough", message))
        job.cancelled.connect(lambda: status.showMessage("Walkthrough cancelled", 4000))
        job.succeeded.connect(self._succeeded)
        self.job = job
        return job.start()

    def _succeeded(self, folder: Path) -> None:
        self.window.statusBar().showMessage(f"Wrote the walkthrough to {folder / 'index.html'}",
                                            8000)
        self.written.emit(folder)


def install(window) -> WalkthroughController:
    """Add Passes > Export Walkthrough…; returns its controller."""
    return WalkthroughController(window)


def screenshots(window, save) -> None:
    """Nothing to render: the feature is a menu action and HTML files."""
