"""Calibrating through the Calibrate dialog as a user does: type a source, read, click.

The dialog must say what the model's input expects, preview the chosen source, refuse an
empty field without closing, remember the last source and folder; a calibration that fails
must leave neither "Calibrating…" in the dock nor a progress message in the status bar; and
every labelled form of data must end with an accuracy figure in the dock.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox, QFileDialog, QLabel, QPushButton

from compiler.interpreter import run
from compiler.quant.calibration_data import load_calibration
from tests.gui.helpers import make_window
from tests.helpers import make_model
from tests.quant.labelled_data import (
    write_class_folders,
    write_labels_npy,
    write_npz,
)

TIMEOUT = 120000


def _open_dialog(qtbot, window):
    """Show the Quantization dock and click its Calibrate… button."""
    quant = window.quant
    quant.dock.show()
    qtbot.mouseClick(quant.panel.calibrate_button, Qt.MouseButton.LeftButton)
    dialog = quant.dialog
    assert dialog is not None and dialog.isVisible()
    dialog.activateWindow()  # the window system would; offscreen, keys need an active window
    qtbot.waitUntil(dialog.isActiveWindow)
    return dialog


def _type(qtbot, edit, text: str) -> None:
    """Replace a field's text from the keyboard, then leave it (Tab), as a user does."""
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    assert edit.hasFocus()
    qtbot.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key.Key_Tab)
    assert not edit.hasFocus()


def _ok(dialog) -> QPushButton:
    return dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)


def _texts(dialog) -> str:
    return "\n".join(label.text() for label in dialog.findChildren(QLabel) if label.isVisible())


def test_a_failed_calibration_resets_the_dock_and_the_status_bar(qtbot, tmp_path,
                                                                 message_boxes):
    samples = tmp_path / "samples"
    samples.mkdir()
    np.save(samples / "a.npy", np.zeros((1, 1, 8, 8), np.float32))  # the preview reads this
    np.save(samples / "b.npy", np.zeros((3, 5, 6), np.float32))  # the calibration, this too
    window = make_window(qtbot)
    quant = window.quant
    dialog = _open_dialog(qtbot, window)
    _type(qtbot, dialog.data, str(samples))
    _type(qtbot, dialog.evaluate, "")
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        qtbot.mouseClick(_ok(dialog), Qt.MouseButton.LeftButton)
    assert ended.args == [False]
    status = quant.panel.status.text()
    assert "Calibrating" not in status
    assert status.startswith("Calibration failed: b.npy: shape [3, 5, 6] fits neither")
    bar = window.statusBar().currentMessage()
    assert "Reading the samples" not in bar and "%" not in bar
    assert bar == "Calibration failed"
    assert quant.panel.calibrate_button.text() == "Calibrate…"
    [(kind, title, text)] = message_boxes.shown
    assert (kind, title) == ("critical", "Calibration failed")
    assert text.startswith("b.npy: shape [3, 5, 6]") and "\n" not in text


def test_an_empty_data_field_keeps_the_dialog_open_with_a_message(qtbot):
    window = make_window(qtbot)
    quant = window.quant
    dialog = _open_dialog(qtbot, window)
    _type(qtbot, dialog.data, "")
    qtbot.mouseClick(_ok(dialog), Qt.MouseButton.LeftButton)
    assert dialog.isVisible() and quant.calibration_job is None
    assert dialog.error.isVisible()
    assert dialog.error.text().startswith("Choose the calibration data")
    _type(qtbot, dialog.data, "digits:train")  # then it runs
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        qtbot.mouseClick(_ok(dialog), Qt.MouseButton.LeftButton)
    assert ended.args == [True] and not dialog.isVisible()


def test_samples_that_do_not_fit_keep_the_dialog_open_with_the_reason(qtbot, tmp_path):
    np.save(tmp_path / "wrong.npy", np.zeros((4, 3, 8), np.float32))
    window = make_window(qtbot)
    dialog = _open_dialog(qtbot, window)
    _type(qtbot, dialog.data, str(tmp_path / "wrong.npy"))
    assert dialog.error.isVisible() and "wrong.npy: shape [4, 3, 8] fits neither the input " \
        "[1, 1, 8, 8]" in dialog.error.text()
    qtbot.mouseClick(_ok(dialog), Qt.MouseButton.LeftButton)
    assert dialog.isVisible() and window.quant.calibration_job is None


def test_the_dialog_names_the_inputs_shape_layout_and_dtype(qtbot):
    window = make_window(qtbot)
    dialog = _open_dialog(qtbot, window)
    shown = _texts(dialog)
    assert "image: shape [1, 1, 8, 8], layout NCHW, float32" in shown
    assert "each .npy one sample [1, 8, 8] or a stack [N, 1, 8, 8]" in shown


