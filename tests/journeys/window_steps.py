"""The steps of the window journeys, as a user takes them: typing, dragging, calibrating from
the Calibrate dialog, exporting from the Export dialog. Screenshots go to KILN_JOURNEY_SHOTS
when it is set (to look at them)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QDialogButtonBox

from tests.journeys.data import data_of
from views.export_dialog import ExportOptions

TIMEOUT = 300000


def shot(widget, name: str) -> None:
    """Save `widget` as NAME.png in KILN_JOURNEY_SHOTS (nothing when it is not set)."""
    folder = os.environ.get("KILN_JOURNEY_SHOTS")
    if folder:
        from PySide6.QtWidgets import QApplication

        for _ in range(3):  # layouts asked for by the last texts set, and what they ask
            QApplication.processEvents()
        Path(folder).mkdir(parents=True, exist_ok=True)
        widget.grab().save(str(Path(folder) / f"{name}.png"))


def samples_folder(model: str, folder: Path) -> Path:
    """A folder of one .npy file per calibration sample of `model`, as a user keeps them."""
    calib, _ = data_of(model)
    folder.mkdir()
    for i in range(len(calib)):
        np.save(folder / f"s{i:03d}.npy", calib.samples[i:i + 1])
    return folder


def type_into(qtbot, edit, text: str) -> None:
    """Click `edit`, select all, type `text` and leave with Tab."""
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    qtbot.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key.Key_Tab)


def calibrate(qtbot, window, folder: Path, model: str) -> None:
    """Calibrate from the Calibrate dialog on the samples in `folder` (OK clicked)."""
    quant = window.quant
    quant.dock.show()
    qtbot.mouseClick(quant.panel.calibrate_button, Qt.MouseButton.LeftButton)
    dialog = quant.dialog
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow)
    type_into(qtbot, dialog.data, str(folder))
    type_into(qtbot, dialog.evaluate, "")
    assert "float32" in dialog.expects.text()
    shot(dialog, f"{model}_calibrate_dialog")
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        qtbot.mouseClick(ok, Qt.MouseButton.LeftButton)
    assert ended.args == [True], quant.panel.status.text()


def drag(qtbot, view, start: float, end: float) -> None:
    """Drag on a histogram from x `start` to `end` at mid height, in eight moves."""
    y = int(view.plot_rect().center().y())
    qtbot.mousePress(view, Qt.MouseButton.LeftButton, pos=QPoint(int(round(start)), y))
    for x in np.linspace(start, end, 8)[1:]:
        qtbot.mouseMove(view, pos=QPoint(int(round(x)), y))
    qtbot.mouseRelease(view, Qt.MouseButton.LeftButton, pos=QPoint(int(round(end)), y))


def export(qtbot, window, options: ExportOptions, count: bool):
    """Export int8 from the Export dialog with `options`; returns the dialog, done."""
    dialog = window.export.open_dialog()
    dialog.set_options(options)
    assert dialog.precision.model().item(1).isEnabled()
    assert dialog.precision.currentIndex() == 1, "a calibration makes int8 the choice"
    dialog.count.setChecked(count)
    assert dialog.count.isEnabled() == (options.target != "host")
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(window.export.job.succeeded, timeout=TIMEOUT):
        pass
    return dialog
