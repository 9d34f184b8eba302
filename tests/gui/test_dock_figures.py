"""The Quantization dock's figures are the exported bundle's, and its counts agree.

The wider ResNet-8 built by the tests is calibrated in the window on 72 smooth images; the
dock's output SQNR and top-1 agreement (once the integer model is measured) must equal what
the int8 host bundle exported from the Export dialog gives on the same 72 images against
onnxruntime's float model, computed here with the textbook formula. The status line's counts
must be the profile's and the table's.
"""

from __future__ import annotations

import math
import re

import numpy as np
import onnxruntime as ort
from PySide6.QtCore import Qt

from app.quant.calibrate_dialog import CalibrationRequest
from compiler.codegen.host import HostNet
from compiler.quant.calibration_data import Normalization
from tests.gui.helpers import make_window
from tests.wide_resnet import smooth_images, write_wide_resnet8
from views.export_dialog import ExportOptions
from views.quant_panel import COLUMNS, NUDGED_TIP

TIMEOUT = 240000
SAMPLES = 72


def _db(text: str) -> float:
    return float(re.match(r"(-?[\d.]+) dB", text).group(1))


def _export_int8_host(qtbot, window, folder) -> None:
    """Export the document's int8 model for the host from the Export dialog, with a click."""
    dialog = window.export.open_dialog()
    dialog.set_options(ExportOptions("host", None, "net", "embedded", False, folder))
    dialog.precision.setCurrentIndex(1)
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(window.export.job.succeeded, timeout=TIMEOUT):
        pass
    dialog.close()


def test_the_docks_sqnr_and_agreement_are_the_exported_bundles(qtbot, tmp_path):
    model = write_wide_resnet8(tmp_path)
    images = smooth_images(SAMPLES, seed=3).reshape(SAMPLES, 32, 32, 3)
    np.save(tmp_path / "photos.npy", images)
    window = make_window(qtbot, model)
    quant = window.quant
    with qtbot.waitSignal(quant.measured, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest(str(tmp_path / "photos.npy"), "", Normalization(),
                                           samples=SAMPLES))
    panel = quant.panel
    assert "integer model, 72 samples" in panel.output_sqnr.text()
    dock_db = _db(panel.output_sqnr.text())
    dock_agree = float(panel.agreement.text().split(" %")[0])

    _export_int8_host(qtbot, window, tmp_path / "bundle")

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    bundle = HostNet.from_bundle(tmp_path / "bundle")
    try:
        ref, got = [], []
        for image in images:
            feed = image[None].astype(np.float32)
            ref.append(session.run(None, {"input_1": feed})[0].reshape(-1))
            got.append(bundle.run({"input_1": feed})["Identity"].astype(np.float64).reshape(-1))
    finally:
        bundle.close()
    ref, got = np.array(ref, np.float64), np.array(got)
    bundle_db = 10 * math.log10(np.sum(ref ** 2) / np.sum((ref - got) ** 2))
    simulated = quant.session.evaluation.output_sqnr["Identity"]
    print(f"dock {dock_db:.2f} dB, bundle {bundle_db:.3f} dB, float simulation {simulated:.2f} dB")
    assert abs(dock_db - bundle_db) < 0.1, (dock_db, bundle_db)
    agree = 100 * np.mean(ref.argmax(1) == got.argmax(1))
    assert abs(dock_agree - agree) < 0.05, (dock_agree, agree)

    # One screen, one count: the status line names the profile's tensors and the table's.
    profile = window.document.quant.session.profile
    status = panel.status.text()
    quantized = sum(1 for r in panel.model.rows if r.state == "")
    assert status.startswith(f"{quantized} of {len(profile.tensors)} calibrated tensors "
                             "quantized"), status
    # The table says its range is the one the int8 model uses, not the one set.
    header = panel.model.headerData
    assert COLUMNS[2].endswith("as int8")
    assert header(2, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) == NUDGED_TIP


def test_the_docks_accuracy_is_the_exported_bundles_on_the_evaluation_set(qtbot, tmp_path):
    from compiler.quant.calibration_data import load_calibration

    window = make_window(qtbot)
    quant = window.quant
    with qtbot.waitSignal(quant.measured, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    shown = quant.panel.accuracy.text()
    dock = float(shown.split(" %")[0])
    _export_int8_host(qtbot, window, tmp_path / "bundle")
    data = load_calibration("digits:test", window.document.graph)
    bundle = HostNet.from_bundle(tmp_path / "bundle")
    try:
        answers = [int(np.argmax(bundle.run(feeds)["logits"])) for feeds in
                   data.feeds(0, len(data))]
    finally:
        bundle.close()
    accuracy = 100 * np.mean(np.array(answers) == np.asarray(data.labels))
    assert f"{accuracy:.2f} %" == f"{dock:.2f} %", (shown, accuracy)
