"""Tools > Tune…: `kiln tune` on the calibrated sample by mouse, Cancel keeps the log, Start
again resumes it, Show on Canvas paints the tuned overlay; a float model is one sentence."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.inspect.overlays import TUNED
from app.quant.calibrate_dialog import CalibrationRequest
from compiler.codegen.schedules import clean
from compiler.codegen.targets import get_target
from compiler.quant.calibration_data import Normalization
from compiler.tuning.log import read_log
from tests.codegen import firmware as test_firmware
from tests.gui.helpers import make_window
from tests.gui.screen_check import outside

M7 = "cortex-m7 (instructions under QEMU)"


def _click(qtbot, widget) -> None:
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)


def _choose(qtbot, combo, text: str) -> None:
    """Open the combo box's list with a click and click the entry `text`."""
    qtbot.mouseClick(combo, Qt.MouseButton.LeftButton, pos=combo.rect().center())
    view = combo.view()
    qtbot.waitUntil(view.isVisible)
    qtbot.wait(QApplication.doubleClickInterval() + 50)  # the list ignores an early release
    index = view.model().index(combo.findText(text), 0)
    view.scrollTo(index)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton,
                     pos=view.visualRect(index).center())
    qtbot.waitUntil(lambda: combo.currentText() == text)


def _type_into(qtbot, spin, text: str) -> None:
    """Click into a spin box, select its text and type `text`."""
    editor = spin.lineEdit()
    qtbot.mouseClick(editor, Qt.MouseButton.LeftButton)
    qtbot.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Tab)


def _open_dialog(qtbot, window):
    """Tools, then Tune…, clicked on the menu bar and in the menu."""
    bar = window.menuBar()
    tools = next(a for a in bar.actions() if a.text() == "&Tools")
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(tools).center())
    menu = tools.menu()
    qtbot.waitUntil(menu.isVisible)
    item = next(a for a in menu.actions() if a.text() == "&Tune…")
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(item).center())
    qtbot.waitUntil(lambda: window.tune.dialog is not None and window.tune.dialog.isVisible())
    return window.tune.dialog


def _shoot(qtbot, tmp_path, window, dialog, size: str) -> None:
    """The window and the dialog as PNG, in KILN_SHOTS when set (pictures to look at)."""
    folder = Path(os.environ.get("KILN_SHOTS") or tmp_path)
    qtbot.wait(50)
    assert window.grab().save(str(folder / f"tune_window_{size}.png"))
    assert dialog.grab().save(str(folder / f"tune_dialog_{size}.png"))


def _calibrate(qtbot, window) -> None:
    """The sample's layers are float (no schedule space): its int8 model is what is tuned."""
    with qtbot.waitSignal(window.quant.calibrationEnded, timeout=120000):
        window.quant.calibrate(CalibrationRequest("digits:train", "", Normalization(),
                                                  samples=20))


def _pairs(entries) -> list[tuple]:
    return [(e.workload, e.schedule_key()) for e in entries]


