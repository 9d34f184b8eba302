"""The main window's actions, menus and toolbar, in one table-like place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QAction, QColor, QIcon, QKeySequence, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QMainWindow, QMenu, QStyle, QToolBar

from app.window import settings
from app.window.help_dialogs import about_box


@dataclass
class Actions:
    """The actions whose state follows the document and the selection."""

    open: QAction
    recent: QMenu
    save: QAction
    save_as: QAction
    undo: QAction
    redo: QAction
    delete: QAction
    rename: QAction
    edit_attribute: QAction
    insert: QAction
    input_shape: QAction
    find: QAction
    fit: QAction
    zoom_in: QAction
    zoom_out: QAction
    show_constants: QAction

    def update(self, window: QMainWindow) -> None:
        """Enable what applies to the current document and selection."""
        has_graph = window.document.graph is not None
        node = window.editing.selected_node() is not None
        tensor = window.editing.selected_tensor() is not None
        for action in (self.save, self.save_as, self.find, self.fit, self.zoom_in, self.zoom_out,
                       self.input_shape):
            action.setEnabled(has_graph)
        key = window.canvas.selected_key()
        group = isinstance(key, str) and key.startswith("group:")
        self.delete.setEnabled(node or group)
        self.edit_attribute.setEnabled(node)
        self.rename.setEnabled(node or tensor)
        self.insert.setEnabled(window.canvas.selected_edge() is not None)


def menu_named(window: QMainWindow, title: str) -> QMenu | None:
    """The menu bar's menu titled `title` (with its & mnemonic), or None."""
    return next((a.menu() for a in window.menuBar().actions()
                 if a.text() == title and a.menu() is not None), None)


def menu_before_help(window: QMainWindow, title: str) -> QMenu:
    """A new menu on the menu bar, before Help (which stays last)."""
    menu = QMenu(title, window)
    bar = window.menuBar()
    existing = bar.actions()
    if existing:
        bar.insertMenu(existing[-1], menu)
    else:
        bar.addMenu(menu)
    return menu


def view_menu(window: QMainWindow) -> QMenu:
    """The View menu (features add their toggles and modes to it)."""
    return next(a.menu() for a in window.menuBar().actions()
                if a.text() == "&View" and a.menu() is not None)


def _action(window: QMainWindow, text: str, slot, shortcut=None, tip: str = "",
            icon: QStyle.StandardPixmap | None = None) -> QAction:
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    if tip:
        action.setStatusTip(tip)
        action.setToolTip(tip)
    if icon is not None:
        action.setIcon(window.style().standardIcon(icon))
    action.triggered.connect(lambda _checked=False: slot())
    return action


