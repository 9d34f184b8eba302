"""Tools > Validate on Device…: QEMU Cortex-M7 on the sample, by mouse; Cancel and close stop
QEMU; a silent port is one sentence; the dialog fits 800x600."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication

from app.device import results
from app.window import workers
from tests.codegen import firmware as test_firmware
from tests.gui.helpers import make_window
from tests.gui.screen_check import outside


def _qemu_children() -> list[int]:
    """PIDs of qemu-system-arm processes this test process started (others' are not ours)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if name.startswith("qemu-system-arm") and ppid == os.getpid():
            found.append(int(entry.name))
    return found


def _click(qtbot, widget) -> None:
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)


def _choose(qtbot, combo, text: str) -> None:
    """Open the combo box's list with a click (on the arrow of an editable one) and click
    the entry `text`."""
    arrow = QPoint(combo.width() - 8, combo.height() // 2) if combo.isEditable() else \
        combo.rect().center()
    qtbot.mouseClick(combo, Qt.MouseButton.LeftButton, pos=arrow)
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
    """Tools, then Validate on Device…, clicked on the menu bar and in the menu."""
    bar = window.menuBar()
    tools = next(a for a in bar.actions() if a.text() == "&Tools")
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(tools).center())
    menu = tools.menu()
    qtbot.waitUntil(menu.isVisible)
    item = next(a for a in menu.actions() if a.text() == "Validate on &Device…")
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(item).center())
    dialog = window.device.dialog
    qtbot.waitUntil(lambda: dialog is not None and dialog.isVisible())
    return dialog


def _start(qtbot, window, count: int, port: str = "QEMU (emulated board)"):
    dialog = _open_dialog(qtbot, window)
    _choose(qtbot, dialog.core, "cortex-m7 (QEMU mps2-an500)")
    if port in [dialog.port.itemText(i) for i in range(dialog.port.count())]:
        _choose(qtbot, dialog.port, port)
    else:  # a URL typed into the editable box
        editor = dialog.port.lineEdit()
        qtbot.mouseClick(editor, Qt.MouseButton.LeftButton)
        qtbot.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        qtbot.keyClicks(editor, port)
    _type_into(qtbot, dialog.count, str(count))
    assert dialog.count.value() == count
    _click(qtbot, dialog.validate)
    assert window.device.is_busy() and dialog.cancel.isVisible()
    return dialog


def _click_tab(qtbot, tabs, text: str) -> None:
    bar = tabs.tabBar()
    index = next(i for i in range(bar.count()) if bar.tabText(i) == text)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert tabs.currentIndex() == index


def _cells(table, column: int) -> list[str]:
    return [table.item(r, column).text() for r in range(table.rowCount())]


def _all_jobs_ended(qtbot) -> None:
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=60000)


