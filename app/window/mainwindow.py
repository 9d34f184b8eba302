"""The main window: canvas, docks, menus and the open/save/close flow around one document."""

from __future__ import annotations

import weakref
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QMainWindow,
    QVBoxLayout,
    QWidget,
)

from app.document.document import Document
from app.document.editing import EditController
from app.window import settings, workers
from app.window.actions import build_actions
from app.window.dock_sizes import DockSizes
from app.window.panels import install_all
from app.window.workers import Job, Loaded, lay_out, load_model
from app.window.workspaces import Workspaces
from compiler import bulk, edit
from compiler.errors import KilnError
from compiler.frontends.load import MODEL_SUFFIXES
from compiler.ir.graph import Graph
from compiler.stats import node_macs
from views import dialogs, screen_fit, status_bar, style
from views.canvas import GraphCanvas
from views.finder import Finder
from views.group_layout import lay_out_view
from views.layout import GraphLayout
from views.minimap import MiniMap
from views.palette import OperatorPalette
from views.problems import ProblemsPanel
from views.properties import PropertiesPanel
from views.search import SearchBar

# Graphs up to this many nodes are laid out on the GUI thread after an edit (a few milliseconds);
# bigger ones go to a worker so the window never stalls.
SYNC_LAYOUT_NODES = 400

MODEL_FILTER = ("Models (*.onnx *.tflite);;ONNX models (*.onnx);;TFLite models (*.tflite);;"
                "All files (*)")
SAVE_FILTER = "ONNX models (*.onnx)"


def dropped_models(mime) -> list[Path]:
    """Local .onnx and .tflite files among the URLs of a drag (in the order given)."""
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls()
            if url.isLocalFile() and url.toLocalFile().lower().endswith(MODEL_SUFFIXES)]