def build_actions(window: QMainWindow) -> Actions:
    """Create every action, the menus and the toolbar of `window`."""
    editing = window.editing
    sp = QStyle.StandardPixmap
    key = QKeySequence.StandardKey

    open_ = _action(window, "&Open…", window.open_dialog, key.Open, "Open an ONNX model",
                    sp.SP_DialogOpenButton)
    save = _action(window, "&Save", window.save, key.Save, "Save the model (atomically)",
                   sp.SP_DialogSaveButton)
    save_as = _action(window, "Save &As…", window.save_as, key.SaveAs,
                      "Save the model under another name")
    quit_ = _action(window, "&Quit", window.close, key.Quit, "Close Kiln")
    undo = window.document.undo_stack.createUndoAction(window, "&Undo")
    undo.setShortcut(QKeySequence(key.Undo))
    undo.setIcon(window.style().standardIcon(sp.SP_ArrowBack))
    redo = window.document.undo_stack.createRedoAction(window, "&Redo")
    redo.setShortcut(QKeySequence(key.Redo))
    redo.setIcon(window.style().standardIcon(sp.SP_ArrowForward))
    delete = _action(window, "&Delete Node", editing.delete_selected, key.Delete,
                     "Delete the selected node (bypassed when it has one data input)",
                     sp.SP_TrashIcon)
    rename = _action(window, "Re&name…", editing.rename_selected, "F2",
                     "Rename the selected node or tensor")
    edit_attribute = _action(window, "Edit &Attribute…", editing.edit_attribute_dialog,
                             "Ctrl+E", "Change an attribute of the selected node")
    insert = _action(window, "&Insert Operator…", editing.insert_dialog, "Ctrl+I",
                     "Insert an operator on the selected edge", sp.SP_FileDialogNewFolder)
    input_shape = _action(window, "Change Input &Shape…", editing.input_shape_dialog, None,
                          "Give a graph input another static shape")
    find = _action(window, "&Find…", window.open_search, key.Find,
                   "Find nodes by name, op type or regular expression",
                   sp.SP_FileDialogContentsView)
    # The canvas on screen: a pass stage's while one is shown.
    fit = _action(window, "&Fit to Window", lambda: window.shown_canvas().fit(), "Ctrl+0",
                  "Show the whole graph", sp.SP_TitleBarMaxButton)
    zoom_in = _action(window, "Zoom &In", lambda: window.shown_canvas().zoom_in(), key.ZoomIn,
                      "Zoom in")
    zoom_in.setIcon(_magnifier(plus=True))
    zoom_out = _action(window, "Zoom &Out", lambda: window.shown_canvas().zoom_out(),
                       key.ZoomOut, "Zoom out")
    zoom_out.setIcon(_magnifier(plus=False))
    show_constants = QAction("Show &Constants as Nodes", window)
    show_constants.setCheckable(True)
    show_constants.setChecked(window.show_constants)
    show_constants.setStatusTip("Draw weights as boxes of their own instead of inside their "
                                "consumer")
    show_constants.toggled.connect(window.set_show_constants)

    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    file_menu.addAction(open_)
    recent = file_menu.addMenu("Open &Recent")
    recent.aboutToShow.connect(lambda: _fill_recent(window, recent))
    _fill_recent(window, recent)
    file_menu.addSeparator()
    file_menu.addActions([save, save_as])
    file_menu.addSeparator()
    file_menu.addAction(quit_)

    edit_menu = bar.addMenu("&Edit")
    edit_menu.addActions([undo, redo])
    edit_menu.addSeparator()
    edit_menu.addActions([delete, rename, edit_attribute, insert, input_shape])
    edit_menu.addSeparator()
    edit_menu.addAction(find)

    view_menu = bar.addMenu("&View")
    view_menu.addActions([fit, zoom_in, zoom_out])
    view_menu.addSeparator()
    view_menu.addAction(show_constants)
    view_menu.addSeparator()
    for dock in window.docks.values():
        view_menu.addAction(dock.toggleViewAction())

    view_menu.addAction(_action(window, "&Reset Layout", window.reset_layout, None,
                                "Put every panel back where it starts"))
    help_menu = bar.addMenu("&Help")
    help_menu.addAction(_action(window, "&User Guide", window.show_guide, "F1",
                                "What every panel and command does"))
    help_menu.addAction(_action(window, "&Keyboard Shortcuts", window.show_shortcuts,
                                "Ctrl+/", "Every key, read from the menus"))
    help_menu.addAction(_action(window, "&About Kiln", lambda: about_box(window).exec()))

    toolbar = QToolBar("Main", window)
    toolbar.setObjectName("toolbar:main")
    toolbar.setMovable(False)
    toolbar.addActions([open_, save])
    toolbar.addSeparator()
    toolbar.addActions([undo, redo])
    toolbar.addSeparator()
    toolbar.addActions([delete, insert, find])
    toolbar.addSeparator()
    toolbar.addActions([fit, zoom_in, zoom_out])
    window.addToolBar(toolbar)
    view_menu.addAction(toolbar.toggleViewAction())

    return Actions(open_, recent, save, save_as, undo, redo, delete, rename, edit_attribute,
                   insert, input_shape, find, fit, zoom_in, zoom_out, show_constants)


def _fill_recent(window: QMainWindow, menu: QMenu) -> None:
    menu.clear()
    files = settings.recent_files()
    for i, path in enumerate(files):
        action = menu.addAction(f"&{i + 1} {Path(path).name}" if i < 9 else Path(path).name)
        action.setToolTip(path)
        action.setStatusTip(path)
        action.triggered.connect(lambda _checked=False, p=path: window.open_file(p))
    if files:
        menu.addSeparator()
        menu.addAction("Clear Menu").triggered.connect(
            lambda: (settings.clear_recent_files(), _fill_recent(window, menu)))
    else:
        menu.addAction("No recent files").setEnabled(False)


def _magnifier(plus: bool) -> QIcon:
    """A zoom icon drawn here: the standard icon set has none and themes vary."""
    pixmap = QPixmap(32, 32)
    pixmap.fill(QColor(0, 0, 0, 0))
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    pen = QPen(QColor("#3d4650"), 3)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    painter.setPen(pen)
    painter.setBrush(QColor("#eef3f8"))
    painter.drawEllipse(QPointF(13, 13), 9, 9)
    painter.drawLine(QPointF(20, 20), QPointF(28, 28))
    painter.drawLine(QPointF(9, 13), QPointF(17, 13))
    if plus:
        painter.drawLine(QPointF(13, 9), QPointF(13, 17))
    painter.end()
    return QIcon(pixmap)
