"""Exports are whole or nothing, and say what they compiled (issue 27).

Another bundle in the folder is replaced only after asking; options are checked before
anything is written; the dialog follows the calibration and the target; opening another model
cancels a running export out loud; the int8 result fits a 1000 px screen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QMessageBox

from app import cli
from app.export.controller import export_job
from app.quant.calibrate_dialog import CalibrationRequest
from app.window.workers import Progress
from compiler.driver import compilation
from compiler.errors import KilnError
from compiler.frontends.onnx import load_onnx
from compiler.quant.calibration_data import Normalization
from tests.conftest import ROOT, SAMPLE_MODEL, require_tools, shared_models
from tests.gui.helpers import check_pictures, make_window, open_and_wait
from views.export_dialog import ExportDialog, ExportOptions

TIMEOUT = 120000
M7_FILES = ["Makefile", "README.md", "board.ld", "main.c", "net.build.json", "net.h",
            "net.input.bin", "net.o", "net.report.json", "sections.ld", "startup.c"]
YES, NO = QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.No


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _cli_bundle(folder, *extra: str) -> dict[str, bytes]:
    assert cli.main(["compile", str(SAMPLE_MODEL), "-o", str(folder), *extra]) == 0
    return _files(folder)


def _dialog(window, options: ExportOptions) -> ExportDialog:
    dialog = window.export.open_dialog()
    dialog.set_options(options)
    return dialog


def _calibrate(qtbot, window) -> None:
    with qtbot.waitSignal(window.quant.calibrationEnded, timeout=TIMEOUT):
        window.quant.calibrate(CalibrationRequest("digits:train", "digits:test",
                                                  Normalization()))


def _export_and_wait(qtbot, window, dialog) -> list[str]:
    """Press Export and wait for the result; returns the progress texts seen."""
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    job = window.export.job
    assert job is not None and job.is_active()
    seen = []
    job.progress.connect(lambda _f, text: seen.append(text))
    with qtbot.waitSignal(job.succeeded, timeout=300000):
        pass
    return seen


# -- another bundle in the folder ------------------------------------------------------------------

def test_export_over_another_bundle_asks_first(qtbot, tmp_path, message_boxes):
    folder = tmp_path / "out"
    before = _cli_bundle(folder)  # a host bundle: main.c, Makefile, net.o ...
    window = make_window(qtbot)
    dialog = _dialog(window, ExportOptions("cortex-m7", None, "net", "embedded", False,
                                           folder))
    message_boxes.answer = NO
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    assert window.export.job is None and not dialog.is_running()
    ((kind, title, text),) = message_boxes.shown
    assert kind == "question" and title == "Replace Bundle?"
    assert f"{folder} already holds the Kiln bundle net for host" in text
    assert "net for cortex-m7" in text
    assert "left as it was" in dialog.status.text()
    assert _files(folder) == before

    message_boxes.answer = YES
    _export_and_wait(qtbot, window, dialog)
    assert sorted(_files(folder)) == M7_FILES  # the host's Makefile and main.c went with it
    assert "CC = arm-none-eabi-gcc" in (folder / "Makefile").read_text()  # the firmware's
    assert json.loads((folder / "net.report.json").read_text())["target"] == "cortex-m7"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_exporting_the_same_bundle_again_does_not_ask(qtbot, tmp_path, message_boxes):
    folder = tmp_path / "out"
    _cli_bundle(folder, "--weights", "external")
    window = make_window(qtbot)
    dialog = _dialog(window, ExportOptions("host", None, "net", "embedded", False, folder))
    _export_and_wait(qtbot, window, dialog)
    assert message_boxes.shown == []
    assert "net.weights.bin" not in _files(folder)  # one bundle: the embedded one


# -- options checked before anything is written ----------------------------------------------------

def test_qemu_box_is_disabled_for_the_host_target(qtbot):
    dialog = ExportDialog()
    qtbot.addWidget(dialog)
    dialog.target.setCurrentText("cortex-m7")
    assert dialog.count.isEnabled()
    dialog.count.setChecked(True)
    dialog.target.setCurrentText("host")
    assert not dialog.count.isEnabled() and not dialog.count.isChecked()
    assert "No QEMU board runs host" in dialog.count.toolTip()
    dialog.set_running(True)
    dialog.set_running(False)  # the end of an export enables the options it locked...
    assert not dialog.count.isEnabled()  # ...but not this one
    dialog.folder.setText("out")
    assert dialog.options().count is False


def test_counting_for_the_host_fails_before_the_previous_bundle_is_touched(tmp_path):
    folder = tmp_path / "out"
    before = _cli_bundle(folder, "--weights", "external")
    work = export_job(compilation(load_onnx(SAMPLE_MODEL)),
                      ExportOptions("host", None, "net", "embedded", False, folder, count=True))
    with pytest.raises(KilnError, match="no QEMU board runs host"):
        work(Progress(lambda _f, _t: None))
    assert _files(folder) == before


def test_a_failing_export_leaves_the_previous_bundle_byte_identical(tmp_path, monkeypatch):
    """The disk fills up while the bundle is swapped in: the old bundle stays whole."""
    folder = tmp_path / "out"
    before = _cli_bundle(folder)
    real_rename = os.rename

    def full_disk(src, dst):
        if os.path.dirname(dst) == os.path.realpath(folder) and "new-" in str(src):
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", full_disk)
    work = export_job(compilation(load_onnx(SAMPLE_MODEL)),
                      ExportOptions("cortex-m7", None, "net", "embedded", False, folder,
                                    force=True))
    with pytest.raises(KilnError, match=f"cannot write the bundle to {folder}: No space"):
        work(Progress(lambda _f, _t: None))
    assert _files(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# -- labels say what was compiled ------------------------------------------------------------------

def test_calibrating_makes_int8_available_and_chosen(qtbot):
    window = make_window(qtbot)
    dialog = window.export.open_dialog()
    assert dialog.precision.currentData() == "float"
    assert not dialog.precision.model().item(1).isEnabled()
    _calibrate(qtbot, window)  # with the dialog open
    assert dialog.precision.model().item(1).isEnabled()
    assert dialog.precision.currentData() == "int8"
    dialog.precision.setCurrentIndex(0)  # the user goes back to float...
    _calibrate(qtbot, window)
    assert dialog.precision.currentData() == "float"  # ...and a recalibration respects it


def test_int8_export_result_says_int8(qtbot, tmp_path):
    window = make_window(qtbot)
    _calibrate(qtbot, window)
    dialog = _dialog(window, ExportOptions("host", None, "net", "embedded", False,
                                           tmp_path / "int8"))
    assert dialog.precision.currentData() == "int8"  # chosen by the calibration, not by hand
    _export_and_wait(qtbot, window, dialog)
    assert window.export.last.precision == "int8"
    assert dialog.precision_label.text().startswith("Precision: int8")
    assert not dialog.comparison.isHidden()  # float beside int8


def test_float_export_result_says_float32(qtbot, tmp_path):
    window = make_window(qtbot)
    dialog = _dialog(window, ExportOptions("host", None, "net", "embedded", False,
                                           tmp_path / "float"))
    _export_and_wait(qtbot, window, dialog)
    assert dialog.precision_label.text() == "Precision: float32"


def test_int8_count_progress_says_int8(qtbot, tmp_path):
    from compiler.mcu import firmware

    if firmware.missing_tools():
        pytest.skip(f"needs {firmware.missing_tools()}")
    window = make_window(qtbot)
    _calibrate(qtbot, window)
    dialog = _dialog(window, ExportOptions("cortex-m7", None, "net", "embedded", False,
                                           tmp_path / "m7"))
    dialog.count.setChecked(True)
    seen = _export_and_wait(qtbot, window, dialog)
    assert "counting int8 instructions under QEMU" in seen
    assert seen.index("counting int8 instructions under QEMU") < seen.index("writing bundle")
    assert set(window.export.last.counts) == {"int8", "float"}
    assert "one int8 inference" in dialog.written.text()


def test_int8_result_dialog_fits_a_1000_px_screen(qtbot, tmp_path):
    window = make_window(qtbot)
    _calibrate(qtbot, window)
    dialog = _dialog(window, ExportOptions("cortex-m7", "stm32f746g-disco", "net", "embedded",
                                           False, tmp_path / "m7"))
    dialog.precision.setCurrentIndex(1)  # int8 (the calibration chose it already)
    _export_and_wait(qtbot, window, dialog)
    qtbot.wait(20)
    assert not dialog.comparison.isHidden() and dialog.pages.currentIndex() == 1
    # Title bar and desktop panels take some 80 px of a 1000 px screen.
    assert dialog.minimumSizeHint().height() <= 600
    assert dialog.sizeHint().height() <= 920
    assert dialog.height() <= min(920, dialog.screen().availableGeometry().height())
    for button in (dialog.open_button, dialog.copy_button):  # in view, not pushed off
        corner = button.mapTo(dialog, QPoint(button.width() - 1, button.height() - 1))
        assert button.isVisible() and dialog.rect().contains(corner)
    scroll = dialog.result_scroll.verticalScrollBar()
    assert scroll.maximum() > 0  # the report scrolls instead


# -- another model during an export ----------------------------------------------------------------

def test_opening_another_model_cancels_the_export_and_says_so(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_NO_CACHE", "1")  # LLVM really runs: the export is still going
    window = make_window(qtbot, None)
    open_and_wait(qtbot, window, shared_models() / "onnx" / "vww_96_float.onnx")
    folder = tmp_path / "vww"
    dialog = _dialog(window, ExportOptions("cortex-m7", None, "net", "embedded", False, folder))
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    job = window.export.job
    qtbot.waitUntil(lambda: dialog.status.text().startswith("generating code"), timeout=60000)
    with qtbot.waitSignal(job.cancelled, timeout=60000):
        open_and_wait(qtbot, window, SAMPLE_MODEL)
    assert dialog.isVisible() and window.export.dialog is dialog  # not closed without a word
    assert dialog.status.text() == ("Export cancelled because another model was opened: "
                                    "nothing was written.")
    assert not dialog.is_running() and dialog.export_button.isEnabled()
    assert "another model was opened" in window.statusBar().currentMessage()
    assert dialog.folder.text().endswith("digits_cnn_bundle")  # the new model's export
    assert job.wait(120000)
    assert not folder.exists()


# -- `make run` ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_offscreen_main_flow_runs_twice_over_its_built_bundle(tmp_path):
    """`kiln` on a machine without a display, twice, with the bundle built in between: first
    with no platform named, then with the offscreen one named; then as `make run` runs it,
    with --output. Each run says that it runs offscreen and where it wrote its pictures, only
    what it wrote, and ends with a host bundle the user can build and run. Without --output
    it writes into the user's data folder, never the current one."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["PYTHONPATH"] = str(ROOT)  # this tree's code, whatever the virtualenv points at
    code = "import sys; from app.window.gui import run_gui; sys.exit(run_gui(sys.argv[1:]))"
    here = tmp_path / "here"  # the folder `kiln` is typed in: nothing is written there
    here.mkdir()
    default = tmp_path / "data" / "kiln" / "offscreen run"
    runs = ((None, [], default), ("offscreen", [], default),
            ("offscreen", ["--output", "out"], here / "out"))

    def shown(path: Path) -> str:
        return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)
    for platform, args, base in runs:
        bundle = base / "bundle"
        run_env = env if platform is None else {**env, "QT_QPA_PLATFORM": platform}
        done = subprocess.run([sys.executable, "-c", code, *args], cwd=here, env=run_env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "This plugin does not support" not in done.stderr
        assert "No display found" in done.stdout
        assert f"{shown(base / 'screenshots')}/" in done.stdout
        check_pictures(base / "screenshots", ["main_window"])
        if platform is None:  # the screen Kiln sets up is the pictures' 1440x900
            from PySide6.QtGui import QImage

            picture = QImage(str(base / "screenshots" / "main_window.png"))
            assert picture.width() >= 1400 and picture.height() >= 860, picture.size()
        assert f"host bundle written to {shown(bundle)}/" in done.stdout
        assert sorted(p.name for p in here.iterdir()) == ([] if not args else ["out"])
        assert {p.name for p in bundle.iterdir()} >= {"net.o", "net.h", "net.report.json",
                                                      "main.c", "Makefile"}
        report = json.loads((bundle / "net.report.json").read_text())
        assert report["target"] == "host" and report["outputs"][0]["shape"] == [1, 10]
        assert not (bundle / "net_example").exists()  # a stale build never outlives its bundle
        require_tools("cc", "make")
        built = subprocess.run(["make", "-s", "-C", str(bundle), "run"], capture_output=True,
                               text=True)
        assert built.returncode == 0, built.stderr
        assert "output" in built.stdout