class MainWindow(QMainWindow):
    """Kiln's window. All graph changes go through `document`; the views follow its signals.

    Signals:
        modelLoaded(path): a model was opened and is on the canvas.
        loadFailed(message): opening a model failed (the error dialog has been shown).
        layoutReady(): the canvas shows the current graph (after a load, edit, undo or toggle).
    """

    modelLoaded = Signal(str)
    loadFailed = Signal(str)
    layoutReady = Signal()

    def __init__(self, parent: QWidget | None = None, *, remember: bool = True):
        """Create the window; with `remember` False (scripted runs) settings are left alone."""
        super().__init__(parent)
        workers.share_the_interpreter()  # workers run numpy while the user drags and types
        self.setObjectName("KilnMainWindow")
        self.remember = remember
        self.dock_sizes = DockSizes(self)  # before any dock is sized
        screen_fit.install()  # every window inside its screen when shown or resized
        self.resize(1400, 900)  # first: the docks' sizes below are asked for at this size
        self.document = Document(self)
        self.layout_: GraphLayout | None = None
        self.show_constants = False
        self._load_job: Job | None = None
        self._layout_job: Job | None = None
        # Layouts already computed, per graph and constants toggle: undo and redo bring back a
        # graph object seen before, and its layout with it, without laying it out again.
        self._layouts: weakref.WeakKeyDictionary[Graph, dict[bool, GraphLayout]] = \
            weakref.WeakKeyDictionary()
        self._macs: tuple[Graph, dict[int, int | None]] | None = None
        self._new_model = False  # the next graph shown is another model's: a fresh view

        self.canvas = GraphCanvas()
        self.search_bar = SearchBar()
        self.search_bar.hide()
        central = QWidget()
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.search_bar)
        column.addWidget(self.canvas, 1)
        self.setCentralWidget(central)

        self.properties = PropertiesPanel()
        self.problems_panel = ProblemsPanel()
        self.minimap = MiniMap(self.canvas)
        self.finder = Finder(self)  # search and the canvas on screen
        self.palette = OperatorPalette()
        self.palette.set_operators(edit.insertable_ops(), {
            c: style.header_color(c) for c in style.CATEGORY_COLORS})
        self.docks = {
            "properties": self._dock("Properties", self.properties,
                                     Qt.DockWidgetArea.RightDockWidgetArea),
            "minimap": self._dock("Minimap", self.minimap, Qt.DockWidgetArea.RightDockWidgetArea),
            "palette": self._dock("Operator Palette", self.palette,
                                  Qt.DockWidgetArea.LeftDockWidgetArea),
            "problems": self._dock("Problems", self.problems_panel,
                                   Qt.DockWidgetArea.BottomDockWidgetArea),
        }
        self.resizeDocks([self.docks["properties"], self.docks["minimap"]], [520, 200],
                         Qt.Orientation.Vertical)
        self.resizeDocks([self.docks["properties"], self.docks["palette"]], [340, 190],
                         Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["problems"]], [110], Qt.Orientation.Vertical)
        # The right column runs down to the status bar: its panels (properties, quantization)
        # are tall lists and histograms, the bottom ones wide timelines and listings.
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        # The problems panel appears when there is a problem (or from the View menu).
        self.docks["problems"].hide()

        self.editing = EditController(self)
        self.actions_ = build_actions(self)
        install_all(self)  # pass stepping, memory timeline, code views, export
        status_bar.build(self)
        self._connect()
        self.setAcceptDrops(True)
        self.canvas.viewport().installEventFilter(self)
        for dock in self.findChildren(QDockWidget):
            self.dock_sizes.watch(dock)
        self.workspaces = Workspaces(self)  # a layout per task (View > Reset Layout: its first)
        if remember:
            self._restore_settings()
        self._update_title()
        self._update_actions()

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock:{title}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def resizeDocks(self, docks, sizes, orientation) -> None:  # noqa: D102 (Qt method)
        super().resizeDocks(docks, sizes, orientation)
        self.dock_sizes.record_soon()  # a panel asked for room: kept when the window resizes

    def restoreState(self, state, version: int = 0) -> bool:  # noqa: D102 (Qt method)
        restored = super().restoreState(state, version)
        self.dock_sizes.record_soon()
        return restored

    def add_panel_dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea,
                       scrolled: bool = False) -> QDockWidget:
        """A feature panel's dock, with its toggle beside the other docks' in the View menu.

        `scrolled` puts the panel in a frameless scroll area: a small window scrolls it rather
        than growing.
        """
        if scrolled:
            from PySide6.QtWidgets import QScrollArea

            scroll = QScrollArea()
            scroll.setWidget(widget)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QScrollArea.Shape.NoFrame)
            widget = scroll
        dock = self._dock(title, widget, area)
        for action in self.menuBar().actions():
            if action.text() == "&View" and action.menu() is not None:
                actions = action.menu().actions()  # the toolbar's toggle stays last
                action.menu().insertAction(actions[-1] if actions else None,
                                           dock.toggleViewAction())
        return dock

    def _connect(self) -> None:
        doc = self.document
        doc.modelOpened.connect(self._model_opened)
        doc.graphChanged.connect(self._graph_changed)
        doc.problemsChanged.connect(self._problems_changed)
        doc.dirtyChanged.connect(lambda _dirty: self._update_title())
        doc.pathChanged.connect(self._update_title)
        self.canvas.nodeSelected.connect(self._node_selected)
        self.canvas.nodeSelected.connect(doc.select)
        self.canvas.edgeSelected.connect(self._edge_selected)
        self.canvas.nodeActivated.connect(self._node_activated)
        self.canvas.viewportChanged.connect(self.update_zoom)
        self.problems_panel.nodeActivated.connect(self.select_and_center)
        self.properties.navigateRequested.connect(lambda key: self.finder.select(key))
        self.properties.attributeEditRequested.connect(self.editing.set_attribute_text)
        self.properties.renameNodeRequested.connect(self.editing.rename_node)
        self.properties.renameTensorRequested.connect(self.editing.rename_tensor)
        self.properties.exportRequested.connect(self.editing.export_constant)
        self.palette.insertRequested.connect(lambda op: self.editing.insert_on_edge(op))

    # -- opening ------------------------------------------------------------------------------

    def open_dialog(self) -> None:
        """File > Open…."""
        start = str(self.document.path.parent) if self.document.path else ""
        path, _ = QFileDialog.getOpenFileName(self, "Open Model", start, MODEL_FILTER)
        if path:
            self.open_file(path)

    def open_file(self, path: str | Path) -> Job | None:
        """Open a model in the background, after asking about unsaved edits; returns the job.

        The window stays usable while the model loads; the status bar shows progress and a
        Cancel button. None when the user kept the current model.
        """
        if not self.maybe_save():
            return None
        self.cancel_loading()
        path = Path(path)
        job = Job(load_model(path, self.show_constants), f"Loading {path.name}", self)
        job.progress.connect(self._load_progress)
        job.succeeded.connect(self._load_succeeded)
        job.failed.connect(lambda message: self._load_failed(path, message))
        job.cancelled.connect(self._load_ended)
        self._load_job = job
        self.progress.setValue(0)
        self.progress.show()
        self.cancel_button.show()
        self.statusBar().showMessage(f"Opening {path}…")
        job.start()
        return job

    def cancel_loading(self) -> None:
        """Stop the model being loaded (the current model stays)."""
        if self._load_job is not None and self._load_job.is_active():
            self._load_job.cancel()
            self.statusBar().showMessage("Loading cancelled", 4000)

    def is_loading(self) -> bool:
        """True while a model is being read or laid out."""
        return self._load_job is not None and self._load_job.is_active()

    def _load_progress(self, fraction: float, text: str) -> None:
        self.progress.setValue(int(fraction * 1000))
        if text:
            self.statusBar().showMessage(text + "…")

    def _load_ended(self) -> None:
        self.progress.hide()
        self.cancel_button.hide()

    def _load_succeeded(self, loaded: Loaded) -> None:
        self._load_ended()
        self._remember_layout(loaded.graph, self.show_constants, loaded.layout)
        self.canvas.select(None)
        self.document.load(loaded.graph, loaded.path)
        bulk.settle()  # the previous model is freed, the new one kept out of later passes
        if self.remember:
            settings.add_recent_file(loaded.path)
        self.statusBar().showMessage(f"Opened {loaded.path.name} in {loaded.seconds:.2f} s", 6000)
        self.update_zoom()
        self.modelLoaded.emit(str(loaded.path))

    def _load_failed(self, path: Path, message: str) -> None:
        self._load_ended()
        self.statusBar().showMessage(f"Could not open {path.name}", 6000)
        dialogs.show_error(self, "Cannot open model", message)
        self.loadFailed.emit(message)

    # -- drag and drop ------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: D102 (Qt override)
        if dropped_models(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: D102 (Qt override)
        self.dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: D102 (Qt override)
        models = dropped_models(event.mimeData())
        if not models:
            event.ignore()
            return
        event.acceptProposedAction()
        # Opening may ask about unsaved edits: not from inside the drop handler.
        QTimer.singleShot(0, lambda: self.open_file(models[0]))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: D102 (Qt override)
        # The canvas viewport sees drags first; models dropped on it open like on the window.
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove) and \
                dropped_models(event.mimeData()):
            event.acceptProposedAction()
            return True
        if kind == QEvent.Type.Drop and dropped_models(event.mimeData()):
            self.dropEvent(event)
            return True
        return super().eventFilter(watched, event)

    # -- saving and closing -------------------------------------------------------------------

    def save(self) -> bool:
        """File > Save: to the model's file (Save As when it has none). False when not saved."""
        if self.document.path is None or self.document.path.suffix.lower() != ".onnx":
            return self.save_as()  # a .tflite is never overwritten with ONNX
        return self._save_to(self.document.path)

    def save_as(self, path: str | Path | None = None) -> bool:
        """File > Save As…; with `path` no dialog is shown. False when not saved."""
        if path is None:
            start = str(self.document.path.with_suffix(".onnx")) if self.document.path \
                else "model.onnx"
            chosen, _ = QFileDialog.getSaveFileName(self, "Save Model As (Kiln writes ONNX)",
                                                    start, SAVE_FILTER)
            if not chosen:
                return False
            path = chosen
        path = Path(path)
        if path.suffix.lower() in ("", ".tflite"):
            path = path.with_suffix(".onnx")  # never ONNX bytes under a .tflite name
        elif path.suffix.lower() != ".onnx":
            path = path.with_name(path.name + ".onnx")
        return self._save_to(path)

    def _save_to(self, path: Path) -> bool:
        try:
            target = self.document.save(path)
        except KilnError as exc:
            dialogs.show_error(self, "Cannot save model", str(exc))
            return False
        if self.remember:
            settings.add_recent_file(target)
        self.statusBar().showMessage(f"Saved {target}", 6000)
        return True

    def maybe_save(self) -> bool:
        """Ask about unsaved changes; True to go on (ranges alone are saved as a session)."""
        if not self.document.is_dirty():
            return True
        name = self.document.path.name if self.document.path else "The model"
        edited = self.document.graph_edited()  # else Save would rewrite an unedited model
        answer = dialogs.ask_save_changes(self, name, edited)
        if answer == dialogs.SAVE:
            return self.save() if edited else self.sessions.save_dialog()
        return answer == dialogs.DISCARD

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: D102 (Qt override)
        if not self.maybe_save():
            event.ignore()
            return
        if self.remember:
            self._save_settings()
        recovery = getattr(self, "recovery", None)
        if recovery is not None:
            recovery.remove()  # a normal close: nothing to recover
        # A model still loading is dropped; its thread must end before the window does.
        for job in (self._load_job, self._layout_job):
            if job is not None:
                job.cancel()
        workers.shutdown()
        event.accept()

    # -- settings -----------------------------------------------------------------------------

    def reset_layout(self) -> None:
        """View > Reset Layout: the workspace's docks where a first start puts them."""
        self.workspaces.reset()

    def show_guide(self) -> None:
        """Help > User Guide."""
        from app.window.help_dialogs import GuideDialog

        self.guide_dialog = GuideDialog(self)
        self.guide_dialog.show()

    def show_shortcuts(self) -> None:
        """Help > Keyboard Shortcuts."""
        from app.window.help_dialogs import ShortcutsDialog

        self.shortcuts_dialog = ShortcutsDialog(self)
        self.shortcuts_dialog.show()

    def _restore_settings(self) -> None:
        store = settings.settings()
        geometry = store.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        self.workspaces.restore(*settings.workspace_layouts())  # none at first: as it is
        self.show_constants = store.value("view/showConstants", False, type=bool)
        self.actions_.show_constants.setChecked(self.show_constants)

    def _save_settings(self) -> None:
        store = settings.settings()
        store.setValue("window/geometry", self.saveGeometry())
        settings.remember_workspace_layouts(*self.workspaces.saved())
        store.setValue("view/showConstants", self.show_constants)
        store.sync()

    # -- the graph on screen ------------------------------------------------------------------

    def _graph_changed(self) -> None:
        graph = self.document.graph
        self._update_stats()
        self._update_actions()
        if graph is None:
            return
        self._lay_out_and_show(graph)

    def _model_opened(self) -> None:
        """Another model: it opens at its own opening view, with no search highlight on it."""
        self._new_model = True
        if self.search_bar.isVisible():
            self.search_bar.close_bar()

    def _remember_layout(self, graph: Graph, show_constants: bool, layout: GraphLayout) -> None:
        self._layouts.setdefault(graph, {})[show_constants] = layout

    def expanded_groups(self) -> frozenset[str] | None:
        """The groups open on the canvas (None when the shown layout has no groups)."""
        layout = self.layout_
        return layout.expanded if layout is not None and layout.grouping is not None else None

    def _lay_out_and_show(self, graph: Graph) -> None:
        known = self._layouts.get(graph, {}).get(self.show_constants)
        if known is not None:
            self._show(graph, known)
        elif len(graph.nodes) <= SYNC_LAYOUT_NODES:
            layout = lay_out_view(graph, show_constants=self.show_constants,
                                  expanded=self.expanded_groups())
            self._remember_layout(graph, self.show_constants, layout)
            self._show(graph, layout)
        else:
            self._relayout_in_background(graph)

    def show_layout(self, layout: GraphLayout) -> None:
        """Show another layout of the current graph (groups opened or closed)."""
        graph = self.document.graph
        if graph is None:
            return
        self._remember_layout(graph, self.show_constants, layout)
        self._show(graph, layout)

    def _relayout_in_background(self, graph: Graph) -> None:
        if self._layout_job is not None:
            self._layout_job.cancel()
        show_constants = self.show_constants
        job = Job(lay_out(graph, show_constants, self.expanded_groups()), "Laying out", self)
        job.succeeded.connect(lambda layout: self._laid_out(graph, show_constants, layout))
        job.failed.connect(lambda message: dialogs.show_error(self, "Cannot lay out", message))
        self._layout_job = job
        self.statusBar().showMessage("Laying out…")
        job.start()

    def _laid_out(self, graph: Graph, show_constants: bool, layout: GraphLayout) -> None:
        self._remember_layout(graph, show_constants, layout)
        if graph is self.document.graph and show_constants == self.show_constants:
            self._show(graph, layout)

    def _show(self, graph: Graph, layout: GraphLayout) -> None:
        """Put `graph` on the canvas, keeping the selection and search where they still apply."""
        self.layout_ = layout
        self.canvas.set_graph(graph, layout, new_model=self._new_model)
        self._new_model = False
        self.canvas.set_problems(self.document.problems)
        self.problems_panel.set_problems(graph, self.document.problems)
        self.finder.refresh()
        if self.canvas.selected_key() is None and self.canvas.selected_edge() is None:
            self._node_selected(None)  # the selection went with the edit
        self.statusBar().clearMessage()
        self.layoutReady.emit()

    def _problems_changed(self) -> None:
        problems = self.document.problems
        self.canvas.set_problems(problems)
        self.problems_panel.set_problems(self.document.graph, problems)
        if problems:
            self.docks["problems"].show()
        self._update_stats()

    def _update_stats(self) -> None:
        status_bar.show_stats(self)

    def _update_title(self) -> None:
        title = self.document.title() if self.document.graph is not None else "Kiln"
        self.setWindowTitle(f"{title} — Kiln" if self.document.graph is not None else title)

    def update_zoom(self) -> None:
        """The zoom readout of the canvas on screen."""
        self.zoom_label.setText(f"{self.finder.shown.zoom_level():.0%}")

    def _update_actions(self) -> None:
        if hasattr(self, "actions_"):
            self.actions_.update(self)

    def macs(self) -> dict[int, int | None]:
        """MACs per node id of the current graph (computed once per graph)."""
        graph = self.document.graph
        if self._macs is None or self._macs[0] is not graph:
            self._macs = (graph, node_macs(graph) if graph is not None else {})
        return self._macs[1]

    def set_show_constants(self, on: bool) -> None:
        """View > Show Constants as Nodes."""
        if on == self.show_constants:
            return
        self.show_constants = on
        if self.document.graph is not None:
            self._lay_out_and_show(self.document.graph)

    # -- the canvas on screen -----------------------------------------------------------------

    def shown_canvas(self) -> GraphCanvas:
        """The canvas on screen: the model's, or a pass stage's while one is shown."""
        return self.finder.shown

    def show_canvas(self, canvas: GraphCanvas) -> None:
        """`canvas` (a stage's, or the model's again) is on screen, or shows another graph.

        Search, the minimap, the zoom actions and the zoom readout then act on it.
        """
        self.finder.show_canvas(canvas)

    # -- selection ----------------------------------------------------------------------------

    def select_and_center(self, key) -> None:
        """Select a box (node id or `in:`/`out:`/`const:` key) and centre the canvas on it.

        A node inside closed groups is revealed first: its groups open.
        """
        self.grouping.reveal(key)
        if self.layout_ is None or key not in self.layout_.boxes:
            return
        self.canvas.select(key)
        self.canvas.center_on(key)

    def _node_selected(self, key) -> None:
        graph = self.document.graph
        # While a big graph is laid out again after an edit, the canvas still shows the previous
        # graph: a box there may be gone from the document's graph.
        try:
            if graph is None or key is None:
                self.properties.clear()
            elif isinstance(key, str) and key.startswith("group:"):
                self.grouping.show_properties(key)
            elif isinstance(key, int):
                problem = self.document.problems.get(key)
                # An invalid node's output types are stale, so its MACs would be too.
                macs = None if problem else self.macs().get(key)
                self.properties.show_node(graph, key, macs=macs, problem=problem)
            else:
                values = self.layout_.values if self.layout_ is not None else {}
                self.properties.show_value(graph, values.get(key, key.split(":", 1)[1]))
        except KeyError:
            self.properties.clear()
        self.palette.set_target(None)
        self._update_actions()

    def refresh_properties(self) -> None:
        """Show the selection's properties again (after a refused edit typed into the panel)."""
        edge = self.canvas.selected_edge()
        if edge is not None:
            self._edge_selected(edge)
        else:
            self._node_selected(self.canvas.selected_key())

    def _node_activated(self, _key) -> None:
        dock = self.docks["properties"]
        dock.show()
        dock.raise_()

    def _edge_selected(self, name: str) -> None:
        graph = self.document.graph
        if graph is None:
            return
        try:
            self.properties.show_value(graph, name)
        except KeyError:  # an edge of the previous graph, still on the canvas
            self.properties.clear()
        target = self.editing.edge_target()
        self.palette.set_target(target[2] if target else None)
        self._update_actions()

    # -- search -------------------------------------------------------------------------------

    def open_search(self) -> None:
        """Edit > Find (Ctrl+F)."""
        self.search_bar.open()
