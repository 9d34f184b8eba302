"""Workspaces, one per task, and windows that fit their screen.

Each test is a defect a new user met: eleven docks in one layout left the Explore scatter a
strip and ran the title bars into each other; the main window, the export result and Compare
opened past an 800x600 screen (Compare with no way to close it from the keyboard); the
memory timeline's step labels ran together ("0123456789101") in a narrow dock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QAbstractButton

from app.window.workspaces import MINIMUM, NAMES, WORKSPACES
from tests.conftest import ROOT
from tests.gui.helpers import make_window
from tests.gui.screen_check import docks_on_screen, outside, overlapping_docks, title_room
from tests.gui.screens import screen_platform
from views.timeline import Bar, MemoryTimeline

TIMEOUT = 60000


def _settled(qtbot, window) -> None:
    qtbot.wait(10)
    qtbot.waitUntil(lambda: not (window.dock_sizes.busy() or window.workspaces.busy()),
                    timeout=5000)


def _resize(qtbot, window, width: int, height: int) -> None:
    window.resize(width, height)
    qtbot.waitUntil(lambda: window.size() == QSize(width, height), timeout=5000)
    _settled(qtbot, window)


def _click_workspace(qtbot, window, name: str) -> None:
    """Press the workspace's button on the mode bar with the mouse."""
    button = window.workspaces.bar.widgetForAction(window.workspaces.actions[name])
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    _settled(qtbot, window)
    assert window.workspaces.current == name


def _titles(window) -> set[str]:
    return {d.windowTitle() for d in docks_on_screen(window)}


def _front(workspace) -> set[str]:
    """The docks a workspace shows in front at first: shown, not a tab behind another."""
    return {p.dock for p in workspace.places if p.shown and p.tab is None}


def _shot(widget, name: str, folder: Path) -> None:
    assert widget.grab().save(str(folder / name))
    if os.environ.get("KILN_SHOTS"):  # pictures to look at
        widget.grab().save(os.path.join(os.environ["KILN_SHOTS"], name))


def test_each_workspace_at_1400x900_shows_its_docks_readable(qtbot, tmp_path):
    window = make_window(qtbot)
    _resize(qtbot, window, 1400, 900)
    for workspace in WORKSPACES:
        _click_workspace(qtbot, window, workspace.name)
        shown = docks_on_screen(window)
        assert _titles(window) == _front(workspace), workspace.name
        for dock in shown:
            title = dock.windowTitle()
            least = MINIMUM[title]
            assert dock.width() >= least.width() and dock.height() >= least.height(), \
                (workspace.name, title, dock.size())
            content, hint = dock.widget(), dock.widget().minimumSizeHint()
            assert content.width() >= hint.width() and content.height() >= hint.height(), \
                (workspace.name, title, content.size(), hint)
            text, room = title_room(dock)
            assert text <= room - 4, (workspace.name, title, text, room)  # the title fits
        assert overlapping_docks(window) == [], workspace.name
        assert outside(window, workspace.name) == []
        _shot(window, f"workspace_{workspace.name.lower()}_1400x900.png", tmp_path)
    # The canvas keeps a share of every workspace: the layout is the docks' and its own.
    _click_workspace(qtbot, window, "Explore")
    explore = window.explore.dock
    assert explore.width() >= 0.3 * window.width()  # the scatter is no 240 px strip


def test_switching_by_clicks_keeps_each_workspace_layout(qtbot):
    window = make_window(qtbot)
    _resize(qtbot, window, 1400, 900)
    properties, code = window.docks["properties"], window.code.dock
    quantization = window.quant.dock
    assert window.workspaces.current == "Inspect" and code.isVisible()
    close = code.findChild(QAbstractButton, "qt_dockwidget_closebutton")
    qtbot.mouseClick(close, Qt.MouseButton.LeftButton)  # the user closes Code in Inspect
    window.resizeDocks([properties], [420], Qt.Orientation.Horizontal)  # and widens this
    _settled(qtbot, window)
    assert not code.isVisible() and abs(properties.width() - 420) <= 4
    _click_workspace(qtbot, window, "Quantize")
    assert quantization.isVisible() and not window.memory.dock.isVisible()
    window.resizeDocks([quantization], [520], Qt.Orientation.Horizontal)
    _settled(qtbot, window)
    quant_width = quantization.width()
    _click_workspace(qtbot, window, "Inspect")
    assert not code.isVisible() and abs(properties.width() - 420) <= 4
    assert window.memory.dock.isVisible() and not quantization.isVisible()
    _click_workspace(qtbot, window, "Quantize")
    assert abs(quantization.width() - quant_width) <= 4
    window.document.undo_stack.setClean()
    window.close()  # the layouts are kept for the next run

    again = make_window(qtbot, None)
    _resize(qtbot, again, 1400, 900)
    assert again.workspaces.current == "Quantize"
    assert again.workspaces.actions["Quantize"].isChecked()
    assert abs(again.quant.dock.width() - quant_width) <= 4
    _click_workspace(qtbot, again, "Inspect")
    assert not again.code.dock.isVisible() and abs(again.docks["properties"].width() - 420) <= 4


def test_a_panel_its_feature_shows_takes_the_window_to_its_workspace(qtbot):
    window = make_window(qtbot)
    _resize(qtbot, window, 1400, 900)
    overlays = window.overlays
    overlays.actions["macs"].trigger()  # Overlay > MACs
    qtbot.waitUntil(lambda: window.workspaces.current == "Deploy", timeout=5000)
    qtbot.waitUntil(lambda: not overlays.is_busy(), timeout=TIMEOUT)
    _settled(qtbot, window)
    assert "Layer Metrics" in _titles(window) and overlays.table.model().rowCount() > 0
    # A dock the user opens from the View menu joins the workspace shown instead.
    minimap = window.docks["minimap"]
    minimap.toggleViewAction().trigger()
    _settled(qtbot, window)
    assert window.workspaces.current == "Deploy" and minimap.isVisible()
    _click_workspace(qtbot, window, "Passes")
    assert not minimap.isVisible() and not overlays.dock.isVisible()
    _click_workspace(qtbot, window, "Deploy")
    assert minimap.isVisible() and overlays.dock.isVisible()


