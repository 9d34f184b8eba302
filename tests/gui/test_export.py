"""File > Export Bundle…: the GUI writes what `kiln compile` writes, cancels cleanly, and shows
the size report with budget bars (red over budget)."""

import dataclasses
import json
import os
import subprocess

import numpy as np
import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor, QDesktopServices, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QMessageBox

from app import cli
from app.export.controller import SHORTCUT, build_command, export_job
from app.window.mainwindow import MainWindow
from app.window.workers import Cancelled, Progress
from compiler import driver
from compiler.codegen.host import HostNet
from compiler.codegen.targets import get_target
from compiler.driver import compilation
from compiler.frontends.onnx import load_onnx
from tests.conftest import SAMPLE_MODEL, require_tools, shared_models
from tests.gui.helpers import make_window, open_and_wait
from views.export_dialog import ExportOptions
from views.size_report import OK_COLOR, OVER_COLOR

STAGES = ["running passes", "planning memory", "generating code", "writing bundle"]


def _dialog(window, options: ExportOptions):
    dialog = window.export.open_dialog()
    assert dialog is not None and dialog.isVisible()
    dialog.set_options(options)
    return dialog


def _export(qtbot, window, options: ExportOptions):
    """Press Export in the dialog and wait for the result page; returns (dialog, stages seen)."""
    dialog = _dialog(window, options)
    assert dialog.options() == options
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    job = window.export.job
    assert job is not None and job.is_active() and dialog.is_running()
    seen = []
    job.progress.connect(lambda _f, text: seen.append(text))
    with qtbot.waitSignal(job.succeeded, timeout=120000):
        pass
    assert dialog.pages.currentIndex() == 1 and not dialog.is_running()
    return dialog, seen


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("options, cli_extra", [
    (dict(target="host", board=None, name="net", weights="embedded", io_in_arena=False), []),
    (dict(target="cortex-m7", board="stm32f746g-disco", name="digits", weights="external",
          io_in_arena=True),
     ["--board", "stm32f746g-disco", "--name", "digits", "--weights", "external",
      "--io-in-arena"]),
    (dict(target="cortex-m7", board=None, name="net", weights="embedded", io_in_arena=False,
          weight_layout="int8"), ["--weight-layout", "int8"]),
])
def test_export_writes_what_kiln_compile_writes(qtbot, tmp_path, options, cli_extra):
    window = make_window(qtbot)
    gui_dir, cli_dir = tmp_path / "gui", tmp_path / "cli"
    dialog, seen = _export(qtbot, window, ExportOptions(**options, folder=gui_dir))
    assert [s for s in STAGES if any(text.startswith(s) for text in seen)] == STAGES

    assert cli.main(["compile", str(SAMPLE_MODEL), "--target", options["target"], "-o",
                     str(cli_dir), *cli_extra]) == 0
    gui, ref = _files(gui_dir), _files(cli_dir)
    assert sorted(gui) == sorted(ref)
    name = options["name"]
    assert gui[f"{name}.o"] == ref[f"{name}.o"]  # byte-identical object
    assert gui == ref  # header, report, weights, main.c and Makefile too
    report = json.loads(gui[f"{name}.report.json"])
    assert report == json.loads(ref[f"{name}.report.json"])
    assert dialog.report_view.report == report
    assert dialog.report_view.layers.rowCount() == len(report["layers"])
    if options.get("weight_layout") == "int8":
        assert report["weight_layout"] == "int8"
    # The sample is float: its weights say float32 whatever the int8 layout would be.
    assert report["precision"] == "float32"
    assert "weights embedded, float32;" in dialog.report_view.summary.text() or \
        "weights external, float32;" in dialog.report_view.summary.text()
    assert "int8" not in dialog.report_view.summary.text()
    if options["weights"] == "external":
        assert f"{name}.weights.bin" in gui
    # The host's example program, or the Cortex-M bundle's firmware and its README.
    assert "main.c" in gui and "Makefile" in gui
    assert ("README.md" in gui) == (options["target"] != "host")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli", "gui"]  # no temporary leftovers


