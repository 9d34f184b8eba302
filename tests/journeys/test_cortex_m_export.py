"""A new user's Cortex-M export: from the Export dialog to firmware running under QEMU.

Calibrate the digits sample, export int8 for Cortex-M7 from the dialog with no board chosen,
then do what the folder's README says, command by command as it gives them: the firmware
prints the interpreter's outputs on the input the folder holds, and on the user's own input
(the sample digit) built in the way the README gives.
"""

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
from tests.conftest import SAMPLE_MODEL, require_tools
from tests.gui.helpers import make_window
from tests.journeys.window_steps import TIMEOUT, export, shot
from views.export_dialog import ExportOptions

DIGIT = SAMPLE_MODEL.parent / "digit_2.npy"


def test_a_cortex_m7_int8_export_builds_and_runs_as_its_readme_says(qtbot, tmp_path):
    firmware_tests.require_tools()
    require_tools("make")
    window = make_window(qtbot)
    with qtbot.waitSignal(window.quant.calibrationEnded, timeout=TIMEOUT):
        window.quant.calibrate(CalibrationRequest("digits:train", "digits:test",
                                                  Normalization()))
    folder = tmp_path / "digits m7"  # a space, as in "Kiln bundles"
    options = ExportOptions("cortex-m7", None, "net", "embedded", False, folder)
    dialog = export(qtbot, window, options, False)
    shot(dialog, "cortex_m7_export_result")
    names = {p.name for p in folder.iterdir()}
    assert {"README.md", "Makefile", "main.c", "board.ld", "sections.ld", "startup.c",
            "net.input.bin", "net.o", "net.h"} <= names

    # What the user builds is what the export compiled, from the document's recipe.
    qdq = window.quant.quantized()
    compiled = compilation(qdq, window.document.pipeline)
    net = compiled.net(driver_options(options))
    assert net.object == (folder / "net.o").read_bytes()
    (image,) = net.data_inputs

    readme = (folder / "README.md").read_text()
    build = readme_commands(readme, "Build and run")
    assert build[0] == "make" and "-M mps2-an500" in build[1]  # Cortex-M7's QEMU board
    # The dialog's Build line is the README's commands, in the exported folder.
    assert dialog.command_line.text().endswith(" && ".join(build))
    assert f"cd '{folder}'" in dialog.command_line.text()

    # The folder's own input: the interpreter on the same bytes gives the same outputs.
    pattern = np.fromfile(folder / "net.input.bin", np.float32).reshape(image.shape)
    printed = parse_outputs(net, run_as_a_user(build, folder))
    expected = run(compiled.final, {image.name: pattern})
    assert set(printed) == set(expected)
    for name, value in expected.items():
        assert np.array_equal(printed[name], value), name

    # The user's own input, put in as the README says.
    own = readme_commands(readme, "Your own input")
    (given,) = [word.split("=", 1)[1] for word in own[0].split() if word.startswith("INPUT=")]
    digit = np.load(DIGIT).astype(np.float32)
    digit.tofile(folder / given)
    printed = parse_outputs(net, run_as_a_user(own, folder))
    (logits,) = run(compiled.final, {image.name: digit}).values()
    (board,) = printed.values()
    assert np.array_equal(board, logits)
    assert int(np.argmax(board)) == 2  # the sample is a 2, and int8 still says so
    assert not np.array_equal(board, expected[net.outputs[0].name])  # another input's answer