def test_validating_five_inputs_on_qemu_shows_the_table_and_the_device_overlay(qtbot,
                                                                               tmp_path):
    test_firmware.require_tools()
    window = make_window(qtbot)
    window.resize(1400, 900)
    dialog = _start(qtbot, window, 5)
    qtbot.waitUntil(lambda: not window.device.is_busy(), timeout=180000)
    assert "every check passed" in dialog.status.text(), dialog.status.text()
    run = window.document.last_validation
    v = run.validation
    assert v.passed and v.count == 5 and len(v.latency_us) == 5 and v.target == "cortex-m7"
    summary = dict(zip(_cells(dialog.summary, 0), _cells(dialog.summary, 1)))
    assert summary["Checks"].startswith("passed")
    assert summary["Inputs"].startswith("5: 5 seeded random inputs")
    assert summary["Floats close"].startswith("50 of 50 ")  # ten scores per input
    assert summary["Latency"].startswith("median ") and "over 5 runs" in summary["Latency"]
    assert _cells(dialog.evaluation, 0) == ["Interpreter", "X-cross (onnxruntime)"]
    assert float(dialog.evaluation.item(0, 5).text()) > 0.9999  # cos
    _shoot(qtbot, tmp_path, window, dialog, "1400x900")
    # The per-layer table: ticks, instructions, MACs, layer; the unit is SysTick's, not cycles.
    _click_tab(qtbot, dialog.tabs, "Per layer")
    assert dialog.layers.isVisible()
    header = [dialog.layers.horizontalHeaderItem(c).text() for c in range(4)]
    assert header == ["SysTick ticks", "Instructions", "MACs", "Layer"]
    assert dialog.layers.rowCount() == len(v.layers) + 1
    ticks = [int(t.replace(",", "")) for t in _cells(dialog.layers, 0)]
    assert sum(ticks) == v.total_ticks and min(ticks[:-1]) > 0
    layers = _cells(dialog.layers, 3)
    shown_convs = {f"Conv {n.name}" for n in window.document.graph.nodes if n.op == "Conv"}
    assert shown_convs == {name for name in layers if name.startswith("Conv ")}  # canvas names
    conv = layers.index(next(n for n in layers if n.startswith("Conv ")))
    assert int(dialog.layers.item(conv, 2).text().replace(",", "")) == v.layers[conv].macs > 0
    assert int(dialog.layers.item(conv, 1).text().replace(",", "")) > ticks[conv]
    _shoot(qtbot, tmp_path, window, dialog, "1400x900_layers")

    # Show on Canvas: the Overlay menu's "Device ticks" paints the graph by the ticks.
    overlays = window.overlays
    _click(qtbot, dialog.show_on_canvas)
    qtbot.waitUntil(lambda: overlays.current is not None)
    assert overlays.key() == "device" and overlays.actions["device"].isChecked()
    assert overlays.current is run.metric and overlays.current.name == "device"
    assert overlays.current.title == "SysTick ticks on cortex-m7 (QEMU mps2-an500)"
    painted = window.canvas.overlay()
    convs = {n.id for n in window.document.graph.nodes if n.op == "Conv"}
    assert convs <= set(painted) and set(painted) == set(overlays.current.values())
    assert len({fill for fill, _ in painted.values()}) >= 3  # a gradient, not one colour
    assert "SysTick ticks on cortex-m7" in overlays.panel.status.text()
    _shoot(qtbot, tmp_path, window, dialog, "1400x900_overlay")

    # 800x600: the window and the dialog fit, nothing in the dialog is cut off.
    window.resize(800, 600)
    dialog.resize(800 - 8, 600 - 34)
    qtbot.wait(100)
    least = dialog.minimumSizeHint()
    assert least.width() <= 792 and least.height() <= 566, least
    assert outside(dialog, "dialog") == []
    assert dialog.layers.height() >= 90 and dialog.summary.height() >= 90
    _shoot(qtbot, tmp_path, window, dialog, "800x600_layers")
    _click_tab(qtbot, dialog.tabs, "Checks")
    assert outside(dialog, "dialog") == []
    _shoot(qtbot, tmp_path, window, dialog, "800x600")
    assert not _qemu_children()

    # An edit: the ticks were measured on another graph, so none are shown; undo brings them.
    conv = next(n for n in window.document.graph.nodes if n.op == "Conv")
    assert window.editing.rename_node(conv.id, "renamed")
    qtbot.waitUntil(lambda: overlays.current is None)
    assert "Validate on Device" in overlays.panel.status.text()
    assert window.device.open_dialog().summary.rowCount() == 0
    window.document.undo_stack.undo()
    qtbot.waitUntil(lambda: overlays.current is run.metric)
    assert window.device.open_dialog().summary.rowCount() == len(results.summary(v))


def _shoot(qtbot, tmp_path, window, dialog, size: str) -> None:
    """The window and the dialog as PNG, in KILN_SHOTS when set (pictures to look at)."""
    folder = Path(os.environ.get("KILN_SHOTS") or tmp_path)
    qtbot.wait(50)
    assert window.grab().save(str(folder / f"validate_window_{size}.png"))
    assert dialog.grab().save(str(folder / f"validate_dialog_{size}.png"))


def test_cancel_mid_run_stops_qemu_and_keeps_no_result(qtbot, tmp_path):
    test_firmware.require_tools()
    window = make_window(qtbot)
    dialog = _start(qtbot, window, 400)
    qtbot.waitUntil(lambda: bool(_qemu_children()) and "Input" in dialog.status.text(),
                    timeout=120000)
    _shoot(qtbot, tmp_path, window, dialog, "running")
    assert dialog.progress.isVisible() and 0 < dialog.progress.value() < 1000
    _click(qtbot, dialog.cancel)
    assert not window.device.is_busy() and dialog.validate.isEnabled()
    assert dialog.status.text().startswith("Cancelled")
    _all_jobs_ended(qtbot)
    assert _qemu_children() == []
    assert window.document.last_validation is None and dialog.summary.rowCount() == 0
    assert not dialog.show_on_canvas.isEnabled()


