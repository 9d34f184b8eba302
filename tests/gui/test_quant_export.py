"""Export int8 from the GUI: the bytes `kiln compile --build` writes, a program that runs, and
float and int8 sizes side by side."""

from __future__ import annotations

import subprocess

import numpy as np
from PySide6.QtCore import Qt

from app import cli
from app.quant.calibrate_dialog import CalibrationRequest
from compiler.driver import compilation
from compiler.interpreter import run
from compiler.quant.calibration_data import Normalization
from tests.conftest import SAMPLE_MODEL, require_tools
from tests.gui.helpers import make_window
from views.export_dialog import ExportOptions

TIMEOUT = 120000
DIGIT = SAMPLE_MODEL.parent / "digit_2.npy"


def test_int8_export_is_kiln_compile_with_its_build_file_and_runs(qtbot, tmp_path):
    window = make_window(qtbot)
    quant = window.quant
    dialog = window.export.open_dialog()
    assert not dialog.precision.model().item(1).isEnabled()  # nothing calibrated yet
    dialog.close()
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    quant.set_range(0.0, 6.0, "relu3_out")  # a hand edit travels with the profile
    folder = tmp_path / "gui"
    dialog = window.export.open_dialog()
    assert dialog.precision.model().item(1).isEnabled()
    dialog.set_options(ExportOptions("host", None, "net", "embedded", False, folder))
    dialog.precision.setCurrentIndex(1)
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(window.export.job.succeeded, timeout=TIMEOUT):
        pass
    build = folder / "net.build.json"
    assert build.is_file() and f"--build {build}" in dialog.rebuild_line.text()
    reference = tmp_path / "cli"
    assert cli.main(["compile", str(SAMPLE_MODEL), "--build", str(build),
                     "-o", str(reference)]) == 0
    gui = {p.name: p.read_bytes() for p in folder.iterdir()}
    ref = {p.name: p.read_bytes() for p in reference.iterdir()}
    assert sorted(gui) == sorted(ref) and gui == ref  # object, header, report, build, example

    # Float and int8 side by side: int8 weights (with their int32 biases and per-channel
    # multipliers) take well under half the bytes.
    rows = {row[0]: row for row in dialog.comparison.rows}
    assert not dialog.comparison.isHidden()
    weights = rows["Weights (B)"]
    assert weights[2] < weights[1] / 2 and weights[3] == f"{weights[2] / weights[1]:.2f}"

    qdq = quant.quantized()
    image = np.load(DIGIT).astype(np.float32)
    (logits,) = run(compilation(qdq).final, {"image": image}).values()
    image.tofile(tmp_path / "digit.bin")
    require_tools("cc", "make")
    done = subprocess.run(["make", "-s", "-C", str(folder), "run",
                           f"INPUT={tmp_path / 'digit.bin'}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    values = np.array(lines[lines.index(next(x for x in lines if x.startswith("output"))) + 1]
                      .split(), np.float32)
    assert int(np.argmax(values)) == int(np.argmax(logits)) == 2
    np.testing.assert_array_equal(values, np.asarray(logits, np.float32).reshape(-1))


def test_int8_export_for_cortex_m_counts_both_under_qemu(qtbot, tmp_path):
    from compiler.mcu import firmware

    if firmware.missing_tools():
        import pytest

        pytest.skip(f"needs {firmware.missing_tools()}")
    window = make_window(qtbot)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    dialog = window.export.open_dialog()
    dialog.set_options(ExportOptions("cortex-m7", "stm32f746g-disco", "net", "embedded", False,
                                     tmp_path / "m7"))
    dialog.precision.setCurrentIndex(1)
    dialog.count.setChecked(True)
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(window.export.job.succeeded, timeout=300000):
        pass
    counts = window.export.last.counts
    assert set(counts) == {"int8", "float"} and min(counts.values()) > 10_000
    rows = {row[0]: row for row in dialog.comparison.rows}
    assert rows["Instructions (one inference)"][1:3] == [counts["float"], counts["int8"]]
    assert dialog.comparison.layer_rows  # each weighted layer, float beside int8
    assert "instructions under QEMU" in dialog.written.text()
