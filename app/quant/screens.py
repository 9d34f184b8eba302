"""The quantization workbench as a window feature: installing it, and its screenshots.

`kiln --screenshot` calibrates the bundled sample on the digits set here (on the GUI thread:
scripted runs have no event loop to wait on) and renders the panel, the overlay and the int8
export report.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.controller import QuantController
from app.quant.session import calibrate_job
from app.window.workers import Progress
from compiler.quant.recipe import quantize_with


def install(window) -> QuantController:
    """Add the Quantize menu and the Quantization dock; returns the controller."""
    return QuantController(window)


def calibrate_now(controller: QuantController, request: CalibrationRequest) -> None:
    """Calibrate on the GUI thread (scripted screenshots: no event loop to wait on)."""
    graph, path = controller.document.graph, controller.document.path
    work = calibrate_job(graph, request, path.name if path else graph.name)
    controller.take_session(work(Progress(lambda _f, _t: None)))


def screenshots(window, save) -> None:
    """The panel with the worst tensor's histogram, and the error overlay on the graph."""
    from compiler.quant.calibration_data import Normalization

    controller: QuantController = window.quant
    doc = window.document
    if doc.graph is None or doc.path is None or \
            doc.path.name != "digits_cnn.onnx":
        return  # the shots need samples: the sample model has them built in
    dialog = controller.calibrate_dialog()  # the form first, as Quantize > Calibrate... opens it
    if dialog is not None:
        save(dialog, "calibrate.png")
        dialog.reject()
        dialog.deleteLater()
    calibrate_now(controller, CalibrationRequest("digits:train", "digits:test", Normalization()))
    controller.dock.show()
    floating = controller.dock.isFloating()
    controller.dock.setFloating(True)
    controller.dock.resize(760, 820)
    worst = controller.panel.worst.item(0)
    if worst is not None:
        controller.show_tensor(worst.data(Qt.ItemDataRole.UserRole))
    save(controller.panel, "quantization_panel.png")
    controller.panel.overlay.setChecked(True)
    save(controller.panel, "quantization_panel_overlay_on.png")
    controller.panel.tabs.setCurrentIndex(1)
    save(controller.panel, "quantization_layers.png")
    controller.panel.tabs.setCurrentIndex(0)
    window.canvas.fit()
    save(window.canvas, "quantization_overlay.png")
    controller.panel.overlay.setChecked(False)
    controller.dock.setFloating(floating)
    _export_screenshot(controller, save)


def _export_screenshot(controller: QuantController, save) -> None:
    """The result page of an int8 export for the host: float and int8 side by side."""
    import tempfile

    from app.export.controller import build_request, export_job
    from compiler.driver import compilation
    from views.export_dialog import ExportDialog, ExportOptions

    document = controller.document
    recipe, source = document.quant.recipe(), document.quant.current().graph
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "int8"
        options = ExportOptions("host", None, "net", "embedded", False, folder, "int8")
        request = build_request(options, document.pipeline, source, recipe)
        exported = export_job(compilation(quantize_with(source, recipe), document.pipeline),
                              options, request, document.compilation(),
                              document.path)(Progress(lambda _f, _t: None))
        dialog = ExportDialog(controller.window)
        dialog.show_result(exported.report, exported.folder, exported.files, exported.command,
                           exported.float_report, exported.counts, exported.precision,
                           exported.rebuild, exported.fallbacks)
        dialog.resize(860, 820)
        dialog.show()
        save(dialog, "export_int8_report.png")
        dialog.close()
        dialog.deleteLater()
