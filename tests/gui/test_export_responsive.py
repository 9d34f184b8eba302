"""Exporting, reporting and comparing a calibrated ResNet-8 never stalls the window.

The int8 model is quantized with the document's recipe in the workers, never on the GUI thread:
a 5 ms timer ticks while the user exports an int8 bundle from the Export dialog, exports the
HTML report and opens the Compare window on the int8 model. What is asserted, as in
`test_quant_responsive`, is the GUI thread's own processor time between two ticks
(`StallMeter.worst_busy_ms`): under 50 ms. The wall-clock figures are printed and recorded.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.gui.helpers import StallMeter
from tests.gui.test_quant_responsive import _report, _resnet8, _settle
from views.export_dialog import ExportOptions

TIMEOUT = 300000
STALL_MS = 50.0


def _assert_under(meter: StallMeter, what: str) -> None:
    assert meter.ticks > 1, f"the timer never ran while {what}"
    assert meter.worst_busy_ms < STALL_MS, (
        f"the GUI thread worked {meter.worst_busy_ms:.1f} ms between two ticks while {what}")


@pytest.mark.slow
def test_export_report_and_compare_of_resnet8_never_stall(qtbot, tmp_path, record_property):
    window, _, request = _resnet8(qtbot, tmp_path)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(request)
    _settle(qtbot, window)
    dialog = window.export.open_dialog()
    dialog.set_options(ExportOptions("cortex-m7", "stm32f746g-disco", "net", "embedded",
                                     False, tmp_path / "bundle"))
    dialog.precision.setCurrentIndex(1)
    qtbot.wait(200)  # the dialog's first paint, before the measured click
    exporting = StallMeter()
    with exporting:
        qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
        with qtbot.waitSignal(window.export.job.succeeded, timeout=TIMEOUT):
            pass
    assert (tmp_path / "bundle" / "net.build.json").is_file()
    dialog.close()
    _settle(qtbot, window)

    reporting = StallMeter()
    with reporting:
        job = window.report.export(tmp_path / "resnet.html")
        with qtbot.waitSignal(job.succeeded, timeout=TIMEOUT):
            pass
    assert "Quantization" in (tmp_path / "resnet.html").read_text()
    _settle(qtbot, window)

    comparing = StallMeter()
    with comparing, qtbot.waitSignal(window.compare.shown, timeout=TIMEOUT):
        window.compare.int8_action.trigger()
    for name, meter in (("export", exporting), ("report", reporting), ("compare", comparing)):
        _report(record_property, f"worst_stall_{name}", meter)
    _assert_under(exporting, "an int8 bundle was exported")
    _assert_under(reporting, "the report was exported")
    _assert_under(comparing, "the int8 model was compared")
