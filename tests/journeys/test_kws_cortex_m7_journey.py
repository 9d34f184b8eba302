"""KWS float from the shared models, end to end on a Cortex-M7: edit, calibrate in
the window, export int8 from the dialog, build and run the firmware as its README says, equal to
the interpreter; then open a second model mid-flow and no panel keeps the first."""

from __future__ import annotations

import numpy as np

from app.export.controller import driver_options
from app.quant.calibrate_dialog import CalibrationRequest
from compiler.driver import compilation
from compiler.interpreter import run
from compiler.mcu.firmware import parse_outputs
from compiler.quant.calibration_data import Normalization
from tests.codegen import firmware as firmware_tests
from tests.codegen.firmware import readme_commands, run_as_a_user
from tests.conftest import require_tools, shared_models
from tests.gui.helpers import make_window, open_and_wait
from tests.journeys.window_steps import TIMEOUT, export
from views.export_dialog import ExportOptions


def test_kws_float_calibrated_edited_exported_for_cortex_m7_runs_then_a_second_model(
        qtbot, tmp_path):
    from tests.explore.data import _kws

    firmware_tests.require_tools()
    require_tools("make")
    shared = shared_models()
    samples = tmp_path / "kws_samples.npy"
    np.save(samples, _kws(shared, np.random.default_rng(3), 32))
    window = make_window(qtbot, shared / "onnx" / "kws_ref_model_float32.onnx")
    graph = window.document.graph
    first = next(n for n in graph.nodes if n.op == "Conv")
    assert window.editing.rename_node(first.id, "first_conv")  # an edit, one undo step
    assert window.document.undo_stack.canUndo()
    with qtbot.waitSignal(window.quant.calibrationEnded, timeout=TIMEOUT):
        window.quant.calibrate(CalibrationRequest(str(samples), "", Normalization(),
                                                  samples=32))
    assert window.document.quant.current() is not None

    folder = tmp_path / "kws m7"
    options = ExportOptions("cortex-m7", None, "net", "embedded", False, folder)
    export(qtbot, window, options, False)
    compiled = compilation(window.quant.quantized(), window.document.pipeline)
    net = compiled.net(driver_options(options))
    assert net.object == (folder / "net.o").read_bytes()
    build = readme_commands((folder / "README.md").read_text(), "Build and run")
    (image,) = net.data_inputs
    given = np.fromfile(folder / "net.input.bin", image.dtype).reshape(image.shape)
    printed = parse_outputs(net, run_as_a_user(build, folder))
    expected = run(compiled.final, {image.name: given})
    assert set(printed) == set(expected)
    for name, value in expected.items():
        assert np.array_equal(printed[name], value), name

    # A second model mid-flow: nothing of KWS stays in any panel.
    window.document.undo_stack.setClean()
    open_and_wait(qtbot, window, shared / "onnx" / "pretrainedResnet.onnx")
    assert window.document.quant.current() is None
    assert window.quant.panel.model.rows == [] and window.quant.panel.float_cost.text() == ""
    assert "first_conv" not in {n.name for n in window.document.graph.nodes}
    assert window.document.last_export is None
    window.memory.dock.show()  # it plans when shown
    qtbot.waitUntil(lambda: not window.memory.is_busy() and window.memory.current is not None,
                    timeout=TIMEOUT)
    plan = compilation(window.document.graph).plan(window.document.options())
    assert window.memory.current.doc["activations"] == plan.arena.size