def test_tune_cancel_resume_and_show_the_tuned_overlay(qtbot, tmp_path):
    test_firmware.require_tools()
    window = make_window(qtbot)
    window.resize(1400, 900)
    _calibrate(qtbot, window)
    tune = window.tune
    dialog = _open_dialog(qtbot, window)
    _choose(qtbot, dialog.target, M7)
    _type_into(qtbot, dialog.trials, "8")
    assert dialog.trials.value() == 8
    log = tune.log_path("cortex-m7")
    assert dialog.start.text() == "Start" and not log.exists()
    assert not dialog.show_on_canvas.isEnabled() and str(log) in dialog.log.text()
    _shoot(qtbot, tmp_path, window, dialog, "opened")

    # Start, the first round's line, Cancel: the tool saves the log and stops.
    _click(qtbot, dialog.start)
    assert tune.run.is_running() and dialog.cancel.isVisible()
    assert not dialog.start.isEnabled() and not dialog.show_on_canvas.isEnabled()
    qtbot.waitUntil(lambda: dialog.status.text().startswith("trial "), timeout=120000)
    assert dialog.progress.maximum() == 8 and 0 < dialog.progress.value() < 8
    assert "instructions against" in dialog.status.text()
    _shoot(qtbot, tmp_path, window, dialog, "running")
    with qtbot.waitSignal(tune.runEnded, timeout=120000) as ended:
        _click(qtbot, dialog.cancel)
    assert ended.args == ["stopped"], dialog.status.text()
    kept = read_log(log)
    assert kept and dialog.status.text().startswith(f"Stopped: {len(kept):,} measured")
    assert dialog.start.text() == "Resume" and dialog.start.isEnabled()
    assert dialog.show_on_canvas.isEnabled() and not dialog.cancel.isVisible()
    assert window.document.last_tuning == ("cortex-m7", kept)
    _shoot(qtbot, tmp_path, window, dialog, "stopped")

    # Start again: the same log resumes, nothing measured twice, later trials numbered on.
    with qtbot.waitSignal(tune.runEnded, timeout=240000) as ended:
        _click(qtbot, dialog.start)
    assert ended.args == ["complete"], dialog.status.text()
    entries = read_log(log)
    assert entries[:len(kept)] == kept and len(entries) > len(kept)
    assert len(set(_pairs(entries))) == len(entries)
    assert min(e.trial for e in entries[len(kept):]) > max(e.trial for e in kept)
    assert dialog.status.text().startswith("Done: trial 8/8: ")
    assert window.document.last_tuning == ("cortex-m7", entries)

    # Show on Canvas: the tuned overlay, best measured against default per kernel.
    overlays = window.overlays
    _click(qtbot, dialog.show_on_canvas)
    qtbot.waitUntil(lambda: overlays.current is not None, timeout=120000)
    metric = overlays.current
    assert overlays.key() == TUNED and overlays.actions[TUNED].isChecked()
    assert metric.name == TUNED and metric.peer_title == "untuned"
    rows = [r for r in metric.rows if r.peer is not None]
    assert rows and any(r.value <= r.peer for r in rows)
    assert any(r.value < r.peer for r in rows)  # the search found a better schedule
    best, default = {}, {}
    target = get_target("cortex-m7")
    for e in entries:
        best[e.workload] = min(best.get(e.workload, e.per_layer), e.per_layer)
        if not clean(e.schedule, e.description.get("family", ""), target):
            default[e.workload] = e.per_layer
    assert {r.value for r in rows} <= set(best.values())  # each row's value is a best
    assert {r.peer for r in rows} <= set(default.values())  # and its peer a default
    graph = window.document.graph
    ids = {n.id for n in graph.nodes}
    assert all(set(r.nodes) <= ids for r in rows)  # on the float graph's nodes
    convs = {n.id for n in graph.nodes if n.op == "Conv"}
    painted = window.canvas.overlay()
    assert convs and convs <= set(painted)
    assert "Tuned instructions on cortex-m7" in overlays.panel.status.text()
    _shoot(qtbot, tmp_path, window, dialog, "1400x900_overlay")

    # 800x600: the window and the dialog fit, nothing in the dialog is cut off.
    window.resize(800, 600)
    dialog.resize(800 - 8, 600 - 34)
    qtbot.wait(100)
    least = dialog.minimumSizeHint()
    assert least.width() <= 792 and least.height() <= 566, least
    assert outside(dialog, "dialog") == []
    _shoot(qtbot, tmp_path, window, dialog, "800x600_overlay")


def test_a_float_model_is_one_sentence_saying_to_calibrate(qtbot, tmp_path):
    window = make_window(qtbot)
    tune = window.tune
    dialog = _open_dialog(qtbot, window)
    with qtbot.waitSignal(tune.runEnded, timeout=120000) as ended:
        _click(qtbot, dialog.start)
    assert ended.args == ["failed"]
    text = dialog.status.text()
    assert "no layer has a schedule space on cortex-m7" in text, text
    assert "Quantize > Calibrate" in text and "Traceback" not in text and "\n" not in text
    assert dialog.status.styleSheet() != ""
    assert dialog.start.isEnabled() and not dialog.cancel.isVisible()
    assert not dialog.show_on_canvas.isEnabled() and window.document.last_tuning is None
    _shoot(qtbot, tmp_path, window, dialog, "float")
    # The tuned overlay before any tuning: a sentence saying where it comes from.
    window.overlays.choose(TUNED)
    assert window.overlays.current is None
    assert "Tools > Tune" in window.overlays.panel.status.text()