def test_gui_bundle_runs_like_kiln_run_compiled(qtbot, tmp_path):
    window = make_window(qtbot)
    folder = tmp_path / "bundle"
    dialog, _ = _export(qtbot, window, ExportOptions("host", None, "net", "embedded", False,
                                                     folder))
    graph = window.document.graph
    rng = np.random.default_rng(7)
    feeds = {v.name: rng.standard_normal(v.type.shape).astype(v.type.dtype)
             for v in graph.inputs}
    args = ["run", str(SAMPLE_MODEL), "--engine", "compiled", "-o", str(tmp_path / "out.npz")]
    for name, array in feeds.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    assert cli.main(args) == 0
    expected = dict(np.load(tmp_path / "out.npz"))

    hosted = HostNet.from_bundle(folder)
    try:
        outputs = hosted.run(feeds)
    finally:
        hosted.close()
    assert sorted(outputs) == sorted(expected)
    for name, array in expected.items():
        np.testing.assert_array_equal(outputs[name], array)

    # The copied build command links the example program, which runs.
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    command = QGuiApplication.clipboard().text()
    assert command == dialog.command == build_command(get_target("host"), "net", folder)
    require_tools("cc")
    done = subprocess.run(command, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    run = subprocess.run([str(folder / "net_example")], capture_output=True, text=True)
    assert run.returncode == 0 and "output" in run.stdout


def test_open_folder_opens_the_bundle_folder(qtbot, tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    window = make_window(qtbot)
    folder = tmp_path / "out"
    dialog, _ = _export(qtbot, window, ExportOptions("host", None, "net", "embedded", False,
                                                     folder))
    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert opened == [QUrl.fromLocalFile(str(folder))]


def _vww_window(qtbot):
    window = make_window(qtbot, None)
    open_and_wait(qtbot, window, shared_models() / "onnx" / "vww_96_float.onnx")
    return window


@pytest.mark.parametrize("existing", [False, True])
def test_cancel_leaves_the_output_folder_as_it_was(qtbot, tmp_path, existing, monkeypatch,
                                                   message_boxes):
    monkeypatch.setenv("KILN_NO_CACHE", "1")  # LLVM really runs: there is time to cancel
    window = _vww_window(qtbot)
    folder = tmp_path / "out"
    if existing:
        folder.mkdir()
        (folder / "notes.txt").write_text("mine")
        message_boxes.answer = QMessageBox.StandardButton.Yes  # write beside the user's file
    before = sorted(tmp_path.rglob("*"))
    dialog = _dialog(window, ExportOptions("cortex-m7", None, "net", "embedded", False, folder))
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    job = window.export.job
    qtbot.waitUntil(lambda: dialog.status.text().startswith("generating code"), timeout=60000)
    with qtbot.waitSignal(job.cancelled, timeout=5000):
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert job.wait(120000)  # the compile runs on to its next check, then stops
    qtbot.wait(50)
    assert not dialog.is_running() and dialog.pages.currentIndex() == 0
    assert "cancelled" in dialog.status.text()
    assert sorted(tmp_path.rglob("*")) == before
    if existing:
        assert (folder / "notes.txt").read_text() == "mine"
    else:
        assert not folder.exists()


def _bar_pixel(bar) -> QColor:
    """The colour inside the filled part of a budget bar, as painted."""
    image = bar.grab().toImage()
    x = max(2, min(image.width() - 3, int(image.width() * min(bar.fraction(), 1.0) / 2)))
    return image.pixelColor(x, 3)


def test_result_page_fits_on_stm32f746g_disco(qtbot, tmp_path):
    window = make_window(qtbot)
    dialog, _ = _export(qtbot, window, ExportOptions(
        "cortex-m7", "stm32f746g-disco", "net", "embedded", False, tmp_path / "fits"))
    view = dialog.report_view
    assert view.fits() is True
    for bar in (view.flash_bar, view.ram_bar):
        assert bar.isVisible() and not bar.is_over()
        assert bar.color() == QColor(OK_COLOR)
    dialog.resize(820, 720)
    qtbot.wait(20)
    assert _bar_pixel(view.flash_bar) == QColor(OK_COLOR)
    assert view.verdict.text() == "Fits stm32f746g-disco."
    board = view.report["board"]
    assert view.flash_bar.used == board["flash_used"] and view.ram_bar.budget == 320 * 1024
    assert dialog.grab().save(str(tmp_path / "export_result_fits.png"))
    if os.environ.get("KILN_SHOTS"):
        dialog.grab().save(os.path.join(os.environ["KILN_SHOTS"], "export_result_fits.png"))


def test_result_page_over_budget_is_red(qtbot, tmp_path):
    window = _vww_window(qtbot)
    dialog = _dialog(window, ExportOptions("host", None, "net", "embedded", False,
                                           tmp_path / "over"))
    dialog.board.setCurrentIndex(dialog.board.findData("nrf52840-dk"))
    assert dialog.target.currentText() == "cortex-m4"  # the board picks its CPU
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(window.export.job.succeeded, timeout=120000):
        pass
    view = dialog.report_view
    assert view.fits() is False
    assert view.ram_bar.is_over() and view.ram_bar.color() == QColor(OVER_COLOR)
    assert not view.flash_bar.is_over() and view.flash_bar.color() == QColor(OK_COLOR)
    dialog.resize(820, 720)
    qtbot.wait(20)
    assert _bar_pixel(view.ram_bar) == QColor(OVER_COLOR)
    assert view.verdict.text().startswith("Does not fit nrf52840-dk: RAM over budget")
    # nrf52840-dk is no QEMU board: the firmware is linked for the emulated Cortex-M4.
    assert dialog.command_line.text().endswith(" && make && qemu-system-arm -M mps2-an386 "
                                               "-nographic -monitor none -serial none "
                                               "-semihosting-config enable=on,target=native "
                                               "-kernel net.elf")
    assert (tmp_path / "over" / "net.o").is_file()  # still written, as `kiln compile` does
    assert dialog.grab().save(str(tmp_path / "export_result_over.png"))
    if os.environ.get("KILN_SHOTS"):
        dialog.grab().save(os.path.join(os.environ["KILN_SHOTS"], "export_result_over.png"))


def test_action_in_file_menu_follows_the_document(qtbot):
    window = make_window(qtbot, None)
    action = window.export.action
    assert action.shortcut() == QKeySequence(SHORTCUT)
    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    assert action in file_menu.actions()
    assert not action.isEnabled() and window.export.open_dialog() is None
    open_and_wait(qtbot, window, SAMPLE_MODEL)
    assert action.isEnabled()
    action.trigger()
    dialog = window.export.dialog
    assert dialog.isVisible()
    assert dialog.folder.text().endswith("digits_cnn_bundle")


def test_bad_options_and_failures_are_one_line_messages(qtbot, tmp_path):
    window = make_window(qtbot)
    dialog = _dialog(window, ExportOptions("host", None, "net", "embedded", False,
                                           tmp_path / "x"))
    dialog.name.setText("")
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    assert window.export.job is None and "C identifier" in dialog.error.text()
    dialog.name.setText("net")
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    dialog.folder.setText(str(blocker))
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(window.export.job.failed, timeout=60000):
        pass
    assert dialog.error.isVisible() and "not a folder" in dialog.error.text()
    assert "\n" not in dialog.error.text() and not dialog.is_running()
    assert blocker.read_text() == "not a folder"


def test_settings_are_remembered_only_when_asked(qtbot, tmp_path):
    options = ExportOptions("cortex-m7", "stm32f746g-disco", "kws", "external", True,
                            tmp_path / "remembered")
    window = make_window(qtbot)
    _export(qtbot, window, options)
    second = make_window(qtbot)
    # The folder remembered is the parent: each model gets its own subfolder there.
    expected = dataclasses.replace(options, folder=tmp_path / "digits_cnn_bundle")
    assert second.export.open_dialog().options() == expected
    assert second.document.target == "cortex-m7" and second.code.target() == "cortex-m7"

    quiet = MainWindow(remember=False)
    qtbot.addWidget(quiet, before_close_func=lambda w: w.document.undo_stack.setClean())
    open_and_wait(qtbot, quiet, SAMPLE_MODEL)
    dialog = quiet.export.open_dialog()
    assert dialog.options().target == "host"  # defaults, not the remembered ones
    other = ExportOptions("host", None, "other", "embedded", False, tmp_path / "quiet")
    _export(qtbot, quiet, other)
    third = make_window(qtbot)
    assert third.export.open_dialog().options() == expected  # the quiet window stored nothing


def test_cancel_while_writing_takes_the_new_folder_back(tmp_path, monkeypatch):
    progress = Progress(lambda _f, _t: None)
    real = driver.write_bundle

    def write_then_cancel(net, folder, board=None, **kwargs):
        paths = real(net, folder, board, **kwargs)
        assert (tmp_path / "out" / "net.o").is_file()
        progress.cancel()  # the user cancels just as the files land
        return paths

    monkeypatch.setattr(driver, "write_bundle", write_then_cancel)
    work = export_job(compilation(load_onnx(SAMPLE_MODEL)),
                      ExportOptions("host", None, "net", "embedded", False, tmp_path / "out"))
    with pytest.raises(Cancelled):
        work(progress)
    assert list(tmp_path.iterdir()) == []


def test_the_board_list_offers_the_chosen_cores_boards_only(qtbot):
    from compiler.codegen.targets import BOARDS
    from tests.gui.test_overlays import _choose_with_mouse

    window = make_window(qtbot)
    dialog = window.export.open_dialog()
    for target in ("cortex-m4", "cortex-m7", "host"):
        _choose_with_mouse(qtbot, dialog.target, target)
        expected = [name for name, board in BOARDS.items() if board.target == target]
        assert dialog.offered_boards() == expected
        qtbot.mouseClick(dialog.board, Qt.MouseButton.LeftButton)  # the list, as it drops
        view = dialog.board.view()
        qtbot.waitUntil(view.isVisible)
        shown = [dialog.board.itemData(r) for r in range(1, dialog.board.count())
                 if view.visualRect(view.model().index(r, 0)).height() > 0
                 and not view.isRowHidden(r)]
        assert shown == expected
        dialog.board.hidePopup()
    _choose_with_mouse(qtbot, dialog.target, "cortex-m7")
    _choose_with_mouse(qtbot, dialog.board, dialog.board.itemText(
        dialog.board.findData("stm32f746g-disco")))
    assert dialog.options().board == "stm32f746g-disco"
