"""Help > User Guide, Help > Keyboard Shortcuts and Help > About.

The shortcuts window is built from the window's actions each time it opens, so it never lists
a key that is gone or misses one a feature added; About names the versions a bug report needs.
"""

from __future__ import annotations

import platform
from html import escape
from importlib import metadata
from pathlib import Path

from PySide6.QtCore import Qt, qVersion
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QMainWindow,
    QMenu,
    QMessageBox,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from compiler.version import kiln_version

GUIDE = Path(__file__).resolve().parents[1] / "resources" / "guide.md"
# Keys the canvas handles itself (no menu action carries them).
CANVAS_KEYS = (("Up / Down", "Walk to a producer / consumer"),
               ("Left / Right", "Walk to a sibling"),
               ("Enter", "Show the selected node's properties"),
               ("Escape", "Clear the selection"),
               ("Wheel", "Zoom (the histogram too)"),
               ("Drag", "Pan (on the background)"))


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    """Kiln's version and those of the libraries it stands on."""
    import llvmlite
    import llvmlite.binding as llvm

    return {"Kiln": kiln_version(), "Python": platform.python_version(), "Qt": qVersion(),
            "PySide6": _version("PySide6-Essentials") if _version("PySide6-Essentials")
            != "not installed" else _version("PySide6"),
            "LLVM": ".".join(map(str, llvm.llvm_version_info)),
            "llvmlite": llvmlite.__version__, "numpy": _version("numpy"),
            "onnx": _version("onnx")}


def about_text() -> str:
    """The About box: what Kiln is, and the versions."""
    rows = "".join(f"<tr><td>{escape(k)}</td><td>&nbsp;{escape(v)}</td></tr>"
                   for k, v in versions().items())
    return ("<h3>Kiln</h3><p>A workbench and ahead-of-time compiler for neural networks on "
            "microcontrollers: see a model as a graph, step through its passes, quantize it "
            "by hand and export C bundles.</p>"
            f"<table>{rows}</table><p>Help &gt; Keyboard Shortcuts lists every key.</p>")


def about_box(parent: QWidget) -> QMessageBox:
    """The About box, not yet shown (Help > About execs it; screenshots show it)."""
    box = QMessageBox(QMessageBox.Icon.NoIcon, "About Kiln", about_text(),
                      QMessageBox.StandardButton.Ok, parent)
    box.setTextFormat(Qt.TextFormat.RichText)
    return box


def shortcut_rows(window: QMainWindow) -> list[tuple[str, str, str]]:
    """(menu, action, keys) for every menu action with a shortcut, then the canvas keys."""
    rows = []
    for top in window.menuBar().actions():
        menu = top.menu()
        if menu is None:
            continue
        for action in _actions(menu):
            keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            if keys:
                rows.append((top.text().replace("&", ""), action.text().replace("&", ""),
                             keys))
    rows += [("Canvas", what, keys) for keys, what in CANVAS_KEYS]
    return rows


def _actions(menu: QMenu) -> list[QAction]:
    found = []
    for action in menu.actions():
        if action.menu() is not None:
            found += _actions(action.menu())
        elif not action.isSeparator():
            found.append(action)
    return found


def guide_text() -> str:
    """The user guide (resources/guide.md, shipped inside the package and the standalone)."""
    return GUIDE.read_text(encoding="utf-8")


class GuideDialog(QDialog):
    """Help > User Guide: the guide rendered from Markdown, links open in the browser."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Kiln User Guide")
        self.resize(900, 760)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(True)
        self.browser.setMarkdown(guide_text())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser)
        layout.addWidget(buttons)


class ShortcutsDialog(QDialog):
    """A table of every shortcut, read from the window's menus when it opens."""

    def __init__(self, window: QMainWindow, parent: QWidget | None = None):
        super().__init__(parent or window)
        self.setWindowTitle("Keyboard Shortcuts")
        self.resize(560, 620)
        rows = shortcut_rows(window)
        self.table = QTableWidget(len(rows), 3)
        self.table.setHorizontalHeaderLabels(["Menu", "Action", "Keys"])
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
