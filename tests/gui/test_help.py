"""Help > Keyboard Shortcuts (read from the menus), Help > About (versions), View > Reset Layout."""

from __future__ import annotations

import llvmlite.binding as llvm
from PySide6.QtCore import qVersion

from app.window.help_dialogs import about_text, shortcut_rows
from tests.gui.helpers import make_window


def _menu_action(window, menu_text: str, action_text: str):
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == menu_text)
    return next(a for a in menu.actions() if a.text() == action_text)


def test_the_shortcuts_window_lists_what_the_menus_hold(qtbot):
    window = make_window(qtbot)
    rows = shortcut_rows(window)
    keys = {(menu, action): k for menu, action, k in rows}
    assert keys[("Passes", "Run Pipeline")] == "F5"
    assert keys[("Edit", "Find…")] == "Ctrl+F"
    assert ("Canvas", "Clear the selection") in {(m, a) for m, a, _ in rows}
    # A shortcut a feature adds later shows up too: the list is read, not written down.
    _menu_action(window, "&Quantize", "&Keep Float").setShortcut("Ctrl+K")
    assert ("Quantize", "Keep Float", "Ctrl+K") in shortcut_rows(window)
    _menu_action(window, "&Help", "&Keyboard Shortcuts").trigger()
    dialog = window.shortcuts_dialog
    assert dialog.isVisible() and dialog.table.rowCount() == len(shortcut_rows(window))


def test_about_names_the_versions():
    text = about_text()
    assert f"Qt</td><td>&nbsp;{qVersion()}" in text
    assert ".".join(map(str, llvm.llvm_version_info)) in text and "Kiln" in text


def test_reset_layout_puts_the_docks_back(qtbot):
    window = make_window(qtbot)
    memory = window.memory.dock
    assert memory.isVisible()
    memory.hide()
    window.docks["minimap"].setFloating(True)
    _menu_action(window, "&View", "&Reset Layout").trigger()
    assert memory.isVisible() and not window.docks["minimap"].isFloating()


def test_the_user_guide_is_rendered(qtbot):
    window = make_window(qtbot)
    _menu_action(window, "&Help", "&User Guide").trigger()
    browser = window.guide_dialog.browser
    text = browser.toPlainText()
    assert text.startswith("Kiln User Guide") and "Sessions, autosave and recovery" in text
    assert "# " not in text  # rendered as Markdown, not shown as source
    assert browser.document().blockCount() > 60
    assert ("Help", "User Guide", "F1") in shortcut_rows(window)