def test_closing_the_dialog_mid_run_stops_qemu_and_the_window_closes(qtbot):
    test_firmware.require_tools()
    window = make_window(qtbot)
    dialog = _start(qtbot, window, 400)
    qtbot.waitUntil(lambda: bool(_qemu_children()), timeout=120000)
    _click(qtbot, dialog.close_button)
    assert not dialog.isVisible() and not window.device.is_busy()
    _all_jobs_ended(qtbot)
    assert _qemu_children() == []
    assert _open_dialog(qtbot, window) is dialog and dialog.validate.isEnabled()
    # Closing the window mid-run as well: the worker is cancelled and QEMU reaped.
    _click(qtbot, dialog.validate)
    qtbot.waitUntil(lambda: bool(_qemu_children()), timeout=120000)
    window.close()
    assert not window.isVisible()
    assert _qemu_children() == []  # the window waited for its workers before it closed
    _all_jobs_ended(qtbot)


def test_samples_typed_in_are_sent_and_their_labels_give_the_accuracy(qtbot):
    test_firmware.require_tools()
    window = make_window(qtbot)
    dialog = _open_dialog(qtbot, window)
    qtbot.mouseClick(dialog.source, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(dialog.source, "digits:test")
    assert dialog.from_file.isChecked()  # typing a source chooses it
    _type_into(qtbot, dialog.count, "3")
    _click(qtbot, dialog.validate)
    qtbot.waitUntil(lambda: not window.device.is_busy(), timeout=180000)
    v = window.document.last_validation.validation
    assert v.passed and v.count == 3 and v.inputs == "3 of 450 samples of digits:test"
    assert not v.warnings  # real samples: no note about random inputs
    summary = dict(zip(_cells(dialog.summary, 0), _cells(dialog.summary, 1)))
    assert "Note" not in summary and summary["Inputs"] == "3: 3 of 450 samples of digits:test"
    accuracy = _cells(dialog.evaluation, 1)
    assert accuracy == [f"{100 * v.accuracy:.1f}%", f"{100 * v.reference_accuracy:.1f}%"]


def test_a_silent_port_is_one_sentence_in_the_dialog(qtbot):
    window = make_window(qtbot)
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"socket://127.0.0.1:{silent.getsockname()[1]}"
        dialog = _start(qtbot, window, 2, url)
        qtbot.waitUntil(lambda: not window.device.is_busy(), timeout=120000)
    text = dialog.status.text()
    assert text.startswith(url) and "'m-ready'" in text, text  # the link's own sentence
    assert "Traceback" not in text and "\n" not in text
    assert dialog.status.styleSheet() != "" and dialog.summary.rowCount() == 0
    assert window.document.last_validation is None
    assert dialog.validate.isEnabled() and not dialog.cancel.isVisible()


def test_the_ports_offer_qemu_first_and_the_serial_ports_found(qtbot, tmp_path, monkeypatch):
    from serial.tools import list_ports_common

    found = list_ports_common.ListPortInfo("/dev/ttyACM7", skip_link_detection=True)
    found.description = "STM32 STLink"
    monkeypatch.setattr("serial.tools.list_ports.comports", lambda: [found])
    window = make_window(qtbot)
    dialog = _open_dialog(qtbot, window)
    _shoot(qtbot, tmp_path, window, dialog, "opened")
    labels = [dialog.port.itemText(i) for i in range(dialog.port.count())]
    assert labels == ["QEMU (emulated board)", "/dev/ttyACM7: STM32 STLink"]
    _choose(qtbot, dialog.port, "/dev/ttyACM7: STM32 STLink")
    assert dialog.request().port == "/dev/ttyACM7"
    cores = [dialog.core.itemData(i) for i in range(dialog.core.count())]
    assert cores == ["cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55"]
    # Device ticks before any validation: a sentence saying where they come from.
    window.overlays.choose("device")
    assert window.overlays.current is None and not dialog.show_on_canvas.isEnabled()
    assert "Tools > Validate on Device" in window.overlays.panel.status.text()