def test_choosing_a_source_previews_its_first_sample(qtbot, tmp_path):
    write_labels_npy(tmp_path / "flat")
    np.save(tmp_path / "plain.npy", np.full((2, 1, 8, 8), 0.25, np.float32))
    window = make_window(qtbot)
    dialog = _open_dialog(qtbot, window)
    _type(qtbot, dialog.data, str(tmp_path / "flat"))
    first = np.load(tmp_path / "flat" / "first.npy")[0]
    assert dialog.preview_text.text() == (
        f"First sample: [1, 1, 8, 8] float32, min {first.min():.4g}, max {first.max():.4g}; "
        "labels: labels.npy")
    assert dialog.preview_image.isVisible()
    assert dialog.preview_image.pixmap().width() == 64  # 8x8 enlarged, sharp
    _type(qtbot, dialog.data, str(tmp_path / "plain.npy"))
    # One value everywhere: the dialog says what calibrating on it would do.
    assert dialog.preview_text.text().endswith(
        "min 0.25, max 0.25; no labels (no accuracy); warning: every value is 0.25, so ranges "
        "calibrated on it will clip real inputs")


def test_the_ok_button_stays_under_the_pointer_as_previews_and_errors_come(qtbot, tmp_path):
    write_labels_npy(tmp_path / "flat")
    window = make_window(qtbot)
    dialog = _open_dialog(qtbot, window)
    _type(qtbot, dialog.data, "")
    assert not dialog.preview_image.isVisible()
    qtbot.wait(50)
    where = _ok(dialog).mapToGlobal(_ok(dialog).rect().center())
    size = dialog.size()
    _type(qtbot, dialog.data, str(tmp_path / "flat"))
    assert dialog.preview_image.isVisible()
    qtbot.wait(50)
    assert _ok(dialog).mapToGlobal(_ok(dialog).rect().center()) == where
    _type(qtbot, dialog.data, str(tmp_path / "missing.npy"))
    assert dialog.error.isVisible() and dialog.error.text()
    qtbot.wait(50)
    assert _ok(dialog).mapToGlobal(_ok(dialog).rect().center()) == where
    assert dialog.size() == size


def test_the_last_source_and_folder_are_remembered(qtbot, tmp_path, monkeypatch):
    write_npz(tmp_path / "d.npz")
    window = make_window(qtbot)
    quant = window.quant
    dialog = _open_dialog(qtbot, window)
    picked = []

    def pick(parent, caption, folder, *args, **kwargs):
        picked.append(folder)
        return str(tmp_path / "d.npz"), "Samples (*.npy *.npz)"

    monkeypatch.setattr(QFileDialog, "getOpenFileName", pick)
    _type(qtbot, dialog.data, "")
    file_button = next(b for b in dialog.findChildren(QPushButton) if b.text() == "File…")
    qtbot.mouseClick(file_button, Qt.MouseButton.LeftButton)  # the first File… is the data's
    assert dialog.data.text() == str(tmp_path / "d.npz")
    _type(qtbot, dialog.evaluate, "")
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        qtbot.mouseClick(_ok(dialog), Qt.MouseButton.LeftButton)
    again = _open_dialog(qtbot, window)
    assert again is not dialog
    assert again.data.text() == str(tmp_path / "d.npz") and again.evaluate.text() == ""
    _type(qtbot, again.data, "")  # no file named: the picker opens in the last folder
    file_button = next(b for b in again.findChildren(QPushButton) if b.text() == "File…")
    qtbot.mouseClick(file_button, Qt.MouseButton.LeftButton)
    assert picked[-1] == str(tmp_path)


@pytest.mark.parametrize("form", ["digits", "classes", "npz", "labels"])
def test_each_labelled_source_shows_an_accuracy_in_the_dock(qtbot, tmp_path, form):
    writers = {"classes": write_class_folders, "npz": write_npz, "labels": write_labels_npy}
    source = {"digits": "digits:test", "classes": tmp_path / "classes",
              "npz": tmp_path / "d.npz", "labels": tmp_path / "flat"}[form]
    if form in writers:
        writers[form](source)
    window = make_window(qtbot)
    quant = window.quant
    dialog = _open_dialog(qtbot, window)
    _type(qtbot, dialog.data, str(source))
    _type(qtbot, dialog.evaluate, "")  # no held-out set: the samples' own labels
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT) as ended:
        qtbot.mouseClick(_ok(dialog), Qt.MouseButton.LeftButton)
    assert ended.args == [True]
    assert quant.panel.accuracy.text() != "no labels"
    graph = window.document.graph
    data = load_calibration(source, graph)
    right = sum(int(np.argmax(run(graph, feeds)["logits"]) == label)
                for feeds, label in zip(data.feeds(0, len(data)), data.labels))
    accuracy = quant.panel.accuracy.text()
    assert accuracy.endswith(f"(float {100 * right / len(data):.2f} %)"), accuracy
    assert right / len(data) > 0.9
    assert "; labels: " in dialog.preview_text.text()  # the preview said so beforehand


def test_a_model_with_two_inputs_gets_the_reason_not_a_form_that_fails(qtbot, tmp_path):
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                       [("a", np.float32, [1, 4]), ("b", np.float32, [1, 4])],
                       [("y", np.float32, None)])
    onnx.save(model, tmp_path / "two.onnx")
    window = make_window(qtbot, tmp_path / "two.onnx")
    dialog = _open_dialog(qtbot, window)
    assert dialog.error.isVisible()
    assert dialog.error.text() == "calibration data feeds one input; the model has 2"
    _type(qtbot, dialog.data, "digits:train")
    qtbot.mouseClick(_ok(dialog), Qt.MouseButton.LeftButton)
    assert dialog.isVisible() and window.quant.calibration_job is None
