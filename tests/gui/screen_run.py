"""Open each window a user meets on one screen size; write what does not fit, and pictures.

Run as `python -m tests.gui.screen_run FOLDER` under an offscreen platform with the screen
wanted (`tests.gui.screens.screen_platform`): the main window in every workspace, the export
result, Compare (then Esc), Layer Metrics, Explore and Calibrate, and in the main window
each dock shown at no less than its readable minimum. FOLDER gets a PNG of each
and `report.json`: {"problems": [...], "escape_closed_compare": bool, "screen": [w, h]}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _wait(app, done, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    return done()


def _settle(app, window) -> None:
    for _ in range(3):
        app.processEvents()
    _wait(app, lambda: not (window.dock_sizes.busy() or window.workspaces.busy()), 10)
    time.sleep(0.05)
    for _ in range(3):
        app.processEvents()


def main(folder: Path) -> int:
    from PySide6.QtCore import QSettings, Qt
    from PySide6.QtTest import QTest

    from app.window import gui

    folder.mkdir(parents=True, exist_ok=True)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                      str(folder / "settings"))
    app = gui._application()
    gui._quiet_window_system_notes()
    from app.export.controller import run_export
    from app.window.mainwindow import MainWindow
    from app.window.workspaces import MINIMUM, NAMES
    from tests.gui.screen_check import docks_on_screen, outside
    from views.export_dialog import ExportDialog, ExportOptions

    window = MainWindow(remember=False)
    window.show()
    loaded = []
    window.modelLoaded.connect(lambda _path: loaded.append(True))
    window.open_file(gui.sample_model())
    assert _wait(app, lambda: bool(loaded)), "the sample did not load"
    problems: list[str] = []

    def look(widget, name: str) -> None:
        _settle(app, window)
        problems.extend(outside(widget, name))
        if widget is window:  # every panel shown at a size it can be read at
            for dock in docks_on_screen(window):
                least = MINIMUM[dock.windowTitle()]
                if dock.width() < least.width() or dock.height() < least.height():
                    problems.append(f"{name}: {dock.windowTitle()} is {dock.width()}x"
                                    f"{dock.height()}, under {least.width()}x{least.height()}")
        widget.grab().save(str(folder / f"{name}.png"))

    for name in NAMES:
        window.workspaces.switch(name)
        _wait(app, lambda: not (window.memory.is_busy() or window.code.is_busy()), 60)
        look(window, f"main_window_{name.lower()}")
    window.workspaces.switch(NAMES[0])

    exported = run_export(window.document.graph, ExportOptions(
        "host", None, "net", "embedded", False, folder / "bundle"))
    dialog = ExportDialog(window)
    dialog.show_result(exported.report, exported.folder, exported.files, exported.command,
                       rebuild=exported.rebuild)
    dialog.show()
    look(dialog, "export_result")
    dialog.close()

    compare = window.compare
    shown = []
    compare.shown.connect(lambda: shown.append(True))
    compare.compare_final()
    assert _wait(app, lambda: bool(shown)), "Compare did not show"
    look(compare.window, "compare")
    compare.window.activateWindow()
    _wait(app, lambda: app.activeWindow() is compare.window, 5)
    QTest.keyClick(compare.view.rows, Qt.Key.Key_Escape)
    _settle(app, window)
    escaped = not compare.window.isVisible()

    window.overlays.choose("macs")
    _wait(app, lambda: not window.overlays.is_busy(), 60)
    look(window, "layer_metrics")

    window.explore.show_panel()
    look(window, "explore")

    calibrate = window.quant.calibrate_dialog()
    look(calibrate, "calibrate")
    calibrate.reject()

    screen = window.screen().availableGeometry()
    (folder / "report.json").write_text(json.dumps({
        "problems": problems, "escape_closed_compare": escaped,
        "screen": [screen.width(), screen.height()]}, indent=1))
    window.document.undo_stack.setClean()
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