def test_the_keyboard_switches_workspaces_and_reset_brings_back_the_first_layout(qtbot):
    window = make_window(qtbot)
    _resize(qtbot, window, 1400, 900)
    window.activateWindow()
    qtbot.waitUntil(lambda: window.isActiveWindow(), timeout=5000)
    for i, name in enumerate(NAMES, start=1):
        qtbot.keyClick(window.canvas.viewport(), Qt.Key(Qt.Key.Key_0 + i),
                       Qt.KeyboardModifier.ControlModifier)
        _settled(qtbot, window)
        assert window.workspaces.current == name
    deploy = next(w for w in WORKSPACES if w.name == "Deploy")
    window.code.dock.hide()
    window.memory.dock.setFloating(True)
    window.reset_layout()
    _settled(qtbot, window)
    assert _titles(window) == _front(deploy) and not window.memory.dock.isFloating()


def _compared(qtbot, window):
    compare = window.compare
    with qtbot.waitSignal(compare.shown, timeout=TIMEOUT):
        compare.compare_final()
    compare.window.activateWindow()
    qtbot.waitUntil(lambda: compare.window.isActiveWindow(), timeout=5000)
    return compare


def test_compare_fits_beside_the_main_window_and_closes_from_the_keyboard(qtbot):
    window = make_window(qtbot)
    compare = _compared(qtbot, window)
    screen = compare.window.screen().availableGeometry()
    assert screen.contains(compare.window.frameGeometry())
    assert compare.window.width() <= 0.9 * screen.width() + 1  # the main window stays in sight
    qtbot.keyClick(compare.view.rows, Qt.Key.Key_Escape)
    assert not compare.window.isVisible()
    compare = _compared(qtbot, window)
    qtbot.keyClick(compare.view.canvas_a.viewport(), Qt.Key.Key_W,
                   Qt.KeyboardModifier.ControlModifier)
    assert not compare.window.isVisible()
    compare = _compared(qtbot, window)
    qtbot.mouseClick(compare.view.close_button, Qt.MouseButton.LeftButton)
    assert not compare.window.isVisible()


def test_a_window_made_bigger_than_its_screen_is_brought_back_inside(qtbot):
    window = make_window(qtbot, None)
    screen = window.screen().availableGeometry()
    window.resize(screen.width() + 300, screen.height() + 200)
    window.move(screen.right() - 100, screen.top() + 50)
    qtbot.waitUntil(lambda: screen.contains(window.frameGeometry()), timeout=5000)
    frame = window.frameGeometry()
    assert frame.width() <= screen.width() and frame.height() <= screen.height()


def test_the_timeline_labels_its_steps_without_running_them_together(qtbot):
    timeline = MemoryTimeline()
    qtbot.addWidget(timeline)
    steps = 60
    bars = [Bar(f"t{i}", f"n{i}", "Conv", 1024, (i % 4) * 1024, 1024, i, i + 1)
            for i in range(steps - 1)]
    timeline.set_plan(bars, [2048] * steps, 4096, 4096)
    timeline.resize(220, 200)  # a narrow dock
    font = QFont(timeline.font())
    font.setPixelSize(11)  # the size the timeline paints its axes in
    metrics = QFontMetrics(font)
    plot = timeline.plot_rect()
    assert plot.width() >= 220 - 78 - 12  # no strip: the labels went inside the plot
    labelled = timeline.axis_steps(metrics)
    assert labelled[0] == 0 and len(labelled) >= 3
    centres = [plot.left() + plot.width() * (s + 0.5) / steps for s in labelled]
    widths = [metrics.horizontalAdvance(str(s)) for s in labelled]
    for i in range(len(labelled) - 1):  # 4 px at least between one label and the next
        assert centres[i] + widths[i] / 2 + 4 <= centres[i + 1] - widths[i + 1] / 2, labelled
    timeline.resize(1200, 200)
    assert timeline.axis_steps(metrics) == list(range(0, steps, 5))  # room: 12-odd labels


@pytest.mark.parametrize("size", [(800, 600), (1400, 900)])
def test_every_window_fits_a_screen_of(tmp_path, size):
    """The main window in every workspace, the export result, Compare, Layer Metrics,
    Explore and Calibrate, on a screen of that size: every widget inside it; Esc closes
    Compare."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM=screen_platform(*size, tmp_path), PYTHONPATH=str(ROOT),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    folder = tmp_path / "shots"
    done = subprocess.run([sys.executable, "-m", "tests.gui.screen_run", str(folder)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((folder / "report.json").read_text())
    assert report["screen"] == list(size)
    assert report["problems"] == []
    assert report["escape_closed_compare"]
    pictures = {p.name for p in folder.glob("*.png")}
    assert {"export_result.png", "compare.png", "layer_metrics.png", "explore.png",
            "calibrate.png"} | {f"main_window_{n.lower()}.png" for n in NAMES} <= pictures
    if os.environ.get("KILN_SHOTS"):
        for picture in folder.glob("*.png"):
            target = Path(os.environ["KILN_SHOTS"]) / f"{size[0]}x{size[1]}_{picture.name}"
            target.write_bytes(picture.read_bytes())
