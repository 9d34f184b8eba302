"""The Quantization dock says what Keep float costs, where the user ticks it.

Click a tensor's row: under the Keep float box the dock shows, once a worker has compiled
both int8 models, the arena, flash, RAM and float MACs with the tensor quantized and kept
float, the compiler's own figures for the document's target. Ticking the box keeps them (it
is the cost of what is now kept), and another target is another answer.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt

from app.quant.calibrate_dialog import CalibrationRequest
from app.quant.float_cost import COUNTING
from compiler.driver import Options
from compiler.quant.calibration_data import Normalization
from compiler.quant.float_cost import keep_float_cost, keep_float_instructions
from tests.gui.helpers import click_row, make_window

TIMEOUT = 60000  # two compiles of the digits model take a second
KEPT = "relu2_out"


def _shown(qtbot, window, tensor: str, act) -> str:
    costs = window.quant.float_costs
    with qtbot.waitSignal(costs.shown, timeout=TIMEOUT, check_params_cb=lambda t: t == tensor):
        act()
    return window.quant.panel.float_cost.text()


def test_the_dock_shows_what_keeping_a_tensor_float_costs(qtbot, tmp_path):
    window = make_window(qtbot)
    window.resize(1400, 900)
    quant = window.quant
    with qtbot.waitSignal(quant.calibrationEnded, timeout=TIMEOUT):
        quant.calibrate(CalibrationRequest("digits:train", "digits:test", Normalization()))
    window.document.set_target("cortex-m7")
    panel = quant.panel
    shown = _shown(qtbot, window, KEPT, lambda: click_row(qtbot, panel, KEPT))
    recipe, graph = window.document.quant.recipe(), window.document.graph
    cost = keep_float_cost(graph, recipe, KEPT, Options("cortex-m7"), window.document.pipeline)
    assert shown == replace(cost, instructions_note=COUNTING).text()
    assert cost.kept.arena > cost.quantized.arena
    # Then the instructions, counted under QEMU in the same worker.
    cost = replace(cost, instructions=keep_float_instructions(
        graph, recipe, KEPT, Options("cortex-m7"), window.document.pipeline))
    qtbot.waitUntil(lambda: panel.float_cost.text() == cost.text(), timeout=TIMEOUT)
    assert "instructions +" in cost.text()
    assert panel.float_cost.isVisible()
    qtbot.wait(50)  # the layout gives the label its lines
    label, live = panel.float_cost, panel.live
    assert label.height() >= label.heightForWidth(label.width())  # every line of it shown
    assert label.geometry().bottom() < live.geometry().top()  # above the range's readout
    folder = Path(os.environ.get("KILN_SHOTS", tmp_path))
    assert quant.dock.grab().save(str(folder / "quant_float_cost.png"))

    # Ticking the box: the same figures, now the cost of what the model keeps float.
    with qtbot.waitSignal(quant.evaluated, timeout=TIMEOUT):
        qtbot.mouseClick(panel.keep_float, Qt.MouseButton.LeftButton)
    assert KEPT in quant.session.profile.keep_float
    qtbot.waitUntil(lambda: panel.float_cost.text() == cost.text(), timeout=TIMEOUT)

    # Another tensor is its own answer; back on the first, the answer is known at once.
    other = "pool1_out"
    text = _shown(qtbot, window, other, lambda: click_row(qtbot, panel, other))
    assert text.startswith(f"Keeping {other} float on cortex-m7:") and text != cost.text()
    qtbot.waitUntil(lambda: not quant.float_costs.is_busy(), timeout=TIMEOUT)
    click_row(qtbot, panel, KEPT)
    assert panel.float_cost.text() == cost.text() and not quant.float_costs.is_busy()

    # Another target: compiled again for it.
    window.document.set_target("cortex-m4")
    text = _shown(qtbot, window, other, lambda: click_row(qtbot, panel, other))
    assert text.startswith(f"Keeping {other} float on cortex-m4:")
