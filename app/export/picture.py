"""File > Export Picture…: the canvas, a group of nodes, the timeline or the size report as SVG/PNG.

SVG keeps text as text (searchable, selectable, sharp at any zoom); PNG is drawn at a chosen
scale. Both are painted by the views' own paint code (views.vector_export), so a picture shows
what the window shows.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, Qt
from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import QMessageBox

from app.export.controller import add_to_file_menu
from compiler.errors import KilnError
from views.picture_dialog import SUBJECTS, PictureDialog, PictureRequest
from views.size_report import SizeReport
from views.timeline import TIMELINE_NAME, MemoryTimeline
from views.vector_export import (
    Picture,
    canvas_region,
    scene_picture,
    widget_picture,
    write_picture,
)

REPORT_SIZE = (760, 680)  # the size report's picture: the export dialog's result page
LABELS = dict(SUBJECTS)


class PictureController(QObject):
    """The Export Picture action, its dialog, and drawing the chosen view into a file."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.dialog: PictureDialog | None = None
        self.folder: Path | None = None  # where the last picture went (this session)
        self.action = QAction("Export &Picture…", window)
        tip = "Save the canvas, the selected nodes, the memory timeline or the size report " \
              "as SVG or PNG"
        self.action.setStatusTip(tip)
        self.action.setToolTip(tip)
        self.action.triggered.connect(lambda _checked=False: self.open_dialog())
        window.document.graphChanged.connect(self._update_action)
        window.canvas.nodeSelected.connect(self._refresh)  # "the selected node" comes and goes
        self._update_action()

    def _refresh(self, *_args) -> None:
        """An open dialog offers what can be exported now."""
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.set_available(self.availability())

    def _update_action(self) -> None:
        self.action.setEnabled(self.window.document.graph is not None)
        self._refresh()

    # -- what can be drawn -----------------------------------------------------------------------

    def group_keys(self, subject: str) -> list | None:
        """The canvas boxes of a canvas subject: None for the whole graph, else their keys."""
        canvas = self.window.canvas
        if subject == "selection":
            key = canvas.selected_key()
            return [] if key is None else [key]
        if subject == "matches":
            return sorted(canvas.highlighted(), key=str)
        if subject == "group":
            key = canvas.selected_key()
            frame = canvas.enclosing_frame(key) if key is not None else None
            return [] if frame is None else [frame]
        return None

    def _timeline(self) -> MemoryTimeline:
        """The window's memory timeline widget (the Memory Timeline dock draws into it)."""
        return self.window.findChild(MemoryTimeline, TIMELINE_NAME)  # not Compare's or Passes'

    def _report(self) -> dict | None:
        return self.window.document.last_export  # the last bundle exported, if any

    def availability(self) -> dict[str, str | None]:
        """Per subject, None when it can be exported, else why not (the dialog's tooltip)."""
        canvas = self.window.canvas
        empty = canvas.graph_layout() is None
        timeline = self._timeline()
        return {
            "canvas": "No graph is shown." if empty else None,
            "visible": "No graph is shown." if empty else None,
            "selection": None if canvas.selected_key() is not None else
            "Select a node on the canvas first.",
            "group": None if canvas.selected_key() is not None
            and canvas.enclosing_frame(canvas.selected_key()) is not None else
            "Select a node inside an open group first.",
            "matches": None if canvas.highlighted() else "Search for nodes first (Ctrl+F).",
            "timeline": None if timeline.bars or timeline.live else
            f"The memory timeline shows no plan ({timeline.message.rstrip('.')}).",
            "size_report": None if self._report() is not None else
            "Export a bundle first (File > Export Bundle…): the size report is the bundle's.",
        }

    def picture(self, subject: str) -> Picture:
        """The picture of `subject` (a key of SUBJECTS), as the window shows it now."""
        reason = self.availability().get(subject, f"unknown picture {subject!r}")
        if reason is not None:
            raise KilnError(reason)
        title = f"{self._stem()}: {LABELS[subject].lower()}"
        canvas = self.window.canvas
        if subject == "timeline":
            timeline = self._timeline()
            if not timeline.isVisible():  # a closed dock keeps whatever size it last had
                timeline.resize(timeline.sizeHint())
            return widget_picture(timeline, title)
        if subject == "size_report":
            return _report_picture(self._report(), title)
        if subject == "visible":
            source = canvas.visible_scene_rect().intersected(canvas_region(canvas))
        else:
            source = canvas_region(canvas, self.group_keys(subject))
        return scene_picture(canvas.scene(), source, canvas.backgroundBrush().color(), title)

    def _stem(self) -> str:
        path = self.window.document.path
        return path.stem if path else "model"

    # -- dialog ----------------------------------------------------------------------------------

    def open_dialog(self) -> PictureDialog | None:
        """Show the dialog (nothing without a model); returns it."""
        if self.window.document.graph is None:
            return None
        if self.dialog is None:
            self.dialog = PictureDialog(self.window)
            self.dialog.exportRequested.connect(self.export)
            self.dialog.subject.currentIndexChanged.connect(self._suggest_path)
            self.dialog.format.currentIndexChanged.connect(self._suggest_path)
        self.dialog.set_available(self.availability())
        self.dialog.show_note("")
        self._suggest_path()
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def _suggest_path(self) -> None:
        """A file named after the model and the subject, in the last folder used."""
        dialog = self.dialog
        if dialog is None:
            return
        folder = self.folder or _pictures_folder()
        subject = dialog.subject.currentData()
        dialog.path.setText(str(folder / f"{self._stem()}_{subject}.{dialog.format.currentData()}"))

    def export(self, request: PictureRequest) -> Path | None:
        """Draw and write the picture of `request`; asks before replacing a file."""
        dialog = self.dialog
        if request.path.exists() and not self._confirm_replace(request.path):
            if dialog is not None:
                dialog.show_note("Not exported: the file was left as it was.")
            return None
        QGuiApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            picture = self.picture(request.subject)
            written = write_picture(picture, request.path, request.scale)
        except KilnError as exc:
            if dialog is not None:
                dialog.show_error(f"Not exported: {exc}")
            return None
        finally:
            QGuiApplication.restoreOverrideCursor()
        self.folder = written.parent
        size = picture.size
        if request.format == "png":
            w, h = round(size.width() * request.scale), round(size.height() * request.scale)
        else:
            w, h = round(size.width()), round(size.height())
        note = f"Wrote {written.name} ({w} × {h} px) to {written.parent}."
        if dialog is not None:
            dialog.show_note(note)
        self.window.statusBar().showMessage(note, 5000)
        return written

    def _confirm_replace(self, path: Path) -> bool:
        parent = self.dialog or self.window
        no = QMessageBox.StandardButton.No
        answer = QMessageBox.question(parent, "Replace Picture?",
                                      f"{path.name} already exists in {path.parent}. Replace it?",
                                      QMessageBox.StandardButton.Yes | no, no)
        return answer == QMessageBox.StandardButton.Yes


def _pictures_folder() -> Path:
    """The user's Pictures folder where there is one, else the home folder."""
    where = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.PicturesLocation)
    return Path(where) if where and Path(where).is_dir() else Path.home()


def _report_picture(report: dict, title: str) -> Picture:
    """The size report page of `report`, laid out off screen, tall enough for every layer."""
    widget = SizeReport()
    widget.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
    widget.set_report(report)
    widget.resize(*REPORT_SIZE)
    widget.show()
    table = widget.layers
    hidden = table.verticalHeader().length() - table.viewport().height()
    if hidden > 0:
        widget.resize(REPORT_SIZE[0], REPORT_SIZE[1] + hidden)
        widget.layout().activate()
    return widget_picture(widget, title)  # (its drawing keeps the widget alive)


def install(window) -> PictureController:
    """Add File > Export Picture… to `window`; returns the controller (`window.picture`)."""
    controller = PictureController(window)
    add_to_file_menu(window, controller.action)
    return controller


def screenshots(window, save) -> None:
    """The dialog, set to a PNG of the whole graph."""
    controller = window.picture
    dialog = controller.open_dialog()
    if dialog is None:
        return
    dialog.choose("canvas", "png", 2.0)
    save(dialog, "export_picture.png")
    dialog.close()
